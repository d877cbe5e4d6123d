"""Real agents against a real API whose body limit is smaller than their batches: every batch
the API refuses with 413 is split into halves until it fits, so the database ends with every
sample the agents measured, exactly once, and nothing counted as dropped."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine, text

from stormwatch.devtools.bootstrap import OrgCredentials
from tests.conftest import LOOPBACK_ALLOWED, ApiServer, Services
from tests.e2e.agents import AgentProcess, go_build, meshing_pair, wait_until

# A mesh batch of two agents at 50 rounds/s cut every 2 s is a few kB gzipped; one sample
# with the batch's ids is a few hundred bytes, so every batch must be split and every half fits.
MAX_BODY_BYTES = 900
MEASURED_PER_AGENT = 1500


@pytest.fixture(scope="module")
def agent_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return go_build(tmp_path_factory.mktemp("agent-bin") / "stormwatch-agent")


@pytest.fixture(scope="module")
def small_api(services: Services) -> Iterator[ApiServer]:
    server = ApiServer(services, {"EGRESS_ALLOW": LOOPBACK_ALLOWED,
                                  "INGEST_MAX_BODY_BYTES": str(MAX_BODY_BYTES)})
    server.start()
    yield server
    server.stop()


@pytest.fixture
def pair(agent_binary: Path, small_api: ApiServer, make_org: Callable[..., OrgCredentials],
         tmp_path: Path) -> Iterator[tuple[OrgCredentials, list[AgentProcess]]]:
    org = make_org()
    with meshing_pair(agent_binary, small_api, org, tmp_path, "split", rate_hz=50) as agents:
        yield org, agents


def test_batches_over_the_api_body_limit_are_split_and_every_sample_is_stored_once(
        pair: tuple[OrgCredentials, list[AgentProcess]], db: Engine) -> None:
    org, agents = pair
    for a in agents:
        a.enroll()
    for a in agents:
        a.start()

    def measured_enough() -> bool:
        try:
            return all(a.metrics().get("stormwatch_agent_samples_measured_total:mesh", 0)
                       >= MEASURED_PER_AGENT for a in agents)
        except httpx.HTTPError:
            return False

    wait_until(f"{MEASURED_PER_AGENT} mesh samples measured by each agent", 180, measured_enough)
    split = {a.name: a.metrics().get("stormwatch_agent_batches_split_total", 0) for a in agents}
    finals = {a.agent_id: a.stop() for a in agents}

    with db.connect() as c:
        rows = c.execute(text(
            "SELECT src_agent_id::text, count(*), count(DISTINCT (dst_agent_id, round)) "
            "FROM mesh_samples WHERE org_id = :o GROUP BY src_agent_id"), {"o": org.org_id}).all()
        quorum = dict(c.execute(text(
            "SELECT agent_id::text, count(*) FROM quorum_samples WHERE org_id = :o "
            "GROUP BY agent_id"), {"o": org.org_id}).all())
    stored = {src: (n, distinct) for src, n, distinct in rows}
    for agent_id, final in finals.items():
        assert final["mesh_dropped"] == 0, final
        assert final["quorum_dropped"] == 0, final
        assert final["spooled_batches_left"] == 0, final
        n, distinct = stored.get(agent_id, (0, 0))
        assert distinct == n, f"{agent_id}: {n - distinct} duplicate rows"
        assert n == final["mesh_measured"] == final["mesh_shipped"], (agent_id, n, final)
        assert quorum.get(agent_id, 0) == final["quorum_measured"] == final["quorum_shipped"]
    assert all(v > 0 for v in split.values()), split
