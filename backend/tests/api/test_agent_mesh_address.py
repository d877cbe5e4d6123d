"""A mesh address peers cannot reach is refused: a non-local agent advertising loopback, an
unspecified, link-local or multicast address would make every peer measure something else
(its own echo server) and show a healthy link that does not exist. Clients are told apart by
the address the API sees (a trusted proxy's X-Forwarded-For here, as behind a load balancer)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import ApiServer, OrgCredentials, Services

ENROLL = "/api/v1/agents/enroll"
SELF = "/api/v1/agent/self"
REMOTE = {"X-Forwarded-For": "198.51.100.7"}  # a client on another host, through the proxy

UNREACHABLE = ["127.0.0.1:7301", "127.3.2.1:7301", "0.0.0.0:7301", "[::1]:7301",
               "[::]:7301", "169.254.10.1:7301", "[fe80::1]:7301", "224.0.0.1:7301",
               "255.255.255.255:7301", "[::ffff:127.0.0.1]:7301", "localhost:7301",
               "mesh.localhost:7301", "0x7f000001:7301"]
REACHABLE = ["10.0.3.4:7301", "192.168.1.20:7301", "203.0.113.9:7301", "[2600:1f18::5]:7301",
             "agent-1.internal.example:7301"]


@pytest.fixture(scope="module")
def server(services: Services) -> Iterator[ApiServer]:
    # Only the socket peer 127.0.0.1 is a proxy: a request from it naming another client
    # is that client's.
    s = ApiServer(services, {"TRUSTED_PROXIES": "127.0.0.1/32"})
    s.start()
    yield s
    s.stop()


def enroll_body(org: OrgCredentials, name: str, mesh_address: str) -> dict[str, Any]:
    return {"enrollment_token": org.enrollment_token, "name": name, "agent_version": "t",
            "mesh_address": mesh_address}


def names_mesh_address(r: httpx.Response) -> bool:
    detail = r.json()["detail"]
    return isinstance(detail, list) and any(e["loc"][-1] == "mesh_address" for e in detail)


@pytest.mark.parametrize("address", UNREACHABLE)
def test_a_remote_agent_advertising_an_unreachable_address_gets_422(server, make_org, address):
    org = make_org()
    with server.client(headers=REMOTE) as c:
        r = c.post(ENROLL, json=enroll_body(org, "ghost", address))
        assert r.status_code == 422, r.text
        assert names_mesh_address(r), r.text
        with server.client(headers={"Authorization": f"Bearer {org.api_key}"}) as admin:
            assert admin.get("/api/v1/agents").json() == []  # nothing half-enrolled


@pytest.mark.parametrize("address", REACHABLE)
def test_a_remote_agent_advertising_a_reachable_address_enrolls(server, make_org, address):
    org = make_org()
    with server.client(headers=REMOTE) as c:
        r = c.post(ENROLL, json=enroll_body(org, "vm-1", address))
        assert r.status_code == 201, r.text
    with server.client(headers={"Authorization": f"Bearer {org.api_key}"}) as admin:
        assert [a["mesh_address"] for a in admin.get("/api/v1/agents").json()] == [address]


@pytest.mark.parametrize("address", ["127.0.0.1:7301", "127.0.5.9:7302", "[::1]:7301"])
def test_a_local_agent_may_advertise_loopback(server, make_org, address):
    org = make_org()
    with server.client() as c:  # no X-Forwarded-For: the client is 127.0.0.1 itself
        r = c.post(ENROLL, json=enroll_body(org, "local-1", address))
        assert r.status_code == 201, r.text
    with server.client(headers={"X-Forwarded-For": "127.0.0.8"}) as c:
        r = c.post(ENROLL, json=enroll_body(org, "local-2", address))
        assert r.status_code == 201, r.text


@pytest.mark.parametrize("address", ["0.0.0.0:7301", "[::]:7301", "224.0.0.1:7301"])
def test_nobody_may_advertise_an_address_no_peer_can_dial(server, make_org, address):
    org = make_org()
    with server.client() as c:
        r = c.post(ENROLL, json=enroll_body(org, "local", address))
        assert r.status_code == 422, r.text
        assert names_mesh_address(r), r.text


def test_a_malformed_mesh_address_gets_422(server, make_org):
    org = make_org()
    with server.client() as c:
        for bad in ["127.0.0.1", "host:0", "a b:7301", "[not-v6]:7301", "::1:7301"]:
            r = c.post(ENROLL, json=enroll_body(org, "x", bad))
            assert r.status_code == 422 and names_mesh_address(r), (bad, r.text)


def test_self_update_from_a_remote_agent_is_held_to_the_same_rule(server, make_org):
    org = make_org()
    with server.client(headers=REMOTE) as c:
        r = c.post(ENROLL, json=enroll_body(org, "vm-1", "10.0.0.5:7301"))
        assert r.status_code == 201, r.text
        c.headers["Authorization"] = f"Bearer {r.json()['agent_token']}"
        for address in ["127.0.0.1:7301", "0.0.0.0:7301", "169.254.1.1:7301", "[::1]:7301"]:
            r = c.patch(SELF, json={"mesh_address": address})
            assert r.status_code == 422, (address, r.text)
            assert names_mesh_address(r), r.text
        assert c.patch(SELF, json={"mesh_address": "10.0.0.6:7301"}).status_code == 204
        assert c.patch(SELF, json={"mesh_address": ""}).status_code == 204  # mesh off
    with server.client(headers={"Authorization": f"Bearer {org.api_key}"}) as admin:
        assert [a["mesh_address"] for a in admin.get("/api/v1/agents").json()] == [""]


def test_a_local_agent_may_move_to_loopback_and_back(server, make_org):
    org = make_org()
    with server.client() as c:
        r = c.post(ENROLL, json=enroll_body(org, "local", "127.0.0.1:7301"))
        assert r.status_code == 201, r.text
        c.headers["Authorization"] = f"Bearer {r.json()['agent_token']}"
        assert c.patch(SELF, json={"mesh_address": "127.0.0.2:7301"}).status_code == 204
        r = c.patch(SELF, json={"mesh_address": "0.0.0.0:7301"})
        assert r.status_code == 422 and names_mesh_address(r), r.text
