"""PagerDuty Events API v2 against a local enqueue endpoint that checks each event's
documented fields: one incident per alert under a dedup_key from its id, the same key on a
retry and on the resolve that closes it, 429/5xx transient and other 4xx permanent."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine

from stormwatch.core.config import Settings
from stormwatch.core.db import get_sync_engine
from stormwatch.notifications.base import PermanentError, TransientError
from stormwatch.notifications.pagerduty import PagerDutyChannel
from stormwatch.services.notify import dispatch
from tests.notifications.conftest import Org, add_rule, deliveries, fire, resolve
from tests.notifications.receivers import PagerDutyEvents
from tests.notifications.servers import HttpReceiver, wait_until
from tests.notifications.test_dispatch import run_dispatch
from tests.notifications.test_email import message

KEY = "R0UT1NGKEY0123456789abcdefABCDEF"


def pagerduty() -> tuple[HttpReceiver, PagerDutyEvents]:
    hook = HttpReceiver()
    hook.handle = events = PagerDutyEvents(KEY)
    return hook, events


def enqueue_url(hook: HttpReceiver) -> str:
    return f"http://127.0.0.1:{hook.port}/v2/enqueue"


@pytest.mark.usefixtures("loopback_allowed")
def test_each_alert_triggers_its_own_incident_and_its_resolve_closes_it() -> None:
    fired = message()
    second = replace(fired.alerts[0], alert_id="a2", series="eu-2 -> us-1", link=None,
                     labels={"src_region": "eu-west-2"})
    fired = replace(fired, alerts=(fired.alerts[0], second), labels={"team": "net"})
    hook, pd = pagerduty()
    with hook:
        ch = PagerDutyChannel(KEY, enqueue_url(hook), {"critical": "error"})
        assert asyncio.run(ch.send(fired, "msg_1")) == "HTTP 202"
        first, other = pd.events
        assert first["event_action"] == "trigger"
        assert first["dedup_key"] == "stormwatch-alert-a1"
        assert other["dedup_key"] == "stormwatch-alert-a2"
        p = first["payload"]
        assert p["summary"] == ("critical: p99 eu-west -> us-east - eu-1 -> us-1: "
                                "value 912.5 ms vs threshold 50 ms")
        assert (p["source"], p["severity"], p["group"]) == (
            "eu-1 -> us-1", "error", "p99 eu-west -> us-east")  # severity as mapped
        assert p["timestamp"] == "2026-11-23T12:00:00+00:00"
        assert p["custom_details"]["value"] == 912_500.0
        assert p["custom_details"]["condition"].startswith("p99 of mesh_rtt")
        assert first["links"] == [{"href": "http://sw.example/pair?src=1&dst=2",
                                   "text": "Open in Stormwatch"}]
        assert first["client"] == "Stormwatch"
        # Without a series link, the message's link to the rule's alerts.
        assert other["links"][0]["href"] == "http://sw.example/alerts?rule_id=r1"
        assert other["payload"]["custom_details"]["labels"] == {"team": "net",
                                                                "src_region": "eu-west-2"}
        assert [(i.dedup_key, i.open) for i in pd.incidents] == [
            ("stormwatch-alert-a1", True), ("stormwatch-alert-a2", True)]

        # A reminder adds to the open incident; the resolve closes that one.
        asyncio.run(ch.send(replace(fired, kind="reminder"), "msg_2"))
        done = replace(fired, kind="resolved", alerts=tuple(
            replace(a, state="resolved", resolved_at=datetime.now(UTC)) for a in fired.alerts))
        asyncio.run(ch.send(done, "msg_3"))
    assert [e["event_action"] for e in pd.events[-2:]] == ["resolve", "resolve"]
    assert set(pd.events[-1]) == {"routing_key", "event_action", "dedup_key"}
    assert [(i.dedup_key, i.triggers, i.open) for i in pd.incidents] == [
        ("stormwatch-alert-a1", 2, False), ("stormwatch-alert-a2", 2, False)]


@pytest.mark.usefixtures("loopback_allowed")
@pytest.mark.parametrize(("status", "error"), [
    (400, PermanentError), (403, PermanentError), (404, PermanentError),
    (429, TransientError), (500, TransientError), (503, TransientError)])
def test_the_status_decides_permanent_or_transient(status: int,
                                                   error: type[Exception]) -> None:
    hook, _ = pagerduty()
    hook.default = (status, '{"status": "throttled"}')
    with hook, pytest.raises(error):
        asyncio.run(PagerDutyChannel(KEY, enqueue_url(hook)).send(message(), "msg_1"))


@pytest.mark.usefixtures("loopback_allowed")
def test_a_wrong_routing_key_is_permanent() -> None:
    hook, pd = pagerduty()
    with hook, pytest.raises(PermanentError, match="HTTP 400"):
        asyncio.run(PagerDutyChannel("other", enqueue_url(hook)).send(message(), "msg_1"))
    assert pd.incidents == []


def test_a_retried_delivery_and_the_resolution_keep_one_incident(
        settings: Settings, org: Org, db: Engine) -> None:
    hook, pd = pagerduty()
    with hook:
        ch = org.post("/channels", {"name": "pd", "kind": "pagerduty", "config": {
            "routing_key": KEY, "events_url": enqueue_url(hook)}})
        assert ch["config"] == {"events_url": enqueue_url(hook), "severity_map": {},
                                "has_ca_cert": False, "has_routing_key": True}
        hook.script = [(500, "internal")]
        rule = add_rule(db, org.id, [uuid.UUID(ch["id"])])
        alert = fire(db, org.id, rule, "eu-1 -> us-1")
        assert run_dispatch().get("retry") == 1
        wait_until("the retry", 10,
                   lambda: dispatch.deliver_due(get_sync_engine()).get("sent") == 1)
        resolve(db, alert)
        assert run_dispatch().get("sent") == 1
    assert len(hook.requests) == 3  # the refused trigger, its retry, the resolve
    assert [e["event_action"] for e in pd.events] == ["trigger", "resolve"]
    assert {e["dedup_key"] for e in pd.events} == {f"stormwatch-alert-{alert}"}
    assert hook.requests[0].body == hook.requests[1].body  # the retry is the same event
    assert [(i.dedup_key, i.triggers, i.open) for i in pd.incidents] == [
        (f"stormwatch-alert-{alert}", 1, False)]
    assert [d["state"] for d in deliveries(db, rule)] == ["sent", "sent"]


def test_a_test_send_opens_and_closes_an_incident_and_answers_the_reply(org: Org) -> None:
    hook, pd = pagerduty()
    with hook:
        ch = org.post("/channels", {"name": "pd", "kind": "pagerduty", "config": {
            "routing_key": "wrong", "events_url": enqueue_url(hook)}})
        bad = org.post(f"/channels/{ch['id']}/test", {})
        assert bad == {"ok": False, "permanent": True, "detail": "HTTP 400"}
        r = org.api.patch(f"/api/v1/channels/{ch['id']}", json={"config": {"routing_key": KEY}},
                          headers=org.headers)
        assert r.status_code == 200, r.text
        assert org.post(f"/channels/{ch['id']}/test", {}) == {
            "ok": True, "permanent": None, "detail": "HTTP 202"}
    [incident] = pd.incidents
    assert not incident.open and incident.severity == "info"
    assert incident.summary.startswith("info: Test of channel pd")
    assert KEY not in org.api.get(f"/api/v1/channels/{ch['id']}", headers=org.headers).text


def test_bad_pagerduty_config_is_a_422_naming_the_field(org: Org) -> None:
    def locs(config: dict[str, object]) -> list[list[object]]:
        r = org.api.post("/api/v1/channels", json={"name": "pd", "kind": "pagerduty",
                                                   "config": config}, headers=org.headers)
        assert r.status_code == 422, r.text
        return [e["loc"] for e in r.json()["detail"]]

    assert ["body", "pagerduty", "config", "routing_key"] in locs({})
    assert ["body", "pagerduty", "config", "severity_map", "critical"] in locs(
        {"routing_key": KEY, "severity_map": {"critical": "sev1"}})
    assert ["body", "pagerduty", "config", "events_url"] in locs(
        {"routing_key": KEY, "events_url": "ftp://events.example.com/v2/enqueue"})
