"""The plan stage: from alert events to notifications in the outbox, in one transaction.

It claims the events nobody handled (FOR UPDATE SKIP LOCKED, and the event_id primary key of
alert_event_dispatches), mutes the silenced and those in maintenance (mute.py), groups the
rest per rule and kind into one notification rendered once (notifications/render.py) with
one outbox row per channel (outbox.py), and records each event's outcome. It also adds
reminders for alerts still firing past their rule's interval, and late firing messages for
alerts whose silence ended while they still fire."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, text

from stormwatch.core.config import get_settings
from stormwatch.notifications.base import AlertItem
from stormwatch.notifications.render import alert_item, message
from stormwatch.services.alerts.definition import Rule, load_rules_by_id
from stormwatch.services.alerts.evidence import Evidence
from stormwatch.services.notify.mute import load_suppressions
from stormwatch.services.notify.outbox import enqueue

Row = Mapping[Any, Any]  # a result row's mapping or a plain dict

# Events older than this are history, not news: a worker back after a day does not page.
EVENT_HORIZON = timedelta(hours=24)
MAX_EVENTS_PER_PASS = 2000


def _item(alert: Row, evidence: Mapping[str, Any] | None = None) -> AlertItem:
    """One alert of a message, from the evidence of its event (or, without one, of its row)."""
    ev = Evidence.read(evidence if evidence is not None else alert["evidence"])
    return alert_item(alert, ev, get_settings().public_base_url)


def _notify(conn: Connection, rule: Rule, kind: str, channels: list[uuid.UUID],
            alert_ids: list[uuid.UUID], event_ids: list[uuid.UUID],
            items: Sequence[AlertItem], now: datetime) -> uuid.UUID:
    msg = message(rule, kind, items, now, get_settings().public_base_url)
    return enqueue(conn, msg, channels, alert_ids, event_ids, now)


def _channels_of(conn: Connection, rule: Rule) -> list[uuid.UUID]:
    if not rule.channel_ids:
        return []
    return list(conn.execute(text(
        "SELECT id FROM notification_channels WHERE org_id = :org AND id = ANY(:ids) "
        "AND enabled"), {"org": rule.org_id, "ids": rule.channel_ids}).scalars())


def _record_outcomes(conn: Connection, rows: list[dict[str, Any]]) -> None:
    if rows:
        conn.execute(text(
            "INSERT INTO alert_event_dispatches (event_id, org_id, outcome, notification_id, "
            "suppressed_by, created_at) VALUES (:event_id, :org_id, :outcome, "
            ":notification_id, :suppressed_by, :now)"), rows)


def plan(conn: Connection, now: datetime | None = None) -> int:
    """Turns pending alert events, due reminders and ended silences into notifications and
    outbox rows, in the caller's transaction. Returns how many notifications it made."""
    now = now or datetime.now(UTC)
    # Planners take turns: two at once could each claim part of one rule's events and tell
    # one cycle in two messages. Planning is short; delivery, the slow part, is not held.
    conn.execute(text("SELECT pg_advisory_xact_lock(hashtext('stormwatch.notify.plan'))"))
    events = conn.execute(text(
        "SELECT e.id, e.org_id, e.rule_id, e.alert_id, e.kind, e.at, e.evidence "
        "FROM alert_events e WHERE e.created_at > :horizon AND NOT EXISTS "
        "(SELECT 1 FROM alert_event_dispatches d WHERE d.event_id = e.id) "
        "ORDER BY e.created_at LIMIT :lim FOR UPDATE OF e SKIP LOCKED"),
        {"horizon": now - EVENT_HORIZON, "lim": MAX_EVENTS_PER_PASS}).mappings().all()
    made = 0
    if events:
        made += _plan_events(conn, events, now)
    made += _plan_reminders(conn, now)
    made += _plan_unsilenced(conn, now)
    return made


def _alerts(conn: Connection, ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, Row]:
    rows = conn.execute(text(
        "SELECT id, org_id, rule_id, group_key, state, started_at, resolved_at, evidence "
        "FROM alerts WHERE id = ANY(:ids)"), {"ids": list(set(ids))}).mappings().all()
    return {r["id"]: r for r in rows}


