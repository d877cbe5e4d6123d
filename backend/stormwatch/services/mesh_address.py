"""Which mesh addresses an agent may advertise. Every peer dials the address an agent
advertises; one no peer can reach from elsewhere (loopback, unspecified, link-local,
multicast) makes each peer dial something of its own instead, its own echo server above all,
and show a healthy link that does not exist. Loopback is accepted from an agent whose own
request comes over loopback (the demo fleet, single-host test fleets), since its peers share
its host; the operator opens more with MESH_ADDRESS_ALLOW. A host name is not resolved here
(agents resolve in their own network): the echo's peer id catches a name that leads astray.
"""

from __future__ import annotations

import ipaddress

from stormwatch.core.egress import IPAddress, IPNetwork, embedded_v4, literal_ip

ALLOW_SETTING = "MESH_ADDRESS_ALLOW"

_LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))
# What no peer can dial to reach the agent, whoever asks; the first match names it.
_UNREACHABLE = (
    (ipaddress.ip_network("0.0.0.0/8"), "an unspecified address"),
    (ipaddress.ip_network("::/128"), "the unspecified address"),
    (ipaddress.ip_network("169.254.0.0/16"), "a link-local address"),
    (ipaddress.ip_network("fe80::/10"), "a link-local address"),
    (ipaddress.ip_network("224.0.0.0/4"), "a multicast address"),
    (ipaddress.ip_network("ff00::/8"), "a multicast address"),
    (ipaddress.ip_network("240.0.0.0/4"), "a reserved or broadcast address"),
)


def parse_allow(spec: str) -> list[IPNetwork]:
    """MESH_ADDRESS_ALLOW: CIDRs or single addresses, comma or space separated."""
    nets: list[IPNetwork] = []
    for entry in spec.replace(",", " ").split():
        try:
            nets.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
        except ValueError:
            raise ValueError(f"{ALLOW_SETTING}: {entry!r} is not an IP address or CIDR") from None
    return nets


def _forms(addr: IPAddress) -> list[IPAddress]:
    """The address and, for an IPv6 form of an IPv4 address (::ffff:127.0.0.1), that one."""
    if isinstance(addr, ipaddress.IPv6Address) and (v4 := embedded_v4(addr)) is not None:
        return [addr, v4]
    return [addr]


def _in(forms: list[IPAddress], nets: tuple[IPNetwork, ...] | list[IPNetwork]) -> bool:
    return any(a.version == n.version and a in n for a in forms for n in nets)


def is_local_client(client: str) -> bool:
    """Whether the request came over loopback (the agent runs on the API's host)."""
    addr = literal_ip(client)
    return addr is not None and _in(_forms(addr), _LOOPBACK)


def refusal(mesh_address: str, client: str, allow: list[IPNetwork]) -> str | None:
    """Why peers could not reach an agent that advertises `mesh_address` ("host:port",
    already well-formed) and asks from `client`; None when it may. "" is no mesh at all."""
    if not mesh_address:
        return None
    host = mesh_address.rpartition(":")[0].strip("[]").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        addr: IPAddress | None = ipaddress.ip_address("127.0.0.1")  # RFC 6761: always loopback
    else:
        addr = literal_ip(host)
    if addr is None:
        return None
    forms = _forms(addr)
    if _in(forms, allow):
        return None
    for net, what in _UNREACHABLE:
        if _in(forms, (net,)):
            return (f"{host} is {what}, which no peer can dial to reach this agent; "
                    "advertise an address peers can reach (mesh.advertise in the agent config)")
    if _in(forms, _LOOPBACK) and not is_local_client(client):
        return (f"{host} is a loopback address: peers on other hosts would dial themselves. "
                "Only an agent connecting from the API's own host may advertise loopback; "
                f"set mesh.advertise in the agent config, or list the network in {ALLOW_SETTING}")
    return None
