"""A route that changes under two real agents (tests/e2e/routed.py, docs/paths.md): a1 behind
r1 and a2 behind r2 mesh and trace each other over r1-r2; mid-run the route between them
moves through a third router, r3, over two links that each hold frames 5 ms each way
(testbed/linkem: this kernel has no netem). The API reports, for a1 -> a2, a level shift of
about 20 ms with the path change beside it, naming r1 as the last hop the paths share and r3
as where they part."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stormwatch.devtools.bootstrap import OrgCredentials
from tests.conftest import ApiServer, Services
from tests.e2e.agents import go_build, wait_until
from tests.e2e.routed import NetnsAgent, RoutedNet, api_on, ip, routed_network, sysctl

LINK_DELAY_MS = 5
WINDOW_S = 10


@pytest.fixture(scope="module")
def net() -> Iterator[RoutedNet]:
    yield from routed_network([("a1", "r1"), ("a2", "r2")])


@pytest.fixture(scope="module")
def routed_api(net: RoutedNet, services: Services) -> Iterator[ApiServer]:
    yield from api_on(net, services)


@pytest.fixture(scope="module")
def binaries(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("paths-bin")
    return (go_build(d / "stormwatch-agent"),
            go_build(d / "linkem", "./testbed/cmd/linkem"))


def sleep_until(t: datetime) -> None:
    """Waits for data to accumulate (windows at a level), not for an event."""
    time.sleep(max(0.0, (t - datetime.now(UTC)).total_seconds()))


class Detour:
    """r3, joined to r1 and r2 by delayed links; take() routes a1 <-> a2 through it."""

    def __init__(self, net: RoutedNet, linkem: Path) -> None:
        self.net, o = net, net.octet
        self.r1, self.r2 = net.tag + "r1", net.tag + "r2"
        self.r3 = net._netns("r3")
        sysctl(self.r3, "net.ipv4.ip_forward", "1")
        self.procs: list[subprocess.Popen[str]] = []
        # r1 (10.o.250.1) - r3 (.250.2) and r3 (10.o.251.1) - r2 (.251.2)
        for i, (a, b, subnet) in enumerate([(self.r1, self.r3, 250), (self.r3, self.r2, 251)]):
            ta, tb = f"{net.tag}l{i}a", f"{net.tag}l{i}b"
            p = subprocess.Popen([str(linkem), "-a", ta, "-ns-a", a, "-b", tb, "-ns-b", b,
                                  "-delay", f"{LINK_DELAY_MS}ms"],
                                 stdout=subprocess.PIPE, text=True)
            self.procs.append(p)
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
            for dev, ns, host in ((ta, a, 1), (tb, b, 2)):
                ip("addr", "add", f"10.{o}.{subnet}.{host}/30", "dev", dev, ns=ns)
                ip("link", "set", dev, "up", ns=ns)
        self.r3_towards_a1 = f"10.{o}.250.2"
        self.r2_towards_r3 = f"10.{o}.251.2"

    def take(self) -> None:
        o, a1, a2 = self.net.octet, self.net.hosts["a1"], self.net.hosts["a2"]
        ip("route", "add", a2.subnet, "via", f"10.{o}.251.2", ns=self.r3)
        ip("route", "add", a1.subnet, "via", f"10.{o}.250.1", ns=self.r3)
        ip("route", "replace", a2.subnet, "via", f"10.{o}.250.2", ns=self.r1)
        ip("route", "replace", a1.subnet, "via", f"10.{o}.251.1", ns=self.r2)

    def close(self) -> None:
        for p in self.procs:
            p.send_signal(signal.SIGTERM)
        for p in self.procs:
            p.wait(10)


def test_a_route_moved_through_a_third_router_is_a_level_shift_with_the_path_change_beside_it(
        net: RoutedNet, routed_api: ApiServer, make_org: Callable[..., OrgCredentials],
        binaries: tuple[Path, Path], tmp_path: Path) -> None:
    agent_bin, linkem = binaries
    for r in ("r1", "r2"):  # a trace's probes come faster than one ICMP error a second
        sysctl(net.tag + r, "net.ipv4.icmp_ratelimit", "0")
    detour = Detour(net, linkem)
    sysctl(detour.r3, "net.ipv4.icmp_ratelimit", "0")
    org = make_org()
    people = {"Authorization": f"Bearer {org.api_key}"}
    agents = [NetnsAgent(agent_bin, tmp_path, name, routed_api.base_url, org.enrollment_token,
                         net.hosts[name]) for name in ("a1", "a2")]
    try:
        with routed_api.client(headers=people) as api:
            r = api.patch("/api/v1/org", json={"mesh_settings": {
                "enabled": True, "rate_hz": 10, "payload_bytes": 128, "timeout_ms": 2000,
                "path_trace_interval_s": 60, "path_trace_proto": "tcp"}})
            assert r.status_code == 200, r.text
            for a in agents:
                a.enroll()
            start = datetime.now(UTC)
            for a in agents:
                a.start()
            ids = {a["name"]: a["id"] for a in api.get("/api/v1/agents").json()}
            pair = {"src": ids["a1"], "dst": ids["a2"]}

            def current() -> dict | None:
                return api.get("/api/v1/analytics/paths/current", params=pair).json()["path"]

            wait_until("a1's first trace to a2", 60, lambda: current() is not None, every_s=1)
            before = current()
            assert before is not None
            r1_a1 = net.hosts["a1"].subnet.replace("0/24", "1")
            assert [h["addrs"] for h in before["hops"]] == [
                [r1_a1], [f"10.{net.octet}.254.2"], [net.hosts["a2"].address]]
            # Enough windows at the old level for the shift to stand out.
            sleep_until(start + timedelta(seconds=50))
            detour.take()
            moved = datetime.now(UTC)
            # Asked for at once: a1 traces at its next config poll (within 33 s), ahead of
            # its schedule (within 60 s); whichever comes first shows the change.
            r = api.post("/api/v1/analytics/paths/requests", json=pair)
            assert r.status_code == 202, r.text

            def changes() -> list[dict]:
                end = datetime.now(UTC) + timedelta(minutes=1)
                return api.get("/api/v1/analytics/paths/changes", params={
                    **pair, "start": start.isoformat(), "end": end.isoformat()}).json()["changes"]

            wait_until("the path change", 100, lambda: len(changes()) == 1, every_s=2)
            [change] = changes()
            assert change["diff_ttl"] == 2 and change["parting_after"] == [r1_a1]
            assert [h["addrs"] for h in change["to_path"]["hops"]] == [
                [r1_a1], [detour.r3_towards_a1], [detour.r2_towards_r3], [net.hosts["a2"].address]]
            # r3 is one delayed link past r1: about 10 ms more there (5 ms each way).
            assert change["added_rtt_us"] is not None and change["added_rtt_us"] >= 9_000
            sleep_until(moved + timedelta(seconds=50))

            r = api.get("/api/v1/analytics/mesh/level-shifts", params={
                **pair, "start": start.isoformat(), "end": datetime.now(UTC).isoformat(),
                "window_s": WINDOW_S})
            assert r.status_code == 200, r.text
            near = timedelta(seconds=2 * WINDOW_S)
            shifts = [s for s in r.json()["shifts"]
                      if abs(datetime.fromisoformat(s["time"]) - moved) <= near]
            assert len(shifts) == 1, r.json()["shifts"]
            [shift] = shifts
            # 5 ms each way on each of two links: 20 ms of round trip, and a few hundred
            # microseconds for each of the four crossings of a user-space link.
            assert 19_000 <= shift["step"] <= 23_000, shift
            pc = shift["path_change"]
            assert pc is not None and pc["diff_ttl"] == 2 and pc["parting_after"] == [r1_a1]
            # The request was served by a trace that names it, or outrun by the schedule.
            traces = api.get("/api/v1/analytics/paths/traces", params={
                **pair, "start": moved.isoformat()}).json()["traces"]
            assert {t["trigger"] for t in traces} <= {"request", "schedule"} and traces
    finally:
        for a in agents:
            a.kill()
        detour.close()