def _held_firings(conn: Connection, events: Sequence[Row], now: datetime) -> set[uuid.UUID]:
    """Alerts resolved in this batch whose firing event is neither in it nor handled yet:
    another planner holds it (or will take it), so their resolution waits for a later pass."""
    firing = {e["alert_id"] for e in events if e["kind"] == "firing"}
    ids = [e["alert_id"] for e in events if e["kind"] == "resolved"
           and e["alert_id"] not in firing]
    if not ids:
        return set()
    return set(conn.execute(text(
        "SELECT e.alert_id FROM alert_events e WHERE e.alert_id = ANY(:ids) "
        "AND e.kind = 'firing' AND e.created_at > :horizon AND NOT EXISTS "
        "(SELECT 1 FROM alert_event_dispatches d WHERE d.event_id = e.id)"),
        {"ids": ids, "horizon": now - EVENT_HORIZON}).scalars())


def _plan_events(conn: Connection, events: Sequence[Row], now: datetime) -> int:
    rules = load_rules_by_id(conn, (e["rule_id"] for e in events))
    alerts = _alerts(conn, (e["alert_id"] for e in events))
    supp = load_suppressions(conn, (e["org_id"] for e in events), now)
    # Read before `told`: a firing another planner has since marked is then told too.
    held = _held_firings(conn, events, now)
    told = set(conn.execute(text(
        "SELECT alert_id FROM alert_notify_state WHERE alert_id = ANY(:ids)"),
        {"ids": [e["alert_id"] for e in events]}).scalars())
    marks: list[dict[str, Any]] = []
    groups: dict[tuple[uuid.UUID, str], list[Row]] = defaultdict(list)
    # An alert that fired and resolved since the last pass is told once, as resolved (from
    # start to end): two messages racing each other could arrive resolved-first.
    resolving = {e["alert_id"] for e in events if e["kind"] == "resolved"} - held
    # Set aside before the loop: one cycle's events share created_at, so the resolved one
    # may come first.
    absorbed: dict[uuid.UUID, Row] = {e["alert_id"]: e for e in events
                                      if e["kind"] == "firing" and e["alert_id"] in resolving}

    def mark(e: Row, outcome: str, nid: uuid.UUID | None = None,
             by: Any = None) -> None:
        marks.append({"event_id": e["id"], "org_id": e["org_id"], "outcome": outcome,
                      "notification_id": nid, "suppressed_by": by, "now": now})
        if e["kind"] == "resolved" and e["alert_id"] in absorbed:
            mark(absorbed.pop(e["alert_id"]), outcome, nid, by)

    for e in events:
        rule = rules.get(e["rule_id"])
        if e["kind"] == "firing" and e["alert_id"] in resolving:
            continue  # told with its resolution
        if e["kind"] == "resolved" and e["alert_id"] in held:
            continue  # left unmarked: a later pass tells it once its firing is handled
        if rule is None or e["alert_id"] not in alerts:
            mark(e, "not_notified")
            continue
        if e["kind"] == "resolved" and e["alert_id"] not in told and (
                e["alert_id"] not in absorbed):
            # Its firing was never told (silenced, or no channel then): nothing to resolve.
            mark(e, "not_notified")
            continue
        why, by = supp.why(rule, now, e["at"])
        if why:
            mark(e, why, by=by)
            continue
        groups[(rule.id, e["kind"])].append(e)

    made = 0
    for (rule_id, kind), evs in groups.items():
        rule = rules[rule_id]
        channels = _channels_of(conn, rule)
        if not channels:
            for e in evs:
                mark(e, "no_channels")
            continue
        # A resolution is told from its alert's row (the resolved values); anything else
        # from its event's own evidence.
        items = [_item(alerts[e["alert_id"]]) if kind == "resolved"
                 and alerts[e["alert_id"]]["state"] == "resolved"
                 else _item(alerts[e["alert_id"]], e["evidence"] or None) for e in evs]
        alert_ids = [e["alert_id"] for e in evs]
        nid = _notify(conn, rule, kind, channels, alert_ids, [e["id"] for e in evs], items,
                      now)
        made += 1
        for e in evs:
            mark(e, "notified", nid)
        if kind == "firing":
            conn.execute(text(
                "INSERT INTO alert_notify_state (alert_id, org_id, rule_id, last_notified_at) "
                "SELECT a, :org, :rule, :now FROM unnest(CAST(:ids AS uuid[])) AS a "
                "ON CONFLICT (alert_id) DO UPDATE "
                "SET last_notified_at = EXCLUDED.last_notified_at"),
                {"org": rule.org_id, "rule": rule.id, "now": now, "ids": alert_ids})
    for e in absorbed.values():  # its resolution lies beyond this pass's batch
        mark(e, "not_notified")
    _record_outcomes(conn, marks)
    # Resolved alerts need no reminder state: the table holds the firing ones only.
    conn.execute(text("DELETE FROM alert_notify_state WHERE alert_id = ANY(:ids)"),
                 {"ids": list(resolving)})
    return made


