"""Real agents run scheduled TCP and UDP experiments on loopback through a shaping proxy
(agents/testbed/cmd/shaper) that forwards at a high rate, then a low one after a set volume in each
direction. The per-second samples the receivers ship through the API, and the transition
the backend detects in them (time, both levels, volume before), match what the proxy did
within 5%."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from statistics import mean
from typing import Any

import pytest
from sqlalchemy import Engine, text

from stormwatch.devtools.bootstrap import OrgCredentials
from stormwatch.devtools.services import free_port
from tests.conftest import ApiServer
from tests.e2e.agents import AgentProcess, go_build, wait_until

DURATION_S = 20
# Both agents poll their config every 30 s: the experiment starts after their next poll.
LEAD_S = 40
# Per direction: (high, low) bytes/s through the shaper and the volume at the high rate
# (8 s of it, so the switch falls well inside a 20 s direction).
SHAPES = {"tcp": (40e6, 16e6, 320_000_000), "udp": (12e6, 5e6, 96_000_000)}
# UDP is offered above the shaper's high rate, which polices the excess (seed 004 §IV-D:
# lower throughput shows up as proportionally higher loss).
UDP_OFFERED_BITS_PER_S = 144_000_000


@pytest.fixture(scope="module")
def binaries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("tput-bin")
    commands = (("agent", "./cmd/stormwatch-agent"), ("shaper", "./testbed/cmd/shaper"))
    return {name: go_build(out / name, pkg) for name, pkg in commands}


class Shaper:
    """The proxy in front of a responder; its final report is the truth to compare with."""

    def __init__(self, binary: Path, upstream: str, high: float, low: float, after: int,
                 log: Path) -> None:
        self.address = f"127.0.0.1:{free_port()}"
        self.log = log
        with open(log, "wb") as logf:
            self.proc = subprocess.Popen(
                [str(binary), "-listen", self.address, "-upstream", upstream,
                 "-high-mbit", str(high * 8 / 1e6), "-low-mbit", str(low * 8 / 1e6),
                 "-switch-after-bytes", str(after)],
                stdout=logf, stderr=subprocess.STDOUT, env={**os.environ, "TZ": "UTC"})
        wait_until("the shaper to listen", 20, lambda: "->" in log.read_text())

    def finish(self) -> dict[str, tuple[int, datetime]]:
        """Stops it; per direction (up: initiator -> responder) its bytes and switch time."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(20)
        out = {}
        for m in re.finditer(r"shaper: (up|down) (\d+) bytes, switched at "
                             r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(\.\d+)? \+0000 UTC",
                             self.log.read_text()):
            frac = (m.group(4) or ".0")[:7]
            at = datetime.fromisoformat(m.group(3) + frac).replace(tzinfo=UTC)
            out[m.group(1)] = (int(m.group(2)), at)
        assert set(out) == {"up", "down"}, self.log.read_text()
        return out


@pytest.fixture
def stack(binaries: dict[str, Path], api_server: ApiServer,
          make_org: Callable[..., OrgCredentials], tmp_path: Path
          ) -> Iterator[tuple[OrgCredentials, dict[str, AgentProcess]]]:
    org = make_org()
    with api_server.client() as api:
        # No mesh: only the experiments load the two cores.
        r = api.patch("/api/v1/org", headers={"Authorization": f"Bearer {org.api_key}"},
                      json={"mesh_settings": {"enabled": False}})
        assert r.status_code == 200, r.text
    agents = {name: AgentProcess(binaries["agent"], tmp_path, f"tput-{name}",
                                 api_server.base_url, org.enrollment_token, region=region,
                                 zone=f"{region}-a", throughput=True)
              for name, region in (("tcp-a", "eu"), ("tcp-b", "us"), ("udp-a", "eu"),
                                   ("udp-b", "us"))}
    try:
        yield org, agents
    finally:
        for a in agents.values():
            a.kill()


def within(got: float, want: float, frac: float = 0.05) -> bool:
    return abs(got - want) <= frac * abs(want)


