"""The generic webhook channel: a receiver verifies the Standard Webhooks signature with the
library receivers use, and the webhook-id stays the same across retries."""

from __future__ import annotations

import asyncio

import pytest

from stormwatch.notifications.base import PermanentError, TransientError
from stormwatch.notifications.webhook import WebhookChannel, new_signing_secret
from tests.notifications.servers import HttpReceiver, make_tls
from tests.notifications.test_email import message

# The servers stand in on loopback, which the egress policy opens only when told to.
pytestmark = pytest.mark.usefixtures("loopback_allowed")


def test_the_receiver_verifies_the_signature_and_reads_the_alert() -> None:
    secret = new_signing_secret()
    assert secret.startswith("whsec_")
    with HttpReceiver(secret=secret) as hook:
        asyncio.run(WebhookChannel(hook.url, secret).send(message(), "msg_42"))
    assert hook.bad_signatures == 0
    payload = hook.accepted["msg_42"]
    assert payload["type"] == "alert.firing"
    [alert] = payload["data"]["alerts"]
    assert alert["series"] == "eu-1 -> us-1"
    assert (alert["value"], alert["threshold"], alert["unit"]) == (912_500.0, 50_000.0, "us")


def test_a_wrong_secret_fails_verification_and_is_permanent() -> None:
    with HttpReceiver(secret=new_signing_secret()) as hook, \
            pytest.raises(PermanentError) as err:
        asyncio.run(WebhookChannel(hook.url, new_signing_secret()).send(message(), "m"))
    assert hook.bad_signatures == 1 and not hook.accepted
    # The status only: a reply's body is the receiver's, not something to hand back.
    assert err.value.detail == "HTTP 401"


def test_retries_carry_the_same_id_so_the_receiver_deduplicates() -> None:
    secret = new_signing_secret()
    with HttpReceiver(secret=secret) as hook:
        ch = WebhookChannel(hook.url, secret)
        hook.script = [(503, "busy")]
        with pytest.raises(TransientError):
            asyncio.run(ch.send(message(), "msg_7"))
        asyncio.run(ch.send(message(), "msg_7"))
        asyncio.run(ch.send(message(), "msg_7"))  # a resend after a lost acknowledgement
    ids = [{k.lower(): v for k, v in r.headers.items()}["webhook-id"] for r in hook.requests]
    assert ids == ["msg_7"] * 3
    assert list(hook.accepted) == ["msg_7"] and hook.duplicates == 1


def test_https_with_a_private_ca() -> None:
    tls = make_tls()
    secret = new_signing_secret()
    with HttpReceiver(secret=secret, tls=tls) as hook:
        asyncio.run(WebhookChannel(hook.url, secret, ca_cert_pem=tls.ca_pem)
                    .send(message(), "msg_tls"))
    assert "msg_tls" in hook.accepted
