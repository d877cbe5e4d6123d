"""From alert events to sent messages: plan notifications, then work the outbox.

`plan` (one transaction) claims the events nobody handled (FOR UPDATE SKIP LOCKED, and the
event_id primary key of alert_event_dispatches), drops the silenced and those in maintenance,
groups the rest per rule and kind into one notification with one outbox row per channel,
adds reminders for alerts still firing past their rule's interval, and late firing messages
for alerts whose silence ended while they still fire. `deliver_due` claims outbox rows by
compare-and-set (pending -> sending with a claim token and a lease; a lease past expiry is a
worker that died and is claimed again), sends, and marks sent under the same token right
after the send. Delivery is at-least-once per outbox row; see docs/alerts.md for what each
channel makes of a resend.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from sqlalchemy import Connection, Engine, text

from stormwatch.core.config import get_settings
from stormwatch.notifications.base import (
    AlertItem,
    DeliveryError,
    Message,
    PermanentError,
    TransientError,
)
from stormwatch.notifications.render import condition_text
from stormwatch.services.alerts.definition import Rule, load_rules_by_id
from stormwatch.services.alerts.evidence import Evidence
from stormwatch.services.notify import matching
from stormwatch.services.notify.channels import build_channel

log = logging.getLogger("stormwatch.notify")

Row = Mapping[Any, Any]  # a result row's mapping or a plain dict

# Events older than this are history, not news: a worker back after a day does not page.
EVENT_HORIZON = timedelta(hours=24)
MAX_EVENTS_PER_PASS = 2000


@dataclass
class Suppressions:
    silences: list[Row]
    windows: list[Row]

    def why(self, rule: Rule, now: datetime, at: datetime | None = None) -> tuple[str, Any]:
        """('silenced', id) for a silence active now, ('maintenance', id) for a window
        covering now or the data time `at`, else ('', None)."""
        labels = matching.rule_labels(rule.id, rule.name, rule.severity, rule.labels)
        for s in self.silences:
            if (s["org_id"] == rule.org_id and s["starts_at"] <= now < s["ends_at"]
                    and matching.scope_matches(s["rule_ids"], s["matchers"], rule.id, labels)):
                return "silenced", s["id"]
        for w in self.windows:
            if w["org_id"] != rule.org_id or not matching.scope_matches(
                    w["rule_ids"], w["matchers"], rule.id, labels):
                continue
            for t in (now, at) if at is not None else (now,):
                if matching.window_active(w["starts_at"], w["duration_s"], w["rrule"],
                                          w["timezone"], t):
                    return "maintenance", w["id"]
        return "", None


def load_suppressions(conn: Connection, org_ids: Iterable[uuid.UUID],
                      now: datetime) -> Suppressions:
    orgs = list(set(org_ids))
    silences = conn.execute(text(
        "SELECT id, org_id, rule_ids, matchers, starts_at, ends_at FROM silences "
        "WHERE org_id = ANY(:orgs) AND starts_at <= :now AND ends_at > :now"),
        {"orgs": orgs, "now": now}).mappings().all()
    windows = conn.execute(text(
        "SELECT id, org_id, rule_ids, matchers, starts_at, duration_s, rrule, timezone "
        "FROM maintenance_windows WHERE org_id = ANY(:orgs) AND starts_at <= :now "
        "AND (rrule IS NOT NULL OR starts_at + make_interval(secs => duration_s) "
        "    > :now - interval '2 days')"),
        {"orgs": orgs, "now": now}).mappings().all()
    return Suppressions(list(silences), list(windows))


def link(path: Any) -> str | None:
    if not isinstance(path, str) or not path:
        return None
    return get_settings().public_base_url.rstrip("/") + "/" + path.lstrip("/")


def alert_item(alert: Row, evidence: Mapping[str, Any] | None = None) -> AlertItem:
    """One alert of a message, from the evidence of its event (or, without one, of its row)."""
    ev = Evidence.read(evidence if evidence is not None else alert["evidence"])
    return AlertItem(
        alert_id=str(alert["id"]), series=ev.title or str(alert["group_key"]),
        state="resolved" if alert["state"] == "resolved" else "firing",
        started_at=alert["started_at"], resolved_at=alert["resolved_at"], value=ev.value,
        threshold=ev.threshold, baseline=ev.baseline, unit=ev.unit,
        link=link(ev.dashboard_path))


def message_json(rule: Rule, kind: str, items: Sequence[AlertItem],
                 now: datetime) -> dict[str, Any]:
    single_link = items[0].link if len(items) == 1 else None
    return {
        "kind": kind, "org_id": str(rule.org_id), "rule_id": str(rule.id),
        "rule_name": rule.name, "severity": rule.severity, "description": rule.description,
        "condition": condition_text(rule.condition, rule.statistic, rule.metric,
                                    rule.window_s, rule.unit),
        "labels": rule.labels, "created_at": now.isoformat(),
        "link": single_link or link(f"/alerts?rule_id={rule.id}"),
        "alerts": [{
            "alert_id": i.alert_id, "series": i.series, "state": i.state,
            "started_at": i.started_at.isoformat(),
            "resolved_at": i.resolved_at.isoformat() if i.resolved_at else None,
            "value": i.value, "threshold": i.threshold, "baseline": i.baseline,
            "unit": i.unit, "link": i.link} for i in items],
    }


def message_from_json(m: Row) -> Message:
    def ts(v: str | None) -> datetime | None:
        return datetime.fromisoformat(v) if v else None

    return Message(
        kind=m["kind"], org_id=m["org_id"], rule_id=m["rule_id"], rule_name=m["rule_name"],
        severity=m["severity"], description=m["description"], condition=m["condition"],
        labels=dict(m.get("labels") or {}), link=m.get("link"),
        created_at=datetime.fromisoformat(m["created_at"]),
        alerts=tuple(AlertItem(
            alert_id=a["alert_id"], series=a["series"], state=a["state"],
            started_at=datetime.fromisoformat(a["started_at"]),
            resolved_at=ts(a.get("resolved_at")), value=a.get("value"),
            threshold=a.get("threshold"), baseline=a.get("baseline"), unit=a.get("unit", ""),
            link=a.get("link")) for a in m["alerts"]))


def _channels_of(conn: Connection, rule: Rule) -> list[uuid.UUID]:
    if not rule.channel_ids:
        return []
    return list(conn.execute(text(
        "SELECT id FROM notification_channels WHERE org_id = :org AND id = ANY(:ids) "
        "AND enabled"), {"org": rule.org_id, "ids": rule.channel_ids}).scalars())


def _create_notification(conn: Connection, rule: Rule, kind: str, channels: list[uuid.UUID],
                         alert_ids: list[uuid.UUID], event_ids: list[uuid.UUID],
                         items: Sequence[AlertItem], now: datetime) -> uuid.UUID:
    nid = uuid.uuid4()
    conn.execute(text(
        "INSERT INTO notifications (id, org_id, rule_id, kind, alert_ids, event_ids, message, "
        "created_at) VALUES (:id, :org, :rule, :kind, :alerts, :events, "
        "CAST(:msg AS jsonb), :now)"),
        {"id": nid, "org": rule.org_id, "rule": rule.id, "kind": kind, "alerts": alert_ids,
         "events": event_ids, "msg": orjson.dumps(message_json(rule, kind, items, now)).decode(),
         "now": now})
    conn.execute(text(
        "INSERT INTO notification_deliveries (id, org_id, notification_id, channel_id, state, "
        "attempts, next_attempt_at, created_at) "
        "SELECT gen_random_uuid(), :org, :nid, c, 'pending', 0, :now, :now "
        "FROM unnest(CAST(:channels AS uuid[])) AS c ON CONFLICT DO NOTHING"),
        {"org": rule.org_id, "nid": nid, "channels": channels, "now": now})
    return nid


def _mark_events(conn: Connection, rows: list[dict[str, Any]]) -> None:
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
        items = [alert_item(alerts[e["alert_id"]], e["evidence"] or None)
                 for e in evs]
        if kind == "resolved":
            items = [alert_item(alerts[e["alert_id"]]) if alerts[e["alert_id"]]["state"]
                     == "resolved" else i for e, i in zip(evs, items, strict=True)]
        alert_ids = [e["alert_id"] for e in evs]
        nid = _create_notification(conn, rule, kind, channels, alert_ids,
                                   [e["id"] for e in evs], items, now)
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
    _mark_events(conn, marks)
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
            items = [alert_item(alerts[a]) for a in alert_ids]
            _create_notification(conn, rule, "reminder", channels, alert_ids, [], items, now)
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
            items = [alert_item(alerts[a]) for a in alert_ids]
            nid = _create_notification(conn, rule, "firing", channels, alert_ids,
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


# --- the outbox -------------------------------------------------------------------------


@dataclass
class Claimed:
    id: uuid.UUID
    token: uuid.UUID
    attempts: int
    kind: str
    config: dict[str, Any]
    secret: str | None
    enabled: bool
    message: dict[str, Any]


def backoff_s(attempts: int) -> float:
    s = get_settings()
    return float(min(s.notify_retry_max_s, s.notify_retry_base_s * 2 ** (attempts - 1)))


def claim(engine: Engine, limit: int) -> list[Claimed]:
    """Compare-and-set pending (or lease-expired sending) rows to sending under a new token."""
    s = get_settings()
    token = uuid.uuid4()
    with engine.begin() as conn:
        # Rows that died in their last allowed attempt end here rather than looping forever.
        conn.execute(text(
            "UPDATE notification_deliveries SET state = 'failed', claim_token = NULL, "
            "last_error = coalesce(last_error || '; ', '') || 'worker lost during the last "
            "attempt' WHERE state = 'sending' AND lease_expires_at < now() "
            "AND attempts >= :max"), {"max": s.notify_max_attempts})
        rows = conn.execute(text(
            "UPDATE notification_deliveries d SET state = 'sending', claim_token = :tok, "
            "attempts = d.attempts + 1, "
            "lease_expires_at = now() + make_interval(secs => :lease) "
            "FROM notifications n, notification_channels c "
            "WHERE d.id IN (SELECT id FROM notification_deliveries WHERE "
            "  (state = 'pending' AND next_attempt_at <= now()) OR "
            "  (state = 'sending' AND lease_expires_at < now()) "
            "  ORDER BY next_attempt_at LIMIT :lim FOR UPDATE SKIP LOCKED) "
            "AND n.id = d.notification_id AND c.id = d.channel_id "
            "RETURNING d.id, d.attempts, c.kind, c.config, c.secret_ciphertext, c.enabled, "
            "n.message"), {"tok": token, "lease": s.notify_lease_s, "lim": limit}
        ).mappings().all()
    return [Claimed(id=r["id"], token=token, attempts=r["attempts"], kind=r["kind"],
                    config=r["config"], secret=r["secret_ciphertext"], enabled=r["enabled"],
                    message=r["message"]) for r in rows]


def _finish(engine: Engine, c: Claimed, state: str, response: str | None,
            error: str | None, retry_in_s: float | None = None) -> bool:
    """Marks the outcome only if this claim still holds the row (compare-and-set)."""
    with engine.begin() as conn:
        return conn.execute(text(
            "UPDATE notification_deliveries SET state = CAST(:state AS varchar), "
            "claim_token = NULL, "
            "lease_expires_at = NULL, response = coalesce(:resp, response), last_error = :err, "
            "sent_at = CASE WHEN CAST(:state AS varchar) = 'sent' THEN now() ELSE sent_at END, "
            "next_attempt_at = CASE WHEN CAST(:retry AS float8) IS NULL THEN next_attempt_at "
            "  ELSE now() + make_interval(secs => CAST(:retry AS float8)) END "
            "WHERE id = :id AND claim_token = :tok"),
            {"state": state, "resp": response, "err": error, "retry": retry_in_s, "id": c.id,
             "tok": c.token}).rowcount == 1


async def _deliver_one(engine: Engine, c: Claimed) -> str:
    max_attempts = get_settings().notify_max_attempts
    if not c.enabled:
        await asyncio.to_thread(_finish, engine, c, "failed", None, "channel disabled")
        return "failed"
    try:
        try:
            channel = build_channel(c.kind, c.config, c.secret)
        except (ValueError, KeyError) as exc:  # e.g. SECRET_KEY changed since it was stored
            raise PermanentError(f"channel unusable: {exc}") from exc
        reply = await channel.send(message_from_json(c.message), f"msg_{c.id.hex}")
    except PermanentError as exc:
        log.warning("delivery %s to a %s channel failed permanently: %s", c.id, c.kind,
                    exc.detail)
        await asyncio.to_thread(_finish, engine, c, "failed", None, exc.detail)
        return "failed"
    except (TransientError, DeliveryError, Exception) as exc:
        detail = exc.detail if isinstance(exc, DeliveryError) else f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, DeliveryError):
            log.exception("delivery %s: unexpected error", c.id)
        if c.attempts >= max_attempts:
            log.warning("delivery %s to a %s channel gave up after %d attempts: %s", c.id,
                        c.kind, c.attempts, detail)
            await asyncio.to_thread(_finish, engine, c, "failed", None, detail)
            return "failed"
        wait = backoff_s(c.attempts)
        log.info("delivery %s attempt %d failed (%s); retry in %.0f s", c.id, c.attempts,
                 detail, wait)
        await asyncio.to_thread(_finish, engine, c, "pending", None, detail, wait)
        return "retry"
    # Marked right after the send: a crash between the two is the only duplicate window.
    await asyncio.to_thread(_finish, engine, c, "sent", reply, None)
    return "sent"


def deliver_due(engine: Engine, batch: int = 20, budget_s: float = 50.0) -> dict[str, int]:
    """Sends due outbox rows, `batch` at a time concurrently, until none is due or the time
    budget is spent. Returns counts by outcome."""
    counts: dict[str, int] = defaultdict(int)
    deadline = datetime.now(UTC) + timedelta(seconds=budget_s)
    while datetime.now(UTC) < deadline:
        claimed = claim(engine, batch)
        if not claimed:
            break

        async def run(cs: list[Claimed] = claimed) -> list[str]:
            return list(await asyncio.gather(*(_deliver_one(engine, c) for c in cs)))

        for outcome in asyncio.run(run()):
            counts[outcome] += 1
    return dict(counts)


def next_due_in_s(engine: Engine) -> float | None:
    """Seconds until the soonest pending or leased row is due, None if there is none."""
    with engine.connect() as conn:
        v = conn.execute(text(
            "SELECT extract(epoch FROM min(CASE WHEN state = 'pending' THEN next_attempt_at "
            "ELSE lease_expires_at END) - now()) FROM notification_deliveries "
            "WHERE state IN ('pending', 'sending')")).scalar()
    return None if v is None else max(0.0, float(v))
