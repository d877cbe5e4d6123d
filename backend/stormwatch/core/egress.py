"""The egress policy: which addresses an org may make the server connect to.

Every outbound destination an org configures (webhook and Slack URLs, SMTP hosts, storage
endpoints) goes through here. By default the server refuses any address that is not
globally reachable: loopback, private (RFC 1918), shared (CGNAT 100.64/10), link-local
(with the cloud metadata service at 169.254.169.254 and fd00:ec2::254), unique-local,
multicast, unspecified, reserved and documentation ranges, and IPv6 forms that embed one of
them (::ffff:127.0.0.1, 6to4, NAT64). A name is resolved once, every address it resolves to
is checked, and the connection goes to a checked address (no second lookup an attacker's DNS
could answer differently). An operator opens addresses with EGRESS_ALLOW (CIDRs or exact
host names). HTTP follows no redirect and reads a bounded reply, of which only the status and
a service's short error code come back: never the body itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import re
import socket
import ssl
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from functools import lru_cache

import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

RESOLVE_TIMEOUT_S = 10.0
MAX_REPLY_BYTES = 64 * 1024  # enough for a service's JSON error; the rest is never read
ALLOW_SETTING = "EGRESS_ALLOW"


def _nets(*pairs: tuple[str, str]) -> tuple[tuple[IPNetwork, str], ...]:
    return tuple((ipaddress.ip_network(n), what) for n, what in pairs)


# IANA's special-purpose registries (RFC 6890 and updates), plus multicast. Order matters:
# the first match names the refusal. Mapped, 6to4 and NAT64 forms are judged by the IPv4
# address they embed (see `embedded_v4`).
REFUSED_V4 = _nets(
    ("169.254.169.254/32", "the cloud instance metadata service"),
    ("0.0.0.0/8", "an unspecified ('this network') address"),
    ("10.0.0.0/8", "a private address"),
    ("100.64.0.0/10", "a shared (carrier-grade NAT) address"),
    ("127.0.0.0/8", "a loopback address"),
    ("169.254.0.0/16", "a link-local address"),
    ("172.16.0.0/12", "a private address"),
    ("192.0.0.0/24", "an IETF protocol assignment"),
    ("192.0.2.0/24", "a documentation address"),
    ("192.168.0.0/16", "a private address"),
    ("198.18.0.0/15", "a benchmarking address"),
    ("198.51.100.0/24", "a documentation address"),
    ("203.0.113.0/24", "a documentation address"),
    ("224.0.0.0/4", "a multicast address"),
    ("240.0.0.0/4", "a reserved address"),
)
REFUSED_V6 = _nets(
    ("fd00:ec2::254/128", "the cloud instance metadata service"),
    ("::/128", "the unspecified address"),
    ("::1/128", "a loopback address"),
    ("::/96", "an IPv4-compatible address (deprecated)"),
    ("64:ff9b:1::/48", "a local-use NAT64 address"),
    ("100::/64", "a discard-only address"),
    ("2001::/23", "an IETF protocol assignment"),
    ("2001:db8::/32", "a documentation address"),
    ("3fff::/20", "a documentation address"),
    ("5f00::/16", "a segment-routing address"),
    ("fc00::/7", "a unique-local address"),
    ("fe80::/10", "a link-local address"),
    ("fec0::/10", "a site-local address (deprecated)"),
    ("ff00::/8", "a multicast address"),
)
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_6TO4 = ipaddress.IPv6Network("2002::/16")

_HOSTNAME = re.compile(r"^(?=.{1,253}$)([A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?)"
                       r"(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?)*$")
# inet_aton's forms (decimal, octal, hex, 1-4 parts), which resolvers and some clients take.
_INET_ATON = re.compile(r"^(0[xX][0-9a-fA-F]*|[0-9]+)(\.(0[xX][0-9a-fA-F]*|[0-9]+)){0,3}$")
_ERROR_TOKEN = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


class EgressError(Exception):
    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class EgressRefused(EgressError):
    """The policy forbids the destination: permanent until the setting or address changes."""


class EgressUnresolved(EgressError):
    """The name did not resolve: it may later."""


def embedded_v4(addr: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 form reaches: IPv4-mapped, NAT64 (well-known) or 6to4."""
    if addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    if addr in _NAT64:
        return ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    if addr in _6TO4:
        return addr.sixtofour
    return None


