"""The outbox: one row per (notification, channel), worked at least once each.

`enqueue` writes a notification and its rows in the planner's transaction. `deliver_due`
claims due rows by compare-and-set (pending -> sending with a claim token and a lease; a
lease past expiry is a worker that died and is claimed again), then each row goes through
the last stages: send (the channel from the registry, the message as stored) and record
(the outcome marked under the same token right after the send: sent, a retry with backoff,
or failed). See docs/alerts.md for what each channel makes of a resend."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from sqlalchemy import Connection, Engine, text

from stormwatch.core.config import get_settings
from stormwatch.notifications.base import (
    DeliveryError,
    Message,
    PermanentError,
    TransientError,
)
from stormwatch.services.notify.channels import build_channel

log = logging.getLogger("stormwatch.notify")


def enqueue(conn: Connection, message: Message, channels: list[uuid.UUID],
            alert_ids: list[uuid.UUID], event_ids: list[uuid.UUID], now: datetime) -> uuid.UUID:
    """A notification and one pending row per channel, in the caller's transaction."""
    nid, org = uuid.uuid4(), uuid.UUID(message.org_id)
    conn.execute(text(
        "INSERT INTO notifications (id, org_id, rule_id, kind, alert_ids, event_ids, message, "
        "created_at) VALUES (:id, :org, :rule, :kind, :alerts, :events, "
        "CAST(:msg AS jsonb), :now)"),
        {"id": nid, "org": org, "rule": message.rule_id and uuid.UUID(message.rule_id),
         "kind": message.kind,
         "alerts": alert_ids, "events": event_ids,
         "msg": orjson.dumps(message.to_json()).decode(), "now": now})
    conn.execute(text(
        "INSERT INTO notification_deliveries (id, org_id, notification_id, channel_id, state, "
        "attempts, next_attempt_at, created_at) "
        "SELECT gen_random_uuid(), :org, :nid, c, 'pending', 0, :now, :now "
        "FROM unnest(CAST(:channels AS uuid[])) AS c ON CONFLICT DO NOTHING"),
        {"org": org, "nid": nid, "channels": channels, "now": now})
    return nid


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


def _record(engine: Engine, c: Claimed, state: str, response: str | None,
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


async def _send(engine: Engine, c: Claimed) -> str:
    max_attempts = get_settings().notify_max_attempts
    if not c.enabled:
        await asyncio.to_thread(_record, engine, c, "failed", None, "channel disabled")
        return "failed"
    try:
        try:
            channel = build_channel(c.kind, c.config, c.secret)
        except (ValueError, KeyError) as exc:  # e.g. SECRET_KEY changed since it was stored
            raise PermanentError(f"channel unusable: {exc}") from exc
        reply = await channel.send(Message.from_json(c.message), f"msg_{c.id.hex}")
    except PermanentError as exc:
        log.warning("delivery %s to a %s channel failed permanently: %s", c.id, c.kind,
                    exc.detail)
        await asyncio.to_thread(_record, engine, c, "failed", None, exc.detail)
        return "failed"
    except (TransientError, DeliveryError, Exception) as exc:
        detail = exc.detail if isinstance(exc, DeliveryError) else f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, DeliveryError):
            log.exception("delivery %s: unexpected error", c.id)
        if c.attempts >= max_attempts:
            log.warning("delivery %s to a %s channel gave up after %d attempts: %s", c.id,
                        c.kind, c.attempts, detail)
            await asyncio.to_thread(_record, engine, c, "failed", None, detail)
            return "failed"
        wait = backoff_s(c.attempts)
        if isinstance(exc, TransientError) and exc.retry_after_s is not None:
            # The server said when: not sooner (a 429 retried early is refused again).
            wait = max(wait, min(exc.retry_after_s, get_settings().notify_retry_max_s))
        log.info("delivery %s attempt %d failed (%s); retry in %.0f s", c.id, c.attempts,
                 detail, wait)
        await asyncio.to_thread(_record, engine, c, "pending", None, detail, wait)
        return "retry"
    # Marked right after the send: a crash between the two is the only duplicate window.
    await asyncio.to_thread(_record, engine, c, "sent", reply, None)
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
            return list(await asyncio.gather(*(_send(engine, c) for c in cs)))

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
