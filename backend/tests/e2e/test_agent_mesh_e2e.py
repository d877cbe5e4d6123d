"""Three real agents against the real API: they enroll, fetch their config and mesh over
loopback; the API is stopped for 60 s under load and restarted; afterwards the database holds
every sample the agents generated, exactly once."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine, text

from stormwatch.devtools.bootstrap import OrgCredentials
from stormwatch.devtools.services import free_port
from tests.conftest import REPO, ApiServer

AGENTS_DIR = REPO / "agents"
OUTAGE_S = 60

def wait_until(what: str, timeout_s: float, cond: Callable[[], bool]) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.25)


@pytest.fixture(scope="module")
def agent_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("agent-bin") / "stormwatch-agent"
    subprocess.run(["go", "build", "-trimpath", "-o", str(out), "./cmd/stormwatch-agent"],
                   cwd=AGENTS_DIR, check=True, env={**os.environ, "CGO_ENABLED": "0"})
    return out


class Agent:
    def __init__(self, binary: Path, home: Path, name: str, api_url: str, token: str,
                 zone: str) -> None:
        self.binary, self.name = binary, name
        self.home = home / name
        self.home.mkdir(parents=True)
        self.metrics_port = free_port()
        self.config = self.home / "agent.yaml"
        self.config.write_text(
            f"api_url: {api_url}\n"
            f"enrollment_token: {token}\n"
            f"state_dir: {self.home / 'state'}\n"
            f"name: {name}\n"
            f"mesh:\n  listen: \"127.0.0.1:{free_port()}\"\n"
            f"metadata:\n  detect: false\n  provider: local\n  region: loopback\n"
            f"  zone: {zone}\n  subnet: lo\n"
            f"metrics:\n  listen: \"127.0.0.1:{self.metrics_port}\"\n"
            "flush_deadline: 20s\n")
        self.log = self.home / "agent.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def enroll(self) -> None:
        subprocess.run([str(self.binary), "enroll", "-config", str(self.config)], check=True,
                       capture_output=True)

    @property
    def agent_id(self) -> str:
        state = json.loads((self.home / "state" / "agent.json").read_text())
        return str(state["agent_id"])

    def start(self) -> None:
        with open(self.log, "ab") as logf:
            self.proc = subprocess.Popen([str(self.binary), "run", "-config", str(self.config)],
                                         stdout=logf, stderr=subprocess.STDOUT)

    def metrics(self) -> dict[str, float]:
        body = httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).text
        out: dict[str, float] = {}
        for line in body.splitlines():
            m = re.match(r'^(\w+)(\{kind="(\w+)"\})? ([0-9.e+-]+)$', line)
            if m:
                out[m.group(1) + (f":{m.group(3)}" if m.group(3) else "")] = float(m.group(4))
        return out

    def stop(self) -> dict[str, object]:
        """SIGTERM, then the final counts the agent logs once it has flushed."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        for line in self.log.read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("msg") == "agent stopped":
                return dict(rec)
        raise AssertionError(f"{self.name} logged no final counts:\n{self.log.read_text()}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def fleet(agent_binary: Path, api_server: ApiServer, make_org: Callable[..., OrgCredentials],
          tmp_path: Path) -> Iterator[tuple[OrgCredentials, list[Agent]]]:
    org = make_org()
    with api_server.client() as api:
        r = api.patch("/api/v1/org", headers={"Authorization": f"Bearer {org.api_key}"},
                      json={"mesh_settings": {"enabled": True, "rate_hz": 50, "payload_bytes": 256,
                                              "timeout_ms": 1000}})
        assert r.status_code == 200, r.text
    agents = [Agent(agent_binary, tmp_path, f"e2e-{i}", api_server.base_url,
                    org.enrollment_token, zone)
              for i, zone in enumerate(["loopback-a", "loopback-a", "loopback-b"])]
    try:
        yield org, agents
    finally:
        for a in agents:
            a.kill()
        if api_server.proc is None:
            api_server.start()


def test_agents_ship_every_generated_sample_exactly_once_through_a_60s_api_outage(
        fleet: tuple[OrgCredentials, list[Agent]], api_server: ApiServer, db: Engine) -> None:
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
