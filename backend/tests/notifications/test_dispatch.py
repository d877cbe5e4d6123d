"""Delivery from alert events: grouping per rule, firing then resolved, silences,
maintenance windows, reminders, retries with backoff, permanent failures, and a worker
killed mid-send. Events are written as evaluation writes them; channels are real local
servers; the outbox runs on the test database."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, text

from stormwatch.core.config import Settings
from stormwatch.core.db import get_sync_engine
from stormwatch.services.notify import dispatch
from stormwatch.services.notify import plan as plan_module
from tests.conftest import LOOPBACK_ALLOWED, REPO, Services
from tests.notifications.conftest import (
    Org,
    add_rule,
    deliveries,
    fire,
    outcomes,
    resolve,
)
from tests.notifications.servers import HttpReceiver, wait_until


def run_dispatch() -> dict[str, int]:
    engine = get_sync_engine()
    with engine.begin() as conn:
        made = dispatch.plan(conn)
    return {"made": made, **dispatch.deliver_due(engine, budget_s=30)}


def payloads(hook: HttpReceiver) -> list[dict[str, Any]]:
    return list(hook.accepted.values())


def test_alerts_of_one_rule_pending_together_go_out_as_one_message_then_one_resolved(
        settings: Settings, org: Org, db: Engine) -> None:
    with HttpReceiver() as plain, HttpReceiver() as signed_hook:
        ch, secret = org.webhook(signed_hook.url)
        signed_hook.secret = secret
        other, _ = org.webhook(plain.url, "second")
        rule = add_rule(db, org.id, [ch, other])
        a1 = fire(db, org.id, rule, "eu-1 -> us-1", 912.0)
        a2 = fire(db, org.id, rule, "eu-2 -> us-1", 640.0)
        assert run_dispatch()["sent"] == 2  # one message per channel
        assert run_dispatch() == {"made": 0}  # a re-run finds nothing to do
        [msg] = payloads(signed_hook)
        assert msg["type"] == "alert.firing"
        assert {a["series"] for a in msg["data"]["alerts"]} == {"eu-1 -> us-1", "eu-2 -> us-1"}
        assert {a["value"] for a in msg["data"]["alerts"]} == {912.0, 640.0}
        link = msg["data"]["alerts"][0]["link"]
        assert link.startswith("https://sw.example/pair?src=")
        assert len(plain.requests) == 1

        resolve(db, a1)
        resolve(db, a2)
        assert run_dispatch()["sent"] == 2
        firing, resolved = payloads(signed_hook)
        assert resolved["type"] == "alert.resolved"
        assert {a["state"] for a in resolved["data"]["alerts"]} == {"resolved"}
        assert all(a["resolved_at"] for a in resolved["data"]["alerts"])
    assert signed_hook.bad_signatures == 0 and signed_hook.duplicates == 0
    assert outcomes(db, rule) == ["notified"] * 4
    assert [d["nkind"] for d in deliveries(db, rule)] == ["firing"] * 2 + ["resolved"] * 2


def test_a_transient_failure_is_retried_with_backoff_and_sent_once(
        settings: Settings, org: Org, db: Engine) -> None:
    with HttpReceiver() as hook:
        ch, hook.secret = org.webhook(hook.url)
        hook.script = [(503, "upstream_busy")]
        rule = add_rule(db, org.id, [ch])
        fire(db, org.id, rule, "a -> b")
        assert run_dispatch().get("retry") == 1
        [d] = deliveries(db, rule)
        assert (d["state"], d["attempts"], d["last_error"]) == ("pending", 1,
                                                               "HTTP 503: upstream_busy")
        assert d["next_attempt_at"] > datetime.now(UTC) - timedelta(seconds=1)
        wait_until("the backoff to pass", 10,
                   lambda: dispatch.deliver_due(get_sync_engine()).get("sent") == 1)
        [d] = deliveries(db, rule)
        assert (d["state"], d["attempts"]) == ("sent", 2)
        assert d["response"] == "HTTP 200: ok"
    assert len(hook.accepted) == 1 and hook.duplicates == 0


def test_a_permanent_failure_stops_at_once_and_is_logged(
        settings: Settings, org: Org, db: Engine, caplog: pytest.LogCaptureFixture) -> None:
    with HttpReceiver() as hook:
        ch, _ = org.webhook(hook.url)
        hook.default = (410, "hook_deleted")  # a service's own error code comes back
        rule = add_rule(db, org.id, [ch])
        fire(db, org.id, rule, "a -> b")
        assert run_dispatch().get("failed") == 1
        for _ in range(3):
            assert run_dispatch() == {"made": 0}
    [d] = deliveries(db, rule)
    assert (d["state"], d["attempts"], d["last_error"]) == ("failed", 1, "HTTP 410: hook_deleted")
    assert len(hook.requests) == 1
    assert "failed permanently: HTTP 410: hook_deleted" in caplog.text


def test_transient_failures_give_up_after_the_bounded_attempts(
        settings: Settings, org: Org, db: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings, "notify_max_attempts", 3)
    monkeypatch.setattr(settings, "notify_retry_base_s", 0.05)
    with HttpReceiver() as hook:
        ch, _ = org.webhook(hook.url)
        hook.default = (500, "always down")
        rule = add_rule(db, org.id, [ch])
        fire(db, org.id, rule, "a -> b")
        run_dispatch()
        wait_until("the delivery to give up", 15, lambda: (
            dispatch.deliver_due(get_sync_engine()) is not None
            and deliveries(db, rule)[0]["state"] == "failed"))
    [d] = deliveries(db, rule)
    assert d["attempts"] == 3 and len(hook.requests) == 3


def test_a_silence_on_the_rule_or_its_labels_mutes_it_until_it_ends(
        settings: Settings, org: Org, db: Engine) -> None:
    with HttpReceiver() as hook:
        ch, _ = org.webhook(hook.url)
        muted = add_rule(db, org.id, [ch], labels={"team": "net"})
        by_id = add_rule(db, org.id, [ch], name="by id")
        loud = add_rule(db, org.id, [ch], name="other", labels={"team": "storage"})
        ends = datetime.now(UTC) + timedelta(hours=1)
        s1 = org.post("/silences", {"matchers": [{"label": "team", "value": "net"}],
                                    "ends_at": ends.isoformat(), "comment": "link work"})
        org.post("/silences", {"rule_ids": [str(by_id)], "ends_at": ends.isoformat(),
                               "comment": "known"})
        assert s1["state"] == "active" and s1["created_by"].startswith("api key ")
        fire(db, org.id, muted, "a -> b")
        fire(db, org.id, by_id, "c -> d")
        fire(db, org.id, loud, "e -> f")
        run_dispatch()
        assert [p["data"]["rule"] for p in [__import__("json").loads(r.body)
                                            for r in hook.requests]] == ["other"]
        assert outcomes(db, muted) == ["silenced"] and outcomes(db, by_id) == ["silenced"]

        # Expired while the alert still fires: its firing message goes out then.
        r = org.api.delete(f"/api/v1/silences/{s1['id']}", headers=org.headers)
        assert r.status_code == 200 and r.json()["state"] == "expired"
        run_dispatch()
    assert len(hook.requests) == 2
    assert outcomes(db, muted) == ["notified"] and outcomes(db, by_id) == ["silenced"]



def test_a_silence_ending_on_a_disabled_rule_tells_nothing(
        settings: Settings, org: Org, db: Engine) -> None:
    with HttpReceiver() as hook:
        ch, _ = org.webhook(hook.url)
        rule = add_rule(db, org.id, [ch])
        ends = datetime.now(UTC) + timedelta(hours=1)
        s = org.post("/silences", {"rule_ids": [str(rule)], "ends_at": ends.isoformat(),
                                   "comment": "known"})
        fire(db, org.id, rule, "a -> b")
        run_dispatch()
        assert outcomes(db, rule) == ["silenced"]
        with db.begin() as c:
            c.execute(text("UPDATE alert_rules SET enabled = false WHERE id = :r"), {"r": rule})
        r = org.api.delete(f"/api/v1/silences/{s['id']}", headers=org.headers)
        assert r.status_code == 200
        run_dispatch()
    assert hook.requests == []
    assert outcomes(db, rule) == ["silenced"]

def test_maintenance_windows_mute_one_off_and_recurring(
        settings: Settings, org: Org, db: Engine) -> None:
    now = datetime.now(UTC)
    with HttpReceiver() as hook:
        ch, _ = org.webhook(hook.url)
        one_off = add_rule(db, org.id, [ch], name="one-off")
        weekly = add_rule(db, org.id, [ch], name="weekly", labels={"env": "prod"})
        outside = add_rule(db, org.id, [ch], name="outside")
        org.post("/maintenance-windows", {
            "name": "upgrade", "starts_at": (now - timedelta(minutes=5)).isoformat(),
            "ends_at": (now + timedelta(minutes=30)).isoformat(),
            "rule_ids": [str(one_off)]})
        # Recurring every day from a week ago at this local time in Tokyo, for 10 minutes.
        start_local = (now - timedelta(days=7, minutes=2)).astimezone(
            __import__("zoneinfo").ZoneInfo("Asia/Tokyo")).replace(tzinfo=None)
        w = org.post("/maintenance-windows", {
            "name": "nightly", "timezone": "Asia/Tokyo", "starts_at": start_local.isoformat(),
            "duration_s": 600, "rrule": "FREQ=DAILY",
            "matchers": [{"label": "env", "op": "=~", "value": "pr.*"}]})
        assert w["active_now"] is True and w["next_start"] is not None
        org.post("/maintenance-windows", {
            "name": "later", "starts_at": (now + timedelta(hours=2)).isoformat(),
            "duration_s": 3600, "rule_ids": [str(outside)]})
        for rule in (one_off, weekly, outside):
            fire(db, org.id, rule, "a -> b")
        run_dispatch()
    assert outcomes(db, one_off) == ["maintenance"]
    assert outcomes(db, weekly) == ["maintenance"]
    assert outcomes(db, outside) == ["notified"]
    assert len(hook.requests) == 1


def test_reminders_repeat_while_firing_and_stop_when_resolved(
        settings: Settings, org: Org, db: Engine) -> None:
    with HttpReceiver() as hook:
        ch, _ = org.webhook(hook.url)
        rule = add_rule(db, org.id, [ch], reminder_interval_s=60)
        alert = fire(db, org.id, rule, "a -> b")
        run_dispatch()
        assert run_dispatch() == {"made": 0}  # not due yet
        # An hour passes: the next pass is due one reminder, not one per missed interval.
        with db.begin() as c:
            c.execute(text("UPDATE alert_notify_state SET last_notified_at = now() - "
                           "interval '1 hour' WHERE alert_id = :a"), {"a": alert})
        assert run_dispatch()["sent"] == 1
        assert run_dispatch() == {"made": 0}
        resolve(db, alert)
        with db.begin() as c:
            c.execute(text("UPDATE alert_notify_state SET last_notified_at = now() - "
                           "interval '1 hour' WHERE alert_id = :a"), {"a": alert})
        run_dispatch()
    kinds = [d["nkind"] for d in deliveries(db, rule)]
    assert kinds == ["firing", "reminder", "resolved"]
    bodies = [__import__("json").loads(r.body) for r in hook.requests]
    assert [b["type"] for b in bodies] == ["alert.firing", "alert.reminder", "alert.resolved"]


def test_a_resolved_alert_whose_firing_was_never_told_sends_nothing(
        settings: Settings, org: Org, db: Engine) -> None:
    rule = add_rule(db, org.id, [])  # no channels
    alert = fire(db, org.id, rule, "a -> b")
    run_dispatch()
    resolve(db, alert)
    run_dispatch()
    assert outcomes(db, rule) == ["no_channels", "not_notified"]
    assert deliveries(db, rule) == []


def test_a_worker_killed_mid_send_resends_once_with_the_same_webhook_id(
        settings: Settings, services: Services, org: Org, db: Engine) -> None:
    """The receiver takes the request and holds it; the worker is SIGKILLed before it can
    mark the row sent. After the lease expires a new worker resends the same webhook-id, the
    receiver sees it is a duplicate: one message processed, the row ends 'sent'."""
    with HttpReceiver() as hook:
        ch, hook.secret = org.webhook(hook.url)
        rule = add_rule(db, org.id, [ch])
        fire(db, org.id, rule, "a -> b")
        with get_sync_engine().begin() as conn:
            assert dispatch.plan(conn) == 1
        hook.hold.clear()
        env = {**os.environ, "DATABASE_URL": services.database_url, "NOTIFY_LEASE_S": "2",
               "PYTHONPATH": str(REPO / "backend"), "EGRESS_ALLOW": LOOPBACK_ALLOWED}
        worker = subprocess.Popen(
            [sys.executable, "-c", "from stormwatch.core.db import get_sync_engine;"
             "from stormwatch.services.notify import dispatch;"
             "dispatch.deliver_due(get_sync_engine())"], env=env, cwd=REPO,
            start_new_session=True)
        try:
            assert hook.arrived.wait(60), "the worker never sent"
            os.kill(worker.pid, signal.SIGKILL)
            worker.wait(10)
        finally:
            if worker.poll() is None:
                os.kill(worker.pid, signal.SIGKILL)
        [d] = deliveries(db, rule)
        assert (d["state"], d["attempts"]) == ("sending", 1)
        hook.hold.set()  # the receiver processes the request its sender no longer awaits
        wait_until("the receiver to process the first request", 10,
                   lambda: len(hook.accepted) == 1)
        monkey_lease = d["lease_expires_at"]
        wait_until("the lease to expire", 10,
                   lambda: datetime.now(UTC) > monkey_lease + timedelta(milliseconds=200))
        assert dispatch.deliver_due(get_sync_engine()) == {"sent": 1}
        assert dispatch.deliver_due(get_sync_engine()) == {}
    [d] = deliveries(db, rule)
    assert (d["state"], d["attempts"]) == ("sent", 2)
    ids = {r.headers.get("webhook-id") or r.headers.get("Webhook-Id") for r in hook.requests}
    assert len(hook.requests) == 2 and len(ids) == 1
    assert len(hook.accepted) == 1 and hook.duplicates == 1


def test_two_dispatchers_at_once_make_each_notification_once(
        settings: Settings, org: Org, db: Engine) -> None:
    import threading

    with HttpReceiver() as hook:
        ch, hook.secret = org.webhook(hook.url)
        rules = [add_rule(db, org.id, [ch], name=f"r{i}") for i in range(6)]
        for r in rules:
            fire(db, org.id, r, "a -> b")
        barrier = threading.Barrier(2)
        results: list[dict[str, int]] = []

        def go() -> None:
            barrier.wait()
            results.append(run_dispatch())

        threads = [threading.Thread(target=go) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert sum(r["made"] for r in results) == 6
    assert sum(r.get("sent", 0) for r in results) == 6
    assert len(hook.requests) == 6 and hook.duplicates == 0
    _ = uuid, time


def test_an_alert_that_fired_and_resolved_between_two_passes_is_told_once_as_resolved(
        settings: Settings, org: Org, db: Engine) -> None:
    with HttpReceiver() as hook:
        ch, hook.secret = org.webhook(hook.url)
        rule = add_rule(db, org.id, [ch])
        resolve(db, fire(db, org.id, rule, "a -> b", 700.0))
        run_dispatch()
    [msg] = payloads(hook)
    assert msg["type"] == "alert.resolved"
    [alert] = msg["data"]["alerts"]
    assert alert["started_at"] and alert["resolved_at"] and alert["value"] == 700.0
    assert outcomes(db, rule) == ["notified", "notified"]


def test_fired_and_resolved_in_one_cycle_is_told_once_whatever_order_the_events_come_in(
        settings: Settings, org: Org, db: Engine) -> None:
    """A catch-up cycle writes an alert opened and resolved at once: its two events share
    created_at, so the planner's ORDER BY may return the resolved one first."""
    with HttpReceiver() as hook:
        ch, hook.secret = org.webhook(hook.url)
        rule = add_rule(db, org.id, [ch])
        aid = uuid.uuid4()
        start = datetime.now(UTC) - timedelta(minutes=5)
        ev = '{"series_name": "a -> b", "value": 700.0, "threshold": 50.0, "unit": "ms"}'
        with db.begin() as c:  # one transaction, as evaluation writes it; resolved row first
            c.execute(text(
                "INSERT INTO alerts (id, org_id, rule_id, group_key, state, started_at, "
                "resolved_at, evidence, version) VALUES (:id, :org, :rule, 'a -> b', "
                "'resolved', :s, :r, CAST(:ev AS jsonb), 2)"),
                {"id": aid, "org": org.id, "rule": rule, "s": start,
                 "r": start + timedelta(minutes=2), "ev": ev})
            for kind, at in (("resolved", start + timedelta(minutes=2)), ("firing", start)):
                c.execute(text(
                    "INSERT INTO alert_events (id, org_id, rule_id, alert_id, kind, at, "
                    "evidence) VALUES (gen_random_uuid(), :org, :rule, :id, :kind, :at, "
                    "CAST(:ev AS jsonb))"),
                    {"org": org.id, "rule": rule, "id": aid, "kind": kind, "at": at, "ev": ev})
        run_dispatch()
    [msg] = payloads(hook)
    assert msg["type"] == "alert.resolved"
    assert outcomes(db, rule) == ["notified", "notified"]


