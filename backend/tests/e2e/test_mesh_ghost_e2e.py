"""The ghost of the issue, end to end: an agent enrolled with a mesh address at which another
agent's echo server answers (no process of its own behind it). Real agents measure it: they
must record losses with status 5 (wrong_peer) and never an RTT for it, while they keep
measuring each other."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from stormwatch.devtools.bootstrap import OrgCredentials
from tests.conftest import ApiServer
from tests.e2e.agents import AgentProcess, go_build, meshing_pair, wait_until


@pytest.fixture(scope="module")
def agent_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return go_build(tmp_path_factory.mktemp("agent-bin") / "stormwatch-agent")


@pytest.fixture
def pair(agent_binary: Path, api_server: ApiServer, make_org: Callable[..., OrgCredentials],
         tmp_path: Path) -> Iterator[tuple[OrgCredentials, list[AgentProcess]]]:
    org = make_org()
    with meshing_pair(agent_binary, api_server, org, tmp_path, "real", rate_hz=20) as agents:
        yield org, agents


def counts(db: Engine, org_id: str, dst: str) -> dict[tuple[str, int], int]:
    with db.connect() as c:
        rows = c.execute(text(
            "SELECT src_agent_id::text, status, count(*) FROM mesh_samples "
            "WHERE org_id = :o AND dst_agent_id = :d GROUP BY 1, 2"),
            {"o": org_id, "d": dst}).all()
    return {(src, st): n for src, st, n in rows}


def test_real_agents_record_a_ghost_as_wrong_peer_losses_never_as_rtts(
        pair: tuple[OrgCredentials, list[AgentProcess]], api_server: ApiServer,
        db: Engine) -> None:
    org, agents = pair
    for a in agents:
        a.enroll()
    with api_server.client(headers={"Authorization": f"Bearer {org.api_key}"}) as admin:
        fleet = {a["name"]: a for a in admin.get("/api/v1/agents").json()}
    with api_server.client() as c:
        r = c.post("/api/v1/agents/enroll", json={
            "enrollment_token": org.enrollment_token, "name": "ghost", "agent_version": "t",
            "mesh_address": fleet["real-0"]["mesh_address"]})
        assert r.status_code == 201, r.text
        ghost = r.json()["agent_id"]
    for a in agents:
        a.start()
    ids = [a.agent_id for a in agents]

    def measured() -> bool:
        to_ghost = counts(db, org.org_id, ghost)
        return all(to_ghost.get((src, 5), 0) >= 20 and
                   all(counts(db, org.org_id, dst).get((src, 0), 0) >= 20 for dst in ids)
                   for src in ids)

    wait_until("wrong_peer samples for the ghost and ok ones between the real agents", 180,
               measured, every_s=1)
    to_ghost = counts(db, org.org_id, ghost)
    assert not any(st == 0 for _src, st in to_ghost), to_ghost
    for a in agents:
        a.stop()
        assert "mesh reply from another agent" in a.log.read_text(), a.log.read_text()[-2000:]