def test_experiments_through_a_shaper_store_its_rates_and_its_switch_within_5_percent(
        stack: tuple[OrgCredentials, dict[str, AgentProcess]], binaries: dict[str, Path],
        api_server: ApiServer, db: Engine, tmp_path: Path,
        request: pytest.FixtureRequest) -> None:
    org, agents = stack
    headers = {"Authorization": f"Bearer {org.api_key}"}
    for a in agents.values():
        a.enroll()
        a.start()
    api = api_server.client(headers=headers)
    request.addfinalizer(api.close)

    def addresses() -> dict[str, str]:
        return {a["id"]: a["throughput_address"] for a in api.get("/api/v1/agents").json()}

    wait_until("every agent's throughput_address", 60,
               lambda: all(addresses().get(a.agent_id) for a in agents.values()))
    r = api.put("/api/v1/throughput/settings", json={
        "enabled": False, "monthly_budget_bytes": 100 * 10**9, "default_duration_s": DURATION_S})
    assert r.status_code == 200, r.text
    shapers: dict[str, Shaper] = {}
    experiments: dict[str, dict[str, Any]] = {}
    start_at = (datetime.now(UTC) + timedelta(seconds=LEAD_S)).replace(microsecond=0)
    for proto in ("tcp", "udp"):
        ini, resp = agents[f"{proto}-a"], agents[f"{proto}-b"]
        high, low, after = SHAPES[proto]
        shapers[proto] = Shaper(binaries["shaper"], addresses()[resp.agent_id], high, low,
                                after, tmp_path / f"shaper-{proto}.log")
        # The initiator reaches the responder through the proxy, as it would through a NAT
        # or a load balancer in front of it.
        with db.begin() as c:
            c.execute(text("UPDATE agents SET throughput_address = :a WHERE id = :id"),
                      {"a": shapers[proto].address, "id": resp.agent_id})
        r = api.post("/api/v1/throughput/experiments", json={
            "initiator_agent_id": ini.agent_id, "responder_agent_id": resp.agent_id,
            "proto": proto, "start_at": start_at.isoformat(), "duration_s": DURATION_S,
            "streams": 4, "udp_rate_bits_per_s": UDP_OFFERED_BITS_PER_S,
            "udp_datagram_bytes": 8000})
        assert r.status_code == 201, r.text
        experiments[proto] = r.json()

    def stored() -> dict[str, list[int]]:
        return {p: [len(d["samples"]) for d in api.get(
            f"/api/v1/throughput/experiments/{e['id']}/samples").json()["directions"]]
            for p, e in experiments.items()}

    # Every second of both directions, or, on a machine too loaded for that, a minute after
    # the last direction ended: the checks below then say which seconds are missing.
    done_by = start_at + timedelta(seconds=2 * DURATION_S + 60)
    wait_until("both experiments' samples of both directions", LEAD_S + 2 * DURATION_S + 90,
               lambda: datetime.now(UTC) > done_by or all(
                   len(n) == 2 and min(n) >= DURATION_S for n in stored().values()))
    counts = stored()
    assert all(len(n) == 2 and min(n) > 0 for n in counts.values()), (
        f"seconds stored per direction: {counts}; agent logs:\n" + "\n".join(
            f"--- {name}\n" + a.log.read_text()[-3000:] for name, a in agents.items()))
    problems = []
    for proto, exp in experiments.items():
        high, low, after = SHAPES[proto]
        truth = shapers[proto].finish()
        detail = api.get(f"/api/v1/throughput/experiments/{exp['id']}").json()
        samples = api.get(f"/api/v1/throughput/experiments/{exp['id']}/samples").json()
        for d, s, shaped in zip(detail["directions"], samples["directions"], ("up", "down"),
                                strict=True):
            label = f"{proto} {d['direction']}"
            proxy_bytes, switched_at = truth[shaped]
            values = [p["bytes_per_s"] for p in s["samples"]]
            t0 = datetime.fromisoformat(s["samples"][0]["time"]) - timedelta(seconds=1)
            true_offset = (switched_at - t0).total_seconds()
            ends = [datetime.fromisoformat(p["time"]) for p in s["samples"]]
            # Whole seconds either side of the switch (the first may hold the ramp-up).
            highs = [v for i, (v, e) in enumerate(zip(values, ends, strict=True))
                     if i > 0 and e <= switched_at]
            lows = [v for v, e in zip(values, ends, strict=True)
                    if e - timedelta(seconds=1) >= switched_at]
            # What the proxy did: its volume at the high level over the time it took, the rest
            # over the time after (on a loaded machine a sender may fall short of the rate
            # the proxy allows, so its configured rates are only an upper bound).
            proxy_high = after / true_offset
            proxy_low = (proxy_bytes - after) / (ends[-1] - switched_at).total_seconds()
            checks = {
                "seconds stored": (len(values), DURATION_S),
                "per-second level before the switch (mean)": (mean(highs), proxy_high),
                "per-second level after the switch (mean)": (mean(lows), proxy_low),
                "bytes stored against the proxy's": (sum(values), proxy_bytes),
            }
            if not (proxy_high <= high * 1.05 and proxy_low <= low * 1.05
                    and proxy_low < 0.6 * proxy_high):
                problems.append(f"{label}: the proxy did not shape as set: {proxy_high:.4g} "
                                f"then {proxy_low:.4g} bytes/s")
            if len(d["transitions"]) != 1:
                problems.append(f"{label}: {len(d['transitions'])} transitions: "
                                f"{d['transitions']}")
            else:
                t = d["transitions"][0]
                checks.update({
                    "transition offset (s)": (t["offset_s"], true_offset),
                    "transition level before": (t["level_before_bytes_per_s"], proxy_high),
                    "transition level after": (t["level_after_bytes_per_s"], proxy_low),
                    "volume before the transition": (t["bytes_before"], after),
                })
            for what, (got, want) in checks.items():
                if not within(got, want):
                    problems.append(f"{label} {what}: {got:.6g}, want {want:.6g} +- 5%")
            if problems and problems[-1].startswith(label):
                problems.append(f"{label}: proxy switched at {true_offset:.2f} s, seconds: "
                                + " ".join(f"{v / 1e6:.1f}" for v in values))
    assert not problems, "\n".join(problems)
