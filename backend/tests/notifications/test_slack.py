"""The Slack channel against a local HTTP server standing in for an incoming-webhook URL:
Block Kit content, and 4xx permanent except 429, 429/5xx/network transient."""

from __future__ import annotations

import asyncio
import json

import pytest

from stormwatch.devtools.services import free_port
from stormwatch.notifications.base import PermanentError, TransientError
from stormwatch.notifications.slack import SlackChannel
from tests.notifications.servers import HttpReceiver
from tests.notifications.test_email import message

# The servers stand in on loopback, which the egress policy opens only when told to.
pytestmark = pytest.mark.usefixtures("loopback_allowed")


def test_slack_gets_block_kit_with_what_where_value_and_link() -> None:
    with HttpReceiver() as hook:
        reply = asyncio.run(SlackChannel(hook.url).send(message(), "msg_1"))
    assert reply == "HTTP 200: ok"
    [req] = hook.requests
    body = json.loads(req.body)
    assert body["text"] == "[FIRING] critical: p99 eu-west -> us-east"
    text = json.dumps(body["blocks"])
    assert body["blocks"][0]["type"] == "header"
    assert "eu-1 -> us-1" in text and "value 912.5 ms vs threshold 50 ms" in text
    assert "<http://sw.example/pair?src=1&dst=2|Open in Stormwatch>" in text
    assert body["blocks"][-1]["elements"][0]["url"] == "http://sw.example/alerts?rule_id=r1"


@pytest.mark.parametrize(("status", "body", "error"), [
    (404, "no_service", PermanentError), (403, "invalid_token", PermanentError),
    (400, "invalid_blocks", PermanentError), (429, "rate_limited", TransientError),
    (500, "rollup_error", TransientError), (503, "unavailable", TransientError)])
def test_slack_status_decides_permanent_or_transient(status: int, body: str,
                                                     error: type[Exception]) -> None:
    with HttpReceiver() as hook:
        hook.default = (status, body)
        with pytest.raises(error) as err:
            asyncio.run(SlackChannel(hook.url).send(message(), "msg_1"))
    assert str(err.value) == f"HTTP {status}: {body}"


def test_slack_unreachable_is_transient() -> None:
    with pytest.raises(TransientError):
        asyncio.run(SlackChannel(f"http://127.0.0.1:{free_port()}/x", timeout_s=5)
                    .send(message(), "msg_1"))
