"""The egress policy in process, on the default policy unless a test opens something: names
that resolve to refused addresses (the test controls resolution by replacing
`egress.resolve`), IPv6 and numeric spellings, redirects, a second lookup that would answer
differently (DNS rebinding), the TLS name kept while the connection goes to the checked
address, and the policy against Python's own `is_global` classification."""

from __future__ import annotations

import asyncio
import ipaddress
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from stormwatch.core import egress
from stormwatch.core.config import Settings, get_settings
from stormwatch.notifications.base import Channel, PermanentError, TransientError
from stormwatch.notifications.email import EmailChannel, EmailConfig
from stormwatch.notifications.slack import SlackChannel
from stormwatch.notifications.webhook import WebhookChannel, new_signing_secret
from stormwatch.schemas.notifications import EmailConfigIn, SlackConfigIn, WebhookConfigIn
from stormwatch.schemas.storage_target import StorageTargetCreate
from stormwatch.services import storage_targets
from stormwatch.services.notify import channels
from tests.notifications.servers import HttpReceiver, SmtpServer, make_tls
from tests.notifications.test_email import message

NAME = "hooks.public-looking.example"


@pytest.fixture(autouse=True)
def default_policy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("EGRESS_ALLOW", raising=False)
    get_settings.cache_clear()
    assert get_settings().egress_allow == ""
    yield
    get_settings.cache_clear()


def open_egress(monkeypatch: pytest.MonkeyPatch, spec: str) -> None:
    monkeypatch.setattr(get_settings(), "egress_allow", spec)


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> Callable[[dict[str, list[str]]], list[str]]:
    """Replaces the policy's resolver with a table; returns the log of names asked."""
    asked: list[str] = []

    def install(table: dict[str, list[str]]) -> list[str]:
        async def resolve(host: str, port: int) -> list[egress.IPAddress]:
            asked.append(host)
            if host not in table:
                raise egress.EgressUnresolved(f"cannot resolve {host}")
            return [ipaddress.ip_address(a) for a in table[host]]

        monkeypatch.setattr(egress, "resolve", resolve)
        return asked

    return install


# A name may resolve to any of these; each must be refused (IPv6 forms included).
REFUSED_RESOLUTIONS = [
    ["127.0.0.1"], ["10.0.0.7"], ["192.168.1.1"], ["172.31.255.1"], ["100.100.100.200"],
    ["169.254.169.254"], ["169.254.10.1"], ["0.0.0.0"], ["::1"], ["::ffff:127.0.0.1"],
    ["::ffff:169.254.169.254"], ["fd00:ec2::254"], ["fe80::a9fe:a9fe"], ["fd12:3456::1"],
    ["::"], ["ff02::1"], ["64:ff9b::a9fe:a9fe"], ["2002:7f00:1::1"],
    ["93.184.215.14", "127.0.0.1"],  # one refused address among public ones refuses the name
]


def senders(host: str, port: int, smtp_port: int) -> list[tuple[str, Channel]]:
    return [
        ("webhook", WebhookChannel(f"http://{host}:{port}/hook", new_signing_secret(),
                                   timeout_s=10)),
        ("slack", SlackChannel(f"http://{host}:{port}/services/T/B/x", timeout_s=10)),
        ("email", EmailChannel(EmailConfig(
            host=host, port=smtp_port, security="none", from_address="a@sw.example",
            to_addresses=("b@sw.example",), timeout_s=10))),
    ]


