"""Real agents trace the paths to their peers and the API keeps them: each pair's current
path and its traces, from agents meshing over loopback."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stormwatch.devtools.bootstrap import OrgCredentials
from tests.conftest import ApiServer
from tests.e2e.agents import AgentProcess, go_build, wait_until


@pytest.fixture(scope="module")
def agent_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return go_build(tmp_path_factory.mktemp("agent-bin") / "stormwatch-agent")


def test_agents_trace_each_peer_within_their_first_half_minute_and_the_api_keeps_the_paths(
        agent_binary: Path, api_server: ApiServer, make_org: Callable[..., OrgCredentials],
        tmp_path: Path) -> None:
    org = make_org()
    people = {"Authorization": f"Bearer {org.api_key}"}
    with api_server.client() as api:
        r = api.patch("/api/v1/org", headers=people, json={"mesh_settings": {
            "enabled": True, "rate_hz": 5, "payload_bytes": 64, "timeout_ms": 1000,
            "path_trace_interval_s": 60, "path_trace_proto": "tcp"}})
        assert r.status_code == 200, r.text
        agents = [AgentProcess(agent_binary, tmp_path, f"paths-{i}", api_server.base_url,
                               org.enrollment_token, zone="loopback-a") for i in range(2)]
        try:
            for a in agents:
                a.enroll()
            for a in agents:
                a.start()
            ids = {a["name"]: a["id"] for a in api.get("/api/v1/agents", headers=people).json()}
            pairs = [(ids["paths-0"], ids["paths-1"]), (ids["paths-1"], ids["paths-0"])]

            def current(src: str, dst: str) -> dict | None:
                r = api.get("/api/v1/analytics/paths/current", headers=people,
                            params={"src": src, "dst": dst})
                assert r.status_code == 200, r.text
                return r.json()["path"]

            wait_until("both pairs traced", 90, lambda: all(current(*p) for p in pairs))
            for src, dst in pairs:
                path = current(src, dst)
                assert path is not None and path["reached"]
                assert [h["addrs"] for h in path["hops"]] == [["127.0.0.1"]]
                traces = api.get("/api/v1/analytics/paths/traces", headers=people, params={
                    "src": src, "dst": dst,
                    "start": (datetime.now(UTC) - timedelta(minutes=5)).isoformat()}).json()
                [t] = traces["traces"]
                assert t["proto"] == "tcp" and t["trigger"] == "schedule"
                assert 0 < t["hops"][0]["rtt_med_us"] < 100_000
        finally:
            for a in agents:
                a.kill()
