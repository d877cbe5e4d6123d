"""Real agent processes for the end-to-end tests: built from agents/, configured on loopback
with free ports, enrolled against the real API, started, and stopped with their final
counts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from stormwatch.devtools.agent_metrics import parse_metrics
from stormwatch.devtools.bootstrap import OrgCredentials
from stormwatch.devtools.services import free_port
from tests.conftest import REPO, ApiServer

AGENTS_DIR = REPO / "agents"


def wait_until(what: str, timeout_s: float, cond: Callable[[], bool],
               every_s: float = 0.25) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(every_s)


def go_build(out: Path, package: str = "./cmd/stormwatch-agent") -> Path:
    """A static build of one of agents/'s commands into `out`."""
    subprocess.run(["go", "build", "-trimpath", "-o", str(out), package], cwd=AGENTS_DIR,
                   check=True, env={**os.environ, "CGO_ENABLED": "0"})
    return out


def agent_config(home: Path, name: str, api_url: str, token: str, *, region: str = "loopback",
                 zone: str = "loopback-a", throughput: bool = False,
                 metrics_port: int | None = None) -> Path:
    """The agent's YAML: every listener on a free loopback port; the throughput probe only
    when asked for, since agents that share a host would otherwise all want its one port."""
    config = home / "agent.yaml"
    tput = f"\"127.0.0.1:{free_port()}\"" if throughput else "\"\""
    metrics = f"\"127.0.0.1:{metrics_port}\"" if metrics_port else "\"\""
    config.write_text(
        f"api_url: {api_url}\n"
        f"enrollment_token: {token}\n"
        f"state_dir: {home / 'state'}\n"
        f"name: {name}\n"
        f"mesh:\n  listen: \"127.0.0.1:{free_port()}\"\n"
        f"throughput:\n  listen: {tput}\n"
        f"metadata:\n  detect: false\n  provider: local\n  region: {region}\n"
        f"  zone: {zone}\n  subnet: lo\n"
        f"metrics:\n  listen: {metrics}\n"
        "flush_deadline: 20s\n")
    return config


def final_counts(name: str, log: Path) -> dict[str, object]:
    """The counts an agent logged last when it stopped (a log may hold several runs)."""
    last: dict[str, object] | None = None
    for line in log.read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("msg") == "agent stopped":
            last = dict(rec)
    if last is None:
        raise AssertionError(f"{name} logged no final counts:\n{log.read_text()}")
    return last


class AgentProcess:
    """One agent under its own home folder, logging to agent.log there."""

    def __init__(self, binary: Path, home: Path, name: str, api_url: str, token: str, *,
                 region: str = "loopback", zone: str = "loopback-a",
                 throughput: bool = False) -> None:
        self.binary, self.name = binary, name
        self.home = home / name
        self.home.mkdir(parents=True)
        self.metrics_port = free_port()
        self.config = agent_config(self.home, name, api_url, token, region=region, zone=zone,
                                   throughput=throughput, metrics_port=self.metrics_port)
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
        return parse_metrics(
            httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).text)

    def stop(self, timeout_s: float = 60) -> dict[str, object]:
        """SIGTERM, then the final counts the agent logs once it has flushed."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout_s)
        return final_counts(self.name, self.log)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@contextmanager
def meshing_pair(binary: Path, api: ApiServer, org: OrgCredentials, home: Path, prefix: str,
                 rate_hz: int) -> Iterator[list[AgentProcess]]:
    """Two agents of `org` (not started), its mesh on at `rate_hz`; killed on the way out."""
    with api.client() as client:
        r = client.patch("/api/v1/org", headers={"Authorization": f"Bearer {org.api_key}"},
                         json={"mesh_settings": {"enabled": True, "rate_hz": rate_hz,
                                                 "payload_bytes": 64, "timeout_ms": 1000}})
        assert r.status_code == 200, r.text
    agents = [AgentProcess(binary, home, f"{prefix}-{i}", api.base_url, org.enrollment_token)
              for i in range(2)]
    try:
        yield agents
    finally:
        for a in agents:
            a.kill()