@pytest.mark.parametrize("addrs", REFUSED_RESOLUTIONS, ids=lambda a: "+".join(a))
def test_a_name_resolving_to_a_refused_address_is_refused_at_save_and_at_send(
        resolver: Callable[[dict[str, list[str]]], list[str]], addrs: list[str]) -> None:
    resolver({NAME: addrs})
    with HttpReceiver() as hook, SmtpServer(None, "none") as smtp:
        for kind, ch in senders(NAME, hook.port, smtp.port):
            with pytest.raises(PermanentError) as err:
                asyncio.run(ch.send(message(), "msg_1"))
            assert "refused by the egress policy" in err.value.detail, kind
        # Save time: the channel and storage services answer a 422 naming the field.
        for cfg, loc in (
                (WebhookConfigIn(url=f"http://{NAME}:{hook.port}/hook"),  # type: ignore[arg-type]
                 ["body", "config", "url"]),
                (SlackConfigIn(url=f"https://{NAME}/services/T/B/x"),  # type: ignore[arg-type]
                 ["body", "config", "url"]),
                (EmailConfigIn(host=NAME, port=smtp.port, from_address="a@sw.example",
                               to_addresses=["b@sw.example"]), ["body", "config", "host"])):
            with pytest.raises(channels.Invalid) as inv:
                asyncio.run(channels._check_egress(cfg))
            assert [e["loc"] for e in inv.value.errors] == [loc]
            assert "refused by the egress policy" in inv.value.errors[0]["msg"]
        target = StorageTargetCreate(name="s3", provider="s3", bucket="b",
                                     credentials={"source": "none"},  # type: ignore[arg-type]
                                     endpoint=f"http://{NAME}:{hook.port}")
        with pytest.raises(storage_targets.StorageTargetInvalid) as st_err:
            asyncio.run(storage_targets._check_endpoint(target.endpoint))
        assert st_err.value.loc == ["body", "endpoint"]
    assert hook.requests == [] and smtp.sink.messages == []


@pytest.mark.parametrize("spelling", [
    "127.0.0.1", "2130706433", "0x7f.1", "0x7f000001", "0177.0.0.1", "017700000001", "127.1",
    "[::1]", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[0:0:0:0:0:ffff:7f00:1]",
    "169.254.169.254", "0xa9.0xfe.0xa9.0xfe", "2852039166", "[::ffff:a9fe:a9fe]",
    "[fd00:ec2::254]", "[FD00:EC2:0::254]", "[fe80::1%25eth0]", "0", "0.0.0.0", "[::]",
])
def test_literal_spellings_are_refused_without_asking_any_resolver(
        resolver: Callable[[dict[str, list[str]]], list[str]], spelling: str) -> None:
    asked = resolver({})
    host = spelling.replace("%25", "%")
    with HttpReceiver() as hook:
        url = f"http://{spelling}:{hook.port}/hook"
        for ch in (WebhookChannel(url, new_signing_secret(), timeout_s=10),
                   SlackChannel(url, timeout_s=10)):
            with pytest.raises(PermanentError) as err:
                asyncio.run(ch.send(message(), "m"))
            # Spellings the HTTP client itself rejects never get as far as the policy.
            assert ("refused by the egress policy" in err.value.detail
                    or "not a URL the server can connect to" in err.value.detail)
        with pytest.raises(egress.EgressRefused):
            asyncio.run(egress.check_destination(host.strip("[]"), 25))
    assert hook.requests == [] and asked == []


def test_a_redirect_to_a_private_address_is_not_followed(
        monkeypatch: pytest.MonkeyPatch,
        resolver: Callable[[dict[str, list[str]]], list[str]]) -> None:
    """The public-looking host is the one name the operator opened; where it redirects to
    (a loopback receiver, the metadata address) is not fetched."""
    open_egress(monkeypatch, NAME)
    resolver({NAME: ["127.0.0.1"]})
    with HttpReceiver() as redirector, HttpReceiver(bind="127.0.0.2") as internal:
        for target in (internal.url, "http://169.254.169.254/latest/meta-data/",
                       f"http://[::ffff:127.0.0.2]:{internal.port}/hook"):
            redirector.default = (302, "")
            redirector.location = target
            for ch in (WebhookChannel(f"http://{NAME}:{redirector.port}/hook",
                                      new_signing_secret(), timeout_s=10),
                       SlackChannel(f"http://{NAME}:{redirector.port}/x", timeout_s=10)):
                with pytest.raises(PermanentError) as err:
                    asyncio.run(ch.send(message(), "m"))
                assert err.value.detail.startswith("HTTP 302")
                assert "not followed" in err.value.detail
    assert len(redirector.requests) == 6
    assert internal.requests == []


