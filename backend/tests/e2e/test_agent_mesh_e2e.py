"""Three real agents against the real API: they enroll, fetch their config and mesh over
loopback; the API is stopped for 35 s under load and restarted; afterwards the database holds
every sample the agents generated, exactly once."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine, text

from stormwatch.devtools.bootstrap import OrgCredentials
from tests.conftest import ApiServer
from tests.e2e.agents import AgentProcess, go_build, wait_until

# Longer than the agents' config poll (30 s + 10% jitter), so each one's poll fails too, and
# long enough for every batch cut meanwhile to be spooled and retried with growing backoff.
OUTAGE_S = 35


@pytest.fixture(scope="module")
def agent_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return go_build(tmp_path_factory.mktemp("agent-bin") / "stormwatch-agent")


@pytest.fixture
def fleet(agent_binary: Path, api_server: ApiServer, make_org: Callable[..., OrgCredentials],
          tmp_path: Path) -> Iterator[tuple[OrgCredentials, list[AgentProcess]]]:
    org = make_org()
    with api_server.client() as api:
        r = api.patch("/api/v1/org", headers={"Authorization": f"Bearer {org.api_key}"},
                      json={"mesh_settings": {"enabled": True, "rate_hz": 50, "payload_bytes": 256,
                                              "timeout_ms": 1000}})
        assert r.status_code == 200, r.text
    agents = [AgentProcess(agent_binary, tmp_path, f"e2e-{i}", api_server.base_url,
                           org.enrollment_token, zone=zone)
              for i, zone in enumerate(["loopback-a", "loopback-a", "loopback-b"])]
    try:
        yield org, agents
    finally:
        for a in agents:
            a.kill()
        if api_server.proc is None:
            api_server.start()


def test_agents_ship_every_generated_sample_exactly_once_through_a_35s_api_outage(
        fleet: tuple[OrgCredentials, list[AgentProcess]], api_server: ApiServer,
        db: Engine) -> None:
    org, agents = fleet
    # Enrolling first means the first config every agent fetches already lists all peers.
    for a in agents:
        a.enroll()
    for a in agents:
        a.start()

    def meshed() -> bool:
        try:
            return all(a.metrics().get("stormwatch_agent_samples_shipped_total:mesh", 0) > 0
                       and a.metrics().get("stormwatch_agent_mesh_connected_peers") == 3
                       for a in agents)
        except httpx.HTTPError:
            return False

    wait_until("three agents meshing and shipping", 90, meshed)

    api_server.stop()
    outage_end = time.monotonic() + OUTAGE_S
    while time.monotonic() < outage_end:
        assert all(a.proc is not None and a.proc.poll() is None for a in agents)
        time.sleep(1)
    spooled = {a.name: a.metrics()["stormwatch_agent_samples_spooled_total:mesh"] for a in agents}
    assert all(v > 0 for v in spooled.values()), spooled
    api_server.start()

    wait_until("spools drained", 180, lambda: all(
        a.metrics()["stormwatch_agent_spool_batches"] == 0 for a in agents))
    finals = {a.agent_id: a.stop() for a in agents}

    with db.connect() as c:
        rows = c.execute(text(
            "SELECT src_agent_id::text, count(*), "
            "count(DISTINCT (dst_agent_id, round)) FROM mesh_samples "
            "WHERE org_id = :o GROUP BY src_agent_id"), {"o": org.org_id}).all()
        pairs = c.execute(text(
            "SELECT count(DISTINCT (src_agent_id, dst_agent_id)) FROM mesh_samples "
            "WHERE org_id = :o AND status = 0"), {"o": org.org_id}).scalar()
    stored = {src: (n, distinct) for src, n, distinct in rows}
    assert pairs == 9
    for agent_id, final in finals.items():
        assert final["spooled_batches_left"] == 0
        assert final["mesh_dropped"] == 0
        n, distinct = stored[agent_id]
        assert distinct == n, f"{agent_id}: {n - distinct} duplicate rows"
        assert n == final["mesh_measured"], (agent_id, n, final)
        assert final["mesh_shipped"] == final["mesh_measured"]