def classify(addr: IPAddress) -> str | None:
    """What a refused address is ('a loopback address'), or None for a global one."""
    if isinstance(addr, ipaddress.IPv6Address):
        v4 = embedded_v4(addr)
        if v4 is not None:
            what = classify(v4)
            return f"an IPv6 form of {what}" if what else None
        table: Iterable[tuple[IPNetwork, str]] = REFUSED_V6
    else:
        table = REFUSED_V4
    for net, what in table:
        if addr in net:
            return what
    return None


def literal_ip(host: str) -> IPAddress | None:
    """The address a host string spells, in any form a client would connect to directly."""
    h = host.strip()
    if h.startswith("[") and h.endswith("]"):
        h = h[1:-1]
    try:
        return ipaddress.ip_address(h)
    except ValueError:
        pass
    h = h.rstrip(".")
    if _INET_ATON.match(h):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(h))
        except OSError:
            return None
    return None


def _norm_host(host: str) -> str:
    return host.strip().strip("[]").rstrip(".").lower()


@dataclass(frozen=True)
class Policy:
    """Refuse every non-global address except the operator's `allow_networks` and the exact
    host names in `allow_hosts` (whatever they resolve to)."""

    allow_networks: tuple[IPNetwork, ...] = ()
    allow_hosts: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def parse(cls, spec: str) -> Policy:
        """From EGRESS_ALLOW: CIDRs, single addresses or host names, comma or space separated."""
        nets: list[IPNetwork] = []
        hosts: set[str] = set()
        for entry in re.split(r"[,\s]+", spec.strip()):
            if not entry:
                continue
            try:
                nets.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
                continue
            except ValueError:
                pass
            name = _norm_host(entry)
            if literal_ip(name) is not None or not _HOSTNAME.match(name):
                raise ValueError(f"{ALLOW_SETTING}: {entry!r} is neither a CIDR, an IP address "
                                 "nor a host name")
            hosts.add(name)
        return cls(tuple(nets), frozenset(hosts))

    def refusal(self, addr: IPAddress) -> str | None:
        """Why `addr` is refused, or None when it is global or the operator allowed it."""
        forms: list[IPAddress] = [addr]
        if isinstance(addr, ipaddress.IPv6Address) and (v4 := embedded_v4(addr)) is not None:
            forms.append(v4)  # 127.0.0.0/8 allowed also allows ::ffff:127.0.0.1
        if any(a.version == n.version and a in n for a in forms for n in self.allow_networks):
            return None
        return classify(addr)

    def host_allowed(self, host: str) -> bool:
        return _norm_host(host) in self.allow_hosts


@lru_cache(maxsize=16)
def _parsed(spec: str) -> Policy:
    return Policy.parse(spec)


def current_policy() -> Policy:
    from stormwatch.core.config import get_settings

    return _parsed(get_settings().egress_allow)


async def resolve(host: str, port: int) -> list[IPAddress]:
    """The addresses `host` resolves to (tests replace this to control resolution)."""
    loop = asyncio.get_running_loop()
    try:
        infos = await asyncio.wait_for(
            loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP),
            RESOLVE_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        raise EgressUnresolved(f"cannot resolve {host}: {exc}") from exc
    out: list[IPAddress] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        addr = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if addr not in out:
            out.append(addr)
    return out


def _refused(host: str, addr: IPAddress, what: str) -> EgressRefused:
    shown = host if host == str(addr) else f"{host} ({addr})"
    return EgressRefused(f"refused by the egress policy: {shown} is {what}; the server does "
                         f"not connect there unless the operator lists it in {ALLOW_SETTING}")