def test_the_connection_goes_to_the_checked_address_with_the_name_kept(
        monkeypatch: pytest.MonkeyPatch,
        resolver: Callable[[dict[str, list[str]]], list[str]]) -> None:
    """A resolver that answers a refused address on any second lookup (DNS rebinding): the
    send resolves once and connects there. The system resolver does not know the name, so
    a client that looked it up again could not connect at all."""
    open_egress(monkeypatch, "127.0.0.1/32")
    calls = 0

    async def rebinding(host: str, port: int) -> list[egress.IPAddress]:
        nonlocal calls
        calls += 1
        return [ipaddress.ip_address("127.0.0.1" if calls == 1 else "127.0.0.2")]

    monkeypatch.setattr(egress, "resolve", rebinding)
    secret = new_signing_secret()
    with HttpReceiver(secret=secret) as hook, HttpReceiver(bind="127.0.0.2") as other:
        reply = asyncio.run(WebhookChannel(f"http://{NAME}:{hook.port}/hook", secret,
                                           timeout_s=10).send(message(), "msg_pin"))
        assert reply == "HTTP 200: ok"
        assert calls == 1 and "msg_pin" in hook.accepted
        [req] = hook.requests
        assert {k.lower(): v for k, v in req.headers.items()}["host"] == f"{NAME}:{hook.port}"
        # Any later lookup answers 127.0.0.2, which is not allowed: refused, nothing sent.
        with pytest.raises(PermanentError):
            asyncio.run(WebhookChannel(f"http://{NAME}:{other.port}/hook", secret,
                                       timeout_s=10).send(message(), "msg_2"))
    assert other.requests == []


def test_tls_checks_the_certificate_against_the_name_not_the_address(
        monkeypatch: pytest.MonkeyPatch,
        resolver: Callable[[dict[str, list[str]]], list[str]]) -> None:
    open_egress(monkeypatch, "127.0.0.1/32")
    resolver({"hooks.internal.test": ["127.0.0.1"], "other.internal.test": ["127.0.0.1"]})
    tls = make_tls("hooks.internal.test", with_ip=False)
    secret = new_signing_secret()
    with HttpReceiver(secret=secret, tls=tls) as hook:
        url = f"https://hooks.internal.test:{hook.port}/hook"
        asyncio.run(WebhookChannel(url, secret, ca_cert_pem=tls.ca_pem, timeout_s=10)
                    .send(message(), "msg_tls"))
        assert "msg_tls" in hook.accepted
        wrong = f"https://other.internal.test:{hook.port}/hook"
        with pytest.raises(PermanentError) as err:
            asyncio.run(WebhookChannel(wrong, secret, ca_cert_pem=tls.ca_pem, timeout_s=10)
                        .send(message(), "msg_wrong"))
        assert "certificate" in err.value.detail.lower()
    assert list(hook.accepted) == ["msg_tls"]


def test_with_the_allow_list_the_loopback_receivers_work(monkeypatch: pytest.MonkeyPatch) -> None:
    open_egress(monkeypatch, "127.0.0.0/8,::1")  # "localhost" may resolve to both
    secret = new_signing_secret()
    with HttpReceiver(secret=secret) as hook, HttpReceiver() as slack, \
            SmtpServer(None, "none") as smtp:
        assert asyncio.run(WebhookChannel(hook.url, secret, timeout_s=10)
                           .send(message(), "msg_hook")) == "HTTP 200: ok"
        assert asyncio.run(SlackChannel(slack.url, timeout_s=10)
                           .send(message(), "m")) == "HTTP 200: ok"
        reply = asyncio.run(EmailChannel(EmailConfig(
            host="localhost", port=smtp.port, security="none", from_address="a@sw.example",
            to_addresses=("b@sw.example",), timeout_s=10)).send(message(), "m"))
        assert "queued as TEST123" in reply
        # The IPv4-mapped spelling of an allowed address is allowed too.
        asyncio.run(WebhookChannel(f"http://[::ffff:127.0.0.1]:{hook.port}/hook", secret,
                                   timeout_s=10).send(message(), "msg_mapped"))
    assert set(hook.accepted) == {"msg_hook", "msg_mapped"}
    assert len(slack.requests) == 1 and len(smtp.sink.messages) == 1


def test_only_a_short_error_code_of_the_reply_comes_back_and_the_rest_is_not_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    open_egress(monkeypatch, "127.0.0.0/8")
    with HttpReceiver() as hook:
        ch = SlackChannel(f"{hook.url}", timeout_s=10)
        for status, body, detail in (
                (403, "invalid_token", "HTTP 403: invalid_token"),
                (400, '{"ok": false, "error": "invalid_blocks"}', "HTTP 400: invalid_blocks"),
                (404, "<html>internal admin page: secret</html>", "HTTP 404"),
                (400, '{"error": "ami-id i-0abc secret"}', "HTTP 400"),
                (401, "x" * 5_000_000, "HTTP 401")):
            hook.default = (status, body)
            with pytest.raises(PermanentError) as err:
                asyncio.run(ch.send(message(), "m"))
            assert err.value.detail == detail