def test_planning_one_pass_gives_the_same_messages_whatever_order_its_events_come_in(
        settings: Settings, org: Org, db: Engine) -> None:
    """Every order of one pass's events (a firing and its resolution, a lone firing, and a
    resolution whose firing an earlier pass told) is planned alike: one cycle's events share
    created_at, so the order PostgreSQL returns them in is not theirs to choose (e19d223
    fixed one such dependence). All 24 orders, each planned and rolled back."""
    with HttpReceiver() as hook:
        ch, hook.secret = org.webhook(hook.url)
        rule = add_rule(db, org.id, [ch])
        told = fire(db, org.id, rule, "c -> d", 800.0)
        run_dispatch()  # its firing told in an earlier pass
        a = fire(db, org.id, rule, "a -> b", 700.0)
        resolve(db, a)
        fire(db, org.id, rule, "e -> f", 600.0)
        resolve(db, told)
        check_order_independence(db, rule)
        run_dispatch()  # leaves nothing pending for later tests' passes


def check_order_independence(db: Engine, rule: uuid.UUID) -> None:
    select = (
        "SELECT e.id, e.org_id, e.rule_id, e.alert_id, e.kind, e.at, e.evidence "
        "FROM alert_events e WHERE e.rule_id = :r AND NOT EXISTS "
        "(SELECT 1 FROM alert_event_dispatches d WHERE d.event_id = e.id)")
    with db.connect() as c:
        events = c.execute(text(select), {"r": rule}).mappings().all()
    assert len(events) == 4

    def planned(order: tuple[int, ...]) -> frozenset[tuple[Any, ...]]:
        with db.connect() as c, c.begin() as tx:
            plan_module._plan_events(c, [events[i] for i in order], datetime.now(UTC))
            rows = c.execute(text(
                "SELECT e.alert_id, e.kind, d.outcome, n.kind, n.alert_ids "
                "FROM alert_event_dispatches d JOIN alert_events e ON e.id = d.event_id "
                "LEFT JOIN notifications n ON n.id = d.notification_id "
                "WHERE e.rule_id = :r AND e.id = ANY(:ids)"),
                {"r": rule, "ids": [e["id"] for e in events]}).all()
            tx.rollback()
        return frozenset((r[0], r[1], r[2], r[3], frozenset(r[4] or ())) for r in rows)

    first = planned(tuple(range(len(events))))
    assert len(first) == len(events)  # every event judged, in every order below too
    for order in itertools.permutations(range(len(events))):
        assert planned(order) == first, f"events in the order {order} planned otherwise"
    assert outcomes(db, rule) == ["notified"]  # only the earlier pass's: all rolled back