async def addresses(host: str, port: int, policy: Policy | None = None) -> list[IPAddress]:
    """The checked addresses to connect to for `host`: all of them pass, or it is refused."""
    policy = policy or current_policy()
    literal = literal_ip(host)
    if literal is not None:
        what = policy.refusal(literal)
        if what is not None and not policy.host_allowed(host):
            raise _refused(host, literal, what)
        return [literal]
    found = await resolve(_norm_host(host), port)
    if not found:
        raise EgressUnresolved(f"{host} resolves to no address")
    if policy.host_allowed(host):
        return found
    for addr in found:
        what = policy.refusal(addr)
        if what is not None:
            raise _refused(host, addr, what)
    return found


async def check_destination(host: str, port: int, policy: Policy | None = None) -> None:
    """Save-time check: refuses what the policy refuses now; a name that does not resolve
    here is let through (the send checks again, and agents resolve in their own network)."""
    with contextlib.suppress(EgressUnresolved):
        await addresses(host, port, policy)


def url_host_port(url: str) -> tuple[str, int]:
    try:
        u = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise EgressRefused(f"not a URL the server can connect to: {exc}") from exc
    if u.scheme not in ("http", "https"):
        raise EgressRefused(f"refused by the egress policy: scheme {u.scheme!r} (http or https)")
    if not u.host:
        raise EgressRefused("refused by the egress policy: the URL has no host")
    return u.host, u.port or (443 if u.scheme == "https" else 80)


async def check_url(url: str, policy: Policy | None = None) -> None:
    host, port = url_host_port(url)
    await check_destination(host, port, policy)


async def open_tcp(host: str, port: int, timeout_s: float,
                   policy: Policy | None = None) -> socket.socket:
    """A connected non-blocking socket to a checked address of `host` (for SMTP)."""
    loop = asyncio.get_running_loop()
    last: OSError | None = None
    for addr in await addresses(host, port, policy):
        family = socket.AF_INET6 if addr.version == 6 else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            await asyncio.wait_for(loop.sock_connect(sock, (str(addr), port)), timeout_s)
            return sock
        except (OSError, TimeoutError) as exc:
            sock.close()
            last = exc if isinstance(exc, OSError) else OSError(f"timed out after {timeout_s} s")
    assert last is not None
    raise last


@dataclass(frozen=True)
class HttpReply:
    """What comes back from an outbound request: the status and, when the service named one,
    its short error code (Slack's `invalid_token`); the body itself is never kept."""

    status: int
    error: str | None = None
    redirect: bool = False  # answered with a redirect, which is not followed
    retry_after_s: float | None = None  # a 429's or 503's Retry-After, in seconds


    @property
    def detail(self) -> str:
        return f"HTTP {self.status}: {self.error}" if self.error else f"HTTP {self.status}"


def retry_after_s(value: str | None) -> float | None:
    """Retry-After in seconds, from its delta-seconds or HTTP-date form; None if unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def service_error(body: bytes) -> str | None:
    """A service's own short error code: a JSON `error` string, or a plain one-word body."""
    text = body.decode("utf-8", "replace").strip()
    if text.startswith("{"):
        try:
            doc = json.loads(text)
        except ValueError:
            return None
        err = doc.get("error") if isinstance(doc, dict) else None
        return err if isinstance(err, str) and _ERROR_TOKEN.match(err) else None
    return text if _ERROR_TOKEN.match(text) else None