def _plan_reminders(conn: Connection, now: datetime) -> int:
    due = conn.execute(text(
        "SELECT s.alert_id, s.rule_id FROM alert_notify_state s "
        "JOIN alerts a ON a.id = s.alert_id JOIN alert_rules r ON r.id = s.rule_id "
        "WHERE a.state = 'firing' AND r.enabled AND r.reminder_interval_s IS NOT NULL "
        "AND s.last_notified_at <= :now - make_interval(secs => r.reminder_interval_s) "
        "FOR UPDATE OF s SKIP LOCKED"), {"now": now}).mappings().all()
    if not due:
        return 0
    rules = load_rules_by_id(conn, (d["rule_id"] for d in due))
    alerts = _alerts(conn, (d["alert_id"] for d in due))
    supp = load_suppressions(conn, (r.org_id for r in rules.values()), now)
    by_rule: dict[uuid.UUID, list[uuid.UUID]] = defaultdict(list)
    for d in due:
        by_rule[d["rule_id"]].append(d["alert_id"])
    made = 0
    for rule_id, alert_ids in by_rule.items():
        rule = rules[rule_id]
        # Silenced or in maintenance: the reminder is skipped, its clock restarts.
        skip = bool(supp.why(rule, now)[0])
        channels = [] if skip else _channels_of(conn, rule)
        if channels:
            items = [_item(alerts[a]) for a in alert_ids]
            _notify(conn, rule, "reminder", channels, alert_ids, [], items, now)
            made += 1
        conn.execute(text(
            "UPDATE alert_notify_state SET last_notified_at = :now, "
            "reminders_sent = reminders_sent + :sent WHERE alert_id = ANY(:ids)"),
            {"now": now, "ids": alert_ids, "sent": 1 if channels else 0})
    return made


def _plan_unsilenced(conn: Connection, now: datetime) -> int:
    """Alerts still firing whose firing event was suppressed, once nothing suppresses them."""
    rows = conn.execute(text(
        "SELECT a.id AS alert_id, a.rule_id, d.event_id FROM alert_event_dispatches d "
        "JOIN alert_events e ON e.id = d.event_id AND e.kind = 'firing' "
        "JOIN alerts a ON a.id = e.alert_id AND a.state = 'firing' "
        # A rule disabled meanwhile says nothing more about its alerts.
        "JOIN alert_rules r ON r.id = a.rule_id AND r.enabled "
        "WHERE d.outcome IN ('silenced', 'maintenance') AND NOT EXISTS "
        "(SELECT 1 FROM alert_notify_state s WHERE s.alert_id = a.id) "
        "FOR UPDATE OF d SKIP LOCKED"), {}).mappings().all()
    if not rows:
        return 0
    rules = load_rules_by_id(conn, (r["rule_id"] for r in rows))
    alerts = _alerts(conn, (r["alert_id"] for r in rows))
    supp = load_suppressions(conn, (r.org_id for r in rules.values()), now)
    by_rule: dict[uuid.UUID, list[Row]] = defaultdict(list)
    for r in rows:
        rule = rules.get(r["rule_id"])
        if rule is not None and not supp.why(rule, now)[0]:
            by_rule[r["rule_id"]].append(r)
    made = 0
    for rule_id, rs in by_rule.items():
        rule = rules[rule_id]
        channels = _channels_of(conn, rule)
        alert_ids = [r["alert_id"] for r in rs]
        if channels:
            items = [_item(alerts[a]) for a in alert_ids]
            nid = _notify(conn, rule, "firing", channels, alert_ids,
                                       [r["event_id"] for r in rs], items, now)
            made += 1
            conn.execute(text(
                "UPDATE alert_event_dispatches SET outcome = 'notified', notification_id = :n "
                "WHERE event_id = ANY(:ev)"), {"n": nid, "ev": [r["event_id"] for r in rs]})
        conn.execute(text(
            "INSERT INTO alert_notify_state (alert_id, org_id, rule_id, last_notified_at) "
            "SELECT a, :org, :rule, :now FROM unnest(CAST(:ids AS uuid[])) AS a "
            "ON CONFLICT (alert_id) DO NOTHING"),
            {"org": rule.org_id, "rule": rule.id, "now": now, "ids": alert_ids})
    return made
