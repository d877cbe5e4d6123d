"""A routed test network built from network namespaces and veth pairs, and real agents on it.

The API side is the root namespace: a veth whose root end holds <net>.0.1/30. Router
namespaces r1 and r2 forward between it and the agent subnets: r1 is linked to the root
namespace and to r2; every agent namespace sits alone on its own /24 behind one router,
default route via it. Names start with a per-run prefix (the pid), so parallel runs never
share one; teardown always deletes what it made, and a run sweeps what a killed earlier run
left behind. Needs CAP_NET_ADMIN; without it the fixture skips, saying so.
"""

from __future__ import annotations

import ipaddress
import os
import re
import signal
import subprocess
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.conftest import ApiServer, Services
from tests.e2e.agents import AgentProcess, final_counts, parse_metrics

PREFIX = "swr"
MESH_PORT = 7300
METRICS_PORT = 9309


class NoNetAdmin(Exception):
    """The process may not create network namespaces."""


def ip(*args: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    cmd = ["ip", "netns", "exec", ns, "ip", *args] if ns else ["ip", *args]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if check and res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {res.stderr.strip()}")
    return res


def sysctl(ns: str, key: str, value: str) -> None:
    subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", f"{key}={value}"], check=True,
                   capture_output=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale() -> list[str]:
    """Deletes namespaces and root-side veths of earlier runs whose process is gone."""
    gone: list[str] = []
    names = [line.split()[0] for line in ip("netns", "list").stdout.splitlines() if line.strip()]
    links = re.findall(r"^\d+: ([^:@]+)", ip("-o", "link", "show").stdout, re.M)
    for name in names + links:
        m = re.match(rf"^{PREFIX}(\d+)-", name)
        if m and not _alive(int(m.group(1))):
            if name in names:
                ip("netns", "del", name, check=False)
            else:
                ip("link", "del", name, check=False)
            gone.append(name)
    return gone


def _free_net() -> int:
    """A second octet whose 10.x.0.0/16 no route of the root namespace touches."""
    routes = ip("-4", "route", "show", "table", "all").stdout
    used = {int(m) for m in re.findall(r"\b10\.(\d+)\.", routes)}
    for octet in [*range(251, 256), *range(240, 251)]:
        if octet not in used:
            return octet
    raise RuntimeError("no free 10.x.0.0/16 among 10.240-255 for the routed test network")


@dataclass
class Host:
    ns: str
    address: str
    subnet: str
    router: str
    uplink: str  # the router's interface towards this host


@dataclass
class RoutedNet:
    """The network: build() makes it, close() removes all of it, whatever state it is in."""

    tag: str = field(default_factory=lambda: f"{PREFIX}{os.getpid()}-")
    octet: int = 0
    namespaces: list[str] = field(default_factory=list)
    root_links: list[str] = field(default_factory=list)
    hosts: dict[str, Host] = field(default_factory=dict)

    @property
    def api_address(self) -> str:
        return f"10.{self.octet}.0.1"

    @property
    def core_link(self) -> tuple[str, str]:
        """The r1 end of the r1-r2 link: (namespace, interface)."""
        return self.tag + "r1", "r1r2"

    def _netns(self, short: str) -> str:
        name = self.tag + short
        res = ip("netns", "add", name, check=False)
        if res.returncode != 0:
            if "Operation not permitted" in res.stderr or "Permission denied" in res.stderr:
                raise NoNetAdmin(res.stderr.strip())
            raise RuntimeError(f"ip netns add {name}: {res.stderr.strip()}")
        self.namespaces.append(name)
        ip("link", "set", "lo", "up", ns=name)
        return name

    def _veth(self, a: str, a_ns: str | None, b: str, b_ns: str) -> None:
        # Created in the root namespace under unique names, then moved and renamed.
        tmp_a, tmp_b = f"{self.tag}t{len(self.root_links)}a", f"{self.tag}t{len(self.root_links)}b"
        ip("link", "add", tmp_a, "type", "veth", "peer", "name", tmp_b)
        self.root_links.append(tmp_a)
        ip("link", "set", tmp_b, "netns", b_ns)
        ip("link", "set", tmp_b, "name", b, ns=b_ns)
        if a_ns is None:
            ip("link", "set", tmp_a, "name", a)
            self.root_links[-1] = a
        else:
            ip("link", "set", tmp_a, "netns", a_ns)
            ip("link", "set", tmp_a, "name", a, ns=a_ns)
            self.root_links.pop()

    def build(self) -> None:
        self.octet = _free_net()
        o = self.octet
        r1, r2 = self._netns("r1"), self._netns("r2")
        for r in (r1, r2):
            sysctl(r, "net.ipv4.ip_forward", "1")
        api_link = self.tag + "api"
        self._veth(api_link, None, "up0", r1)
        ip("addr", "add", f"10.{o}.0.1/30", "dev", api_link)
        ip("link", "set", api_link, "up")
        ip("addr", "add", f"10.{o}.0.2/30", "dev", "up0", ns=r1)
        ip("link", "set", "up0", "up", ns=r1)
        self._veth("r1r2", r1, "r2r1", r2)
        ip("addr", "add", f"10.{o}.254.1/30", "dev", "r1r2", ns=r1)
        ip("addr", "add", f"10.{o}.254.2/30", "dev", "r2r1", ns=r2)
        ip("link", "set", "r1r2", "up", ns=r1)
        ip("link", "set", "r2r1", "up", ns=r2)
        ip("route", "add", "default", "via", f"10.{o}.0.1", ns=r1)
        ip("route", "add", "default", "via", f"10.{o}.254.1", ns=r2)
        # Every agent subnet is reached through r1, which knows the ones behind r2.
        ip("route", "add", f"10.{o}.0.0/16", "via", f"10.{o}.0.2")

    def add_host(self, name: str, router: str, subnet_index: int) -> Host:
        """A namespace alone on 10.<o>.<subnet_index>.0/24 behind router "r1" or "r2"."""
        o, r = self.octet, self.tag + router
        ns = self._netns(name)
        uplink = f"h{subnet_index}"
        self._veth(uplink, r, "eth0", ns)
        net = ipaddress.ip_network(f"10.{o}.{subnet_index}.0/24")
        gw, addr = str(net.network_address + 1), str(net.network_address + 2)
        ip("addr", "add", f"{gw}/24", "dev", uplink, ns=r)
        ip("link", "set", uplink, "up", ns=r)
        ip("addr", "add", f"{addr}/24", "dev", "eth0", ns=ns)
        ip("link", "set", "eth0", "up", ns=ns)
        ip("route", "add", "default", "via", gw, ns=ns)
        if router == "r2":
            ip("route", "add", str(net), "via", f"10.{o}.254.2", ns=self.tag + "r1")
        host = Host(ns=ns, address=addr, subnet=str(net), router=router, uplink=uplink)
        self.hosts[name] = host
        return host

    def set_core_link(self, up: bool) -> None:
        ns, dev = self.core_link
        ip("link", "set", dev, "up" if up else "down", ns=ns)
        if up:
            # Taking a link down flushes the routes through it; a mended link gets them back.
            for host in self.hosts.values():
                if host.router == "r2":
                    ip("route", "replace", host.subnet, "via", f"10.{self.octet}.254.2", ns=ns)

    def close(self) -> None:
        for ns in reversed(self.namespaces):
            ip("netns", "del", ns, check=False)
        for link in self.root_links:
            ip("link", "del", link, check=False)
        self.namespaces.clear()
        self.root_links.clear()

    def leftovers(self) -> list[str]:
        names = ip("netns", "list").stdout + ip("-o", "link", "show").stdout
        return sorted(set(re.findall(rf"\b{re.escape(self.tag)}\w+", names)))


class NetnsAgent(AgentProcess):
    """An agent in its own namespace: mesh and metrics on its 10.x address, the API over the
    routers, metadata not detected and not overridden beyond provider, region and zone, so the
    subnet is the one of its interface."""

    def __init__(self, binary: Path, home: Path, name: str, api_url: str, token: str,
                 host: Host, *, advertise: str = "") -> None:
        self.host = host
        self.advertise = advertise
        super().__init__(binary, home, name, api_url, token)
        self.metrics_port = METRICS_PORT
        self.config.write_text(
            f"api_url: {api_url}\n"
            "allow_plain_http: true\n"
            f"enrollment_token: {token}\n"
            f"state_dir: {self.home / 'state'}\n"
            f"name: {name}\n"
            f"mesh:\n  listen: \"{host.address}:{MESH_PORT}\"\n"
            f"  advertise: \"{advertise}\"\n"
            "throughput:\n  listen: \"\"\n"
            "metadata:\n  detect: false\n  provider: lab\n  region: lab-1\n  zone: lab-1a\n"
            f"metrics:\n  listen: \"{host.address}:{METRICS_PORT}\"\n"
            "flush_deadline: 20s\n")

    def _cmd(self, *args: str) -> list[str]:
        return ["ip", "netns", "exec", self.host.ns, str(self.binary), *args,
                "-config", str(self.config)]

    def enroll(self) -> None:
        subprocess.run(self._cmd("enroll"), check=True, capture_output=True)

    def enroll_result(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self._cmd("enroll"), capture_output=True, text=True)

    def start(self) -> None:
        with open(self.log, "ab") as logf:
            # ip netns exec execs the agent, so signals to this pid reach it.
            self.proc = subprocess.Popen(self._cmd("run"), stdout=logf, stderr=subprocess.STDOUT)

    def metrics(self) -> dict[str, float]:
        return parse_metrics(
            httpx.get(f"http://{self.host.address}:{METRICS_PORT}/metrics", timeout=5).text)

    def stop(self, timeout_s: float = 60) -> dict[str, object]:
        """SIGTERM, then the final counts of this run (the log keeps earlier runs' too)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout_s)
        return self.final_counts()

    def final_counts(self) -> dict[str, object]:
        """The counts the agent logged last when it stopped."""
        return final_counts(self.name, self.log)


def routed_network(hosts: list[tuple[str, str]]) -> Iterator[RoutedNet]:
    """A module fixture's body: the network with `hosts` (name, router) on subnets 1, 2, ...;
    skips, saying so loudly, without CAP_NET_ADMIN; torn down (and checked) after."""
    sweep_stale()
    network = RoutedNet()
    try:
        network.build()
        for i, (name, router) in enumerate(hosts, start=1):
            network.add_host(name, router, i)
    except NoNetAdmin as exc:
        network.close()
        why = f"ROUTED NETWORK TESTS SKIPPED: no CAP_NET_ADMIN (ip netns add: {exc})"
        # A warning too, so the skip shows in the run's summary, not only with -rs.
        warnings.warn(why, stacklevel=2)
        pytest.skip(why)
    except BaseException:
        network.close()
        raise
    try:
        yield network
    finally:
        network.close()
        assert network.leftovers() == []


def api_on(net: RoutedNet, services: Services) -> Iterator[ApiServer]:
    """A module fixture's body: an API server listening on the network's API address."""
    server = ApiServer(services, host=net.api_address)
    server.start()
    try:
        yield server
    finally:
        server.stop()