async def post(url: str, *, content: bytes, headers: dict[str, str], timeout_s: float,
               verify: ssl.SSLContext | bool = True, policy: Policy | None = None,
               read_error: Callable[[int, bytes], str | None] | None = None) -> HttpReply:
    """POSTs to a checked address of the URL's host, keeping the Host header and the TLS
    name (SNI and certificate check) to the host name. `read_error` takes the status and the
    reply's first MAX_REPLY_BYTES for a protocol whose replies say more than a status (OTLP's
    partial success); service_error by default. Raises EgressRefused, EgressUnresolved,
    httpx.HTTPError or TimeoutError."""
    host, port = url_host_port(url)
    u = httpx.URL(url)
    found = await addresses(host, port, policy)
    hdrs = {**headers, "host": u.netloc.decode("ascii"), "accept-encoding": "identity"}
    ext = {"sni_hostname": host} if u.scheme == "https" and literal_ip(host) is None else {}
    last: Exception | None = None
    async with asyncio.timeout(timeout_s * 2):  # connect, write and read are each bounded too
        for addr in found:
            pinned = u.copy_with(host=str(addr))
            client = httpx.AsyncClient(timeout=httpx.Timeout(timeout_s), verify=verify,
                                       follow_redirects=False, trust_env=False)
            try:
                async with client, client.stream("POST", pinned, content=content,
                                                 headers=hdrs, extensions=ext) as resp:
                    body = bytearray()
                    async for chunk in resp.aiter_raw():  # not inflated: no gzip bombs
                        body += chunk
                        if len(body) >= MAX_REPLY_BYTES:
                            break
                    error = (read_error(resp.status_code, bytes(body)) if read_error
                             else service_error(bytes(body)))
                    return HttpReply(resp.status_code, error,
                                     redirect=resp.is_redirect,
                                     retry_after_s=retry_after_s(resp.headers.get("retry-after")))
            except httpx.ConnectError as exc:
                last = exc  # the next checked address may answer
    assert last is not None
    raise last


MAX_DOCUMENT_BYTES = 1024 * 1024  # an OpenID discovery document, a key set, a token reply


class DocumentError(EgressError):
    """The server answered, but not with a JSON object of bounded size."""


async def fetch_json(method: str, url: str, *, timeout_s: float,
                     content: bytes | None = None, headers: dict[str, str] | None = None,
                     policy: Policy | None = None) -> tuple[int, dict[str, object]]:
    """(status, JSON object) from a checked address of the URL's host, like `post`, for
    protocols whose replies the server itself must read (OpenID Connect). The document is
    parsed here and never handed back to the org as such. Raises EgressRefused,
    EgressUnresolved, DocumentError, httpx.HTTPError or TimeoutError."""
    host, port = url_host_port(url)
    u = httpx.URL(url)
    found = await addresses(host, port, policy)
    hdrs = {**(headers or {}), "host": u.netloc.decode("ascii"), "accept-encoding": "identity",
            "accept": "application/json"}
    ext = {"sni_hostname": host} if u.scheme == "https" and literal_ip(host) is None else {}
    last: Exception | None = None
    async with asyncio.timeout(timeout_s * 2):
        for addr in found:
            pinned = u.copy_with(host=str(addr))
            client = httpx.AsyncClient(timeout=httpx.Timeout(timeout_s),
                                       follow_redirects=False, trust_env=False)
            try:
                async with client, client.stream(method, pinned, content=content,
                                                 headers=hdrs, extensions=ext) as resp:
                    body = bytearray()
                    async for chunk in resp.aiter_raw():
                        body += chunk
                        if len(body) > MAX_DOCUMENT_BYTES:
                            raise DocumentError(f"{url}: reply larger than "
                                                f"{MAX_DOCUMENT_BYTES} bytes")
                    try:
                        doc = json.loads(bytes(body))
                    except ValueError as exc:
                        raise DocumentError(f"{url}: HTTP {resp.status_code}, not JSON"
                                            ) from exc
                    if not isinstance(doc, dict):
                        raise DocumentError(f"{url}: HTTP {resp.status_code}, not a JSON "
                                            "object")
                    return resp.status_code, doc
            except httpx.ConnectError as exc:
                last = exc
    assert last is not None
    raise last
