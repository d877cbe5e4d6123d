"""The email channel against a real SMTP server (aiosmtpd): STARTTLS and implicit TLS with
AUTH on a private CA, both MIME parts, and the server's replies deciding permanent or
transient."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from stormwatch.devtools.services import free_port
from stormwatch.notifications.base import AlertItem, Message, PermanentError, TransientError
from stormwatch.notifications.email import EmailChannel, EmailConfig
from tests.notifications.servers import SmtpServer, Tls, make_tls

# The servers stand in on loopback, which the egress policy opens only when told to.
pytestmark = pytest.mark.usefixtures("loopback_allowed")


@pytest.fixture(scope="module")
def tls() -> Tls:
    return make_tls()


def message() -> Message:
    start = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    return Message(
        kind="firing", org_id="org", rule_id="r1", rule_name="p99 eu-west -> us-east",
        severity="critical", description="Tail above the timeout budget",
        condition="p99 of mesh_rtt over 30 s windows above 50", created_at=start,
        link="http://sw.example/alerts?rule_id=r1",
        alerts=(AlertItem(alert_id="a1", series="eu-1 -> us-1", state="firing",
                          started_at=start, value=912_500.0, threshold=50_000.0, unit="us",
                          link="http://sw.example/pair?src=1&dst=2"),))


def config(port: int, security: str, tls: Tls | None, **kw: object) -> EmailConfig:
    return EmailConfig(host="localhost", port=port, security=security,
                       from_address="alerts@sw.example", to_addresses=("oncall@sw.example",),
                       ca_cert_pem=tls.ca_pem if tls else None, timeout_s=10,
                       **kw)  # type: ignore[arg-type]


# aiosmtpd warns that AUTH is allowed without STARTTLS; with implicit TLS it is under TLS.
@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")
@pytest.mark.parametrize("mode", ["starttls", "tls"])
def test_email_goes_out_over_tls_with_auth_as_text_and_html(tls: Tls, mode: str) -> None:
    with SmtpServer(tls, mode, users={"sw": "s3cret"}) as smtp:
        ch = EmailChannel(config(smtp.port, mode, tls, username="sw", password="s3cret"))
        reply = asyncio.run(ch.send(message(), "msg_abc"))
    assert reply.startswith("SMTP") and "queued as TEST123" in reply
    [msg] = smtp.sink.messages
    assert msg["Subject"] == "[FIRING] critical: p99 eu-west -> us-east"
    assert "msg_abc" in msg["Message-ID"]
    assert smtp.sink.envelopes == [("alerts@sw.example", ["oncall@sw.example"])]
    plain = msg.get_body(("plain",))
    html = msg.get_body(("html",))
    assert plain is not None and html is not None
    text = plain.get_content()
    assert "eu-1 -> us-1: value 912.5 ms vs threshold 50 ms" in text
    assert "http://sw.example/pair?src=1&dst=2" in text
    assert '<a href="http://sw.example/pair?src=1&amp;dst=2">' in html.get_content()


def test_wrong_password_is_permanent_with_the_servers_reply(tls: Tls) -> None:
    with SmtpServer(tls, "starttls", users={"sw": "s3cret"}) as smtp:
        ch = EmailChannel(config(smtp.port, "starttls", tls, username="sw", password="nope"))
        with pytest.raises(PermanentError) as err:
            asyncio.run(ch.send(message(), "msg_1"))
    assert err.value.detail.startswith("535")
    assert not smtp.sink.messages


def test_a_5xx_data_reply_is_permanent_and_4xx_transient(tls: Tls) -> None:
    with SmtpServer(tls, "starttls") as smtp:
        ch = EmailChannel(config(smtp.port, "starttls", tls))
        smtp.sink.reject_data = "550 5.7.1 relaying denied"
        with pytest.raises(PermanentError) as perm:
            asyncio.run(ch.send(message(), "msg_1"))
        smtp.sink.reject_data = "451 4.3.0 try again later"
        with pytest.raises(TransientError) as trans:
            asyncio.run(ch.send(message(), "msg_1"))
    assert perm.value.detail == "550 5.7.1 relaying denied"
    assert trans.value.detail == "451 4.3.0 try again later"


def test_an_untrusted_certificate_is_permanent(tls: Tls) -> None:
    with SmtpServer(tls, "tls") as smtp:
        ch = EmailChannel(config(smtp.port, "tls", None))
        with pytest.raises(PermanentError) as err:
            asyncio.run(ch.send(message(), "msg_1"))
    assert "certificate" in err.value.detail


def test_nothing_listening_is_transient() -> None:
    ch = EmailChannel(config(free_port(), "none", None))
    with pytest.raises(TransientError):
        asyncio.run(ch.send(message(), "msg_1"))
