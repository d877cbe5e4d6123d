"""Discord webhooks against a local Execute Webhook endpoint that checks embeds against
Discord's limits: the embed's fields, colour by state, no mentions; a 429's Retry-After
waited out by the outbox; other 4xx permanent."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine

from stormwatch.core.config import Settings
from stormwatch.core.db import get_sync_engine
from stormwatch.notifications.base import PermanentError, TransientError
from stormwatch.notifications.discord import DiscordChannel
from stormwatch.services.notify import dispatch
from tests.notifications.conftest import Org, add_rule, deliveries, fire
from tests.notifications.receivers import DiscordWebhook
from tests.notifications.servers import HttpReceiver, wait_until
from tests.notifications.test_dispatch import run_dispatch
from tests.notifications.test_email import message

PATH = "/api/webhooks/1234567890/t0ken-sekrit"


def discord() -> tuple[HttpReceiver, DiscordWebhook, str]:
    hook = HttpReceiver()
    hook.handle = d = DiscordWebhook(PATH)
    return hook, d, f"http://127.0.0.1:{hook.port}{PATH}"


@pytest.mark.usefixtures("loopback_allowed")
def test_discord_gets_one_embed_with_a_field_per_series_coloured_by_state() -> None:
    m = message()
    many = replace(m, alerts=tuple(replace(m.alerts[0], alert_id=f"a{i}",
                                           series=f"eu-{i} -> us-1") for i in range(12)))
    hook, d, url = discord()
    with hook:
        assert asyncio.run(DiscordChannel(url).send(m, "msg_1")) == "HTTP 204"
        done = replace(m, kind="resolved", alerts=tuple(
            replace(a, state="resolved", resolved_at=datetime.now(UTC)) for a in m.alerts))
        asyncio.run(DiscordChannel(url).send(done, "msg_2"))
        asyncio.run(DiscordChannel(url).send(many, "msg_3"))
    firing, resolved, grouped = d.posted
    assert firing["allowed_mentions"] == {"parse": []} and firing["username"] == "Stormwatch"
    [e] = firing["embeds"]
    assert e["title"] == "[FIRING] critical: p99 eu-west -> us-east"
    assert e["url"] == "http://sw.example/alerts?rule_id=r1"
    assert e["color"] == 0xD93F0B and resolved["embeds"][0]["color"] == 0x2DA44E
    assert e["timestamp"] == "2026-11-23T12:00:00+00:00"
    assert "**Condition:** p99 of mesh_rtt" in e["description"]
    [f] = e["fields"]
    assert f["name"] == "eu-1 -> us-1"
    assert f["value"].startswith("value 912.5 ms vs threshold 50 ms, since 2026-11-23 12:00")
    assert "[Open in Stormwatch](http://sw.example/pair?src=1&dst=2)" in f["value"]
    assert resolved["embeds"][0]["title"].startswith("[RESOLVED]")
    assert [x["name"] for x in grouped["embeds"][0]["fields"]][-2:] == ["eu-9 -> us-1", "more"]
    assert grouped["embeds"][0]["fields"][-1]["value"] == "and 2 more series"


@pytest.mark.usefixtures("loopback_allowed")
@pytest.mark.parametrize(("status", "error"), [
    (400, PermanentError), (401, PermanentError), (404, PermanentError),
    (429, TransientError), (500, TransientError), (502, TransientError)])
def test_the_status_decides_permanent_or_transient(status: int,
                                                   error: type[Exception]) -> None:
    hook, _, url = discord()
    hook.default = (status, '{"message": "no"}')
    with hook, pytest.raises(error):
        asyncio.run(DiscordChannel(url).send(message(), "msg_1"))


@pytest.mark.usefixtures("loopback_allowed")
def test_an_unknown_webhook_is_permanent_and_a_429_says_when_to_retry() -> None:
    hook, d, url = discord()
    with hook:
        with pytest.raises(PermanentError, match="HTTP 404"):
            asyncio.run(DiscordChannel(url + "x").send(message(), "msg_1"))
        hook.script = [(429, '{"message": "You are being rate limited.", "retry_after": 7.5}')]
        hook.reply_headers = {"Retry-After": "7.5"}
        with pytest.raises(TransientError) as err:
            asyncio.run(DiscordChannel(url).send(message(), "msg_1"))
    assert err.value.retry_after_s == 7.5 and d.posted == []


def test_the_outbox_waits_out_a_429s_retry_after(settings: Settings, org: Org,
                                                 db: Engine) -> None:
    hook, d, url = discord()
    with hook:
        ch = org.post("/channels", {"name": "dc", "kind": "discord", "config": {"url": url}})
        assert ch["config"]["url_hint"] == f"http://127.0.0.1:{hook.port}/…"
        assert "t0ken-sekrit" not in str(ch)
        hook.script = [(429, "rate_limited")]
        hook.reply_headers = {"Retry-After": "2"}
        rule = add_rule(db, org.id, [uuid.UUID(ch["id"])])
        fire(db, org.id, rule, "eu-1 -> us-1")
        before = datetime.now(UTC)
        assert run_dispatch().get("retry") == 1
        [row] = deliveries(db, rule)
        # Backoff alone would be 0.2 s here; Discord asked for 2.
        assert row["next_attempt_at"] >= before + timedelta(seconds=2)
        hook.reply_headers = {}
        wait_until("the retry", 20,
                   lambda: dispatch.deliver_due(get_sync_engine()).get("sent") == 1)
    assert len(d.posted) == 1
    assert [r["state"] for r in deliveries(db, rule)] == ["sent"]


def test_a_test_send_answers_discords_reply(org: Org) -> None:
    hook, d, url = discord()
    with hook:
        ch = org.post("/channels", {"name": "dc", "kind": "discord", "config": {"url": url}})
        assert org.post(f"/channels/{ch['id']}/test", {}) == {
            "ok": True, "permanent": None, "detail": "HTTP 204"}
    [posted] = d.posted
    assert posted["embeds"][0]["title"] == "[TEST] info: Test of channel dc"
    assert posted["embeds"][0]["color"] == 0x5865F2