def test_planners_take_turns_so_one_cycle_is_never_told_in_two_messages(
        settings: Settings, org: Org, db: Engine) -> None:
    """A planner mid-claim holds the planners' lock and has locked one of a cycle's two
    firings: a second planner waits for it rather than skip that row and tell the other
    alert alone (5410809). Synchronised on the second planner's backend waiting on a lock."""
    with HttpReceiver() as hook:
        ch, hook.secret = org.webhook(hook.url)
        rule = add_rule(db, org.id, [ch])
        a1 = fire(db, org.id, rule, "a -> b", 700.0)
        fire(db, org.id, rule, "c -> d", 650.0)
        first = db.connect()
        second: dict[str, Any] = {}

        def plan_second() -> None:
            try:
                second["made"] = run_dispatch()["made"]
            except BaseException as exc:  # re-raised in the test's thread
                second["error"] = exc

        thread = threading.Thread(target=plan_second)
        try:
            with first.begin():  # the first planner, as plan() claims: lock, then rows
                first.execute(text(
                    "SELECT pg_advisory_xact_lock(hashtext('stormwatch.notify.plan'))"))
                first.execute(text("SELECT id FROM alert_events WHERE alert_id = :a "
                                   "FOR UPDATE"), {"a": a1})
                thread.start()

                def waiting_or_done() -> bool:
                    with db.connect() as c:
                        waits = c.execute(text(
                            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = "
                            "'Lock' AND query LIKE '%pg_advisory_xact_lock%' AND pid <> "
                            "pg_backend_pid()")).scalar_one()
                    return bool(waits) or not thread.is_alive()

                wait_until("the second planner to wait on a lock or finish", 30,
                           waiting_or_done)
                assert thread.is_alive(), (
                    f"the second planner did not wait for the first: {second}")
            thread.join(60)
        finally:
            first.close()
        assert "error" not in second, second.get("error")
        run_dispatch()
        [msg] = payloads(hook)
    assert msg["type"] == "alert.firing"
    assert {a["series"] for a in msg["data"]["alerts"]} == {"a -> b", "c -> d"}, msg
    assert outcomes(db, rule) == ["notified", "notified"]


def test_a_resolution_whose_firing_another_planner_holds_waits_and_is_told(
        settings: Settings, org: Org, db: Engine) -> None:
    """Two planners at once can split one alert's events: while one holds its firing event
    (claimed, not yet committed), the other must not judge the resolution "never told"."""
    with HttpReceiver() as hook:
        ch, hook.secret = org.webhook(hook.url)
        rule = add_rule(db, org.id, [ch])
        alert = fire(db, org.id, rule, "a -> b", 700.0)
        resolve(db, alert)
        other = db.connect()
        try:
            with other.begin():  # the other planner's claim on the firing event
                other.execute(text(
                    "SELECT id FROM alert_events WHERE alert_id = :a AND kind = 'firing' "
                    "FOR UPDATE"), {"a": alert})
                run_dispatch()
            run_dispatch()  # the firing is free again: the next pass takes both
        finally:
            other.close()
    [msg] = payloads(hook)
    assert msg["type"] == "alert.resolved"
    assert outcomes(db, rule) == ["notified", "notified"]