def test_a_typo_in_the_allow_list_stops_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EGRESS_ALLOW", "127.0.0.0/8, not a host!")
    with pytest.raises(ValidationError, match="EGRESS_ALLOW"):
        Settings()
    monkeypatch.setenv("EGRESS_ALLOW", "10.0.0.0/8 ::1, smtp.corp.internal")
    policy = egress.Policy.parse(Settings().egress_allow)
    assert policy.allow_hosts == {"smtp.corp.internal"}
    assert policy.refusal(ipaddress.ip_address("10.9.8.7")) is None
    assert policy.refusal(ipaddress.ip_address("::ffff:10.9.8.7")) is None
    assert policy.refusal(ipaddress.ip_address("192.168.0.1")) == "a private address"


# Where the policy differs from Python's `is_global`, on purpose (docs/operations.md):
# refused although Python calls them global (multicast, deprecated, documentation, SRv6,
# the IETF blocks refused whole), and IPv6 forms judged by the IPv4 address they reach.
STRICTER = [ipaddress.ip_network(n) for n in (
    "224.0.0.0/4", "ff00::/8", "192.0.0.0/24", "2001::/23", "::/96", "fec0::/10",
    "3fff::/20", "5f00::/16", "64:ff9b:1::/48")]
EMBEDDED = [ipaddress.ip_network(n) for n in ("::ffff:0:0/96", "64:ff9b::/96", "2002::/16")]
SPECIAL = ([n for n, _ in egress.REFUSED_V4 + egress.REFUSED_V6] + STRICTER + EMBEDDED
           + [ipaddress.ip_network(n) for n in ("8.0.0.0/8", "2600::/12", "192.0.0.8/29")])

addresses_st = st.one_of(
    st.ip_addresses(),
    st.sampled_from(SPECIAL).flatmap(lambda n: st.ip_addresses(network=n)))


def _in(addr: Any, nets: list[Any]) -> bool:
    return any(addr.version == n.version and addr in n for n in nets)


@settings(max_examples=3000, deadline=None)
@given(addresses_st)
def test_the_policy_agrees_with_pythons_is_global(addr: egress.IPAddress) -> None:
    policy = egress.Policy()
    refused = policy.refusal(addr) is not None
    if _in(addr, EMBEDDED):
        assert isinstance(addr, ipaddress.IPv6Address)
        v4 = (addr.ipv4_mapped or addr.sixtofour
              or ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF))
        assert refused == (policy.refusal(v4) is not None)
        if not v4.is_global or v4.is_multicast:
            assert refused
    elif _in(addr, STRICTER):
        assert refused
    else:
        assert refused == (not addr.is_global), addr
    # Whatever the form, nothing Python calls non-global gets through.
    if not addr.is_global:
        assert refused


@settings(max_examples=500, deadline=None)
@given(st.ip_addresses(v=4))
def test_the_mapped_form_of_an_ipv4_address_is_judged_as_that_address(
        addr: ipaddress.IPv4Address) -> None:
    policy = egress.Policy()
    mapped = ipaddress.IPv6Address(f"::ffff:{addr}")
    assert (policy.refusal(mapped) is None) == (policy.refusal(addr) is None)
    assert egress.literal_ip(str(int(addr))) == addr  # the decimal spelling
    assert egress.literal_ip(f"[{mapped}]") == mapped


def test_an_unresolvable_name_passes_the_save_check_and_fails_the_send_transiently(
        resolver: Callable[[dict[str, list[str]]], list[str]]) -> None:
    """The send checks again; a name that does not resolve may later."""
    name = f"nx-{uuid.uuid4().hex[:8]}.invalid"
    asked = resolver({})
    asyncio.run(egress.check_url(f"https://{name}/hook"))
    with pytest.raises(TransientError, match="cannot resolve"):
        asyncio.run(WebhookChannel(f"https://{name}/hook", new_signing_secret(), timeout_s=5)
                    .send(message(), "m"))
    assert asked == [name, name]
