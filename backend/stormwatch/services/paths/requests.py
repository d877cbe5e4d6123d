"""Traces the server asks for (docs/paths.md): an alert on a mesh pair fires, its RTT level
shifts or its loss rises (triggers.py), or a person asks. A request waits in
path_trace_requests until the tracing agent's config poll hands it over and the trace comes
back naming it; one is pending per pair at a time (asking again while one waits is the same
ask), and one unserved for REQUEST_TTL lapses (its served_at set with no trace), so an agent
that is gone does not block the pair for good."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

REQUEST_TTL = timedelta(minutes=10)
# Firing alerts of the last LOOKBACK are turned into requests by each pass: wider than the
# pass's cadence, so a pass that was late or failed is made up by the next (idempotent by
# the event's id).
LOOKBACK = timedelta(minutes=10)
MAX_PAIRS_PER_EVENT = 20


async def request_trace(session: AsyncSession, org_id: uuid.UUID, src: uuid.UUID,
                        dst: uuid.UUID, trigger: str, reason: str,
                        alert_event_id: uuid.UUID | None = None,
                        now: datetime | None = None) -> tuple[uuid.UUID, bool]:
    """The pending request of the pair, made now if there was none (and whether it was). An
    alert's ask that finds one waiting is noted on it, so the alert asks no second trace."""
    now = now or datetime.now(UTC)
    pair = {"o": org_id, "s": src, "d": dst}
    # A request past its time lapses before a new one may wait in its place.
    await session.execute(text(
        "UPDATE path_trace_requests SET served_at = :now WHERE org_id = :o AND "
        "src_agent_id = :s AND dst_agent_id = :d AND served_at IS NULL AND expires_at <= :now"),
        {**pair, "now": now})
    made = (await session.execute(text(
        "INSERT INTO path_trace_requests (id, org_id, src_agent_id, dst_agent_id, trigger, "
        "reason, alert_event_id, requested_at, expires_at) VALUES (:id, :o, :s, :d, :t, :r, "
        ":e, :now, :exp) ON CONFLICT (org_id, src_agent_id, dst_agent_id) "
        "WHERE served_at IS NULL DO NOTHING RETURNING id"),
        {**pair, "id": uuid.uuid4(), "t": trigger, "r": reason[:500], "e": alert_event_id,
         "now": now, "exp": now + REQUEST_TTL})).scalar()
    if made is not None:
        return uuid.UUID(str(made)), True
    waiting = uuid.UUID(str((await session.execute(text(
        "SELECT id FROM path_trace_requests WHERE org_id = :o AND src_agent_id = :s AND "
        "dst_agent_id = :d AND served_at IS NULL"), pair)).scalar_one()))
    if alert_event_id is not None:
        await session.execute(text(
            "UPDATE path_trace_requests SET alert_event_id = :e WHERE id = :id "
            "AND alert_event_id IS NULL"), {"e": alert_event_id, "id": waiting})
    return waiting, False


async def pending_for(session: AsyncSession, agent_id: uuid.UUID,
                      now: datetime | None = None) -> list[dict[str, Any]]:
    """What the agent's config hands over: its pending requests, oldest first."""
    rows = (await session.execute(text(
        "SELECT id, dst_agent_id, trigger FROM path_trace_requests WHERE src_agent_id = :a "
        "AND served_at IS NULL AND expires_at > :now ORDER BY requested_at, id"),
        {"a": agent_id, "now": now or datetime.now(UTC)})).all()
    return [{"id": str(r.id), "peer": str(r.dst_agent_id), "trigger": r.trigger} for r in rows]


async def serve(session: AsyncSession, org_id: uuid.UUID, agent_id: uuid.UUID,
                request_id: uuid.UUID, trace_id: uuid.UUID) -> bool:
    """Marks the agent's request served by a trace (once: a second trace naming it changes
    nothing)."""
    done = (await session.execute(text(
        "UPDATE path_trace_requests SET served_at = now(), trace_id = :t WHERE id = :id AND "
        "org_id = :o AND src_agent_id = :a AND served_at IS NULL RETURNING id"),
        {"id": request_id, "o": org_id, "a": agent_id, "t": trace_id})).scalar()
    return done is not None


async def request_for_firing_alerts(session: AsyncSession, until: datetime) -> int:
    """Asks a trace of every mesh pair whose alert fired in the LOOKBACK before `until` (the
    pairs named in its evidence); safe to run twice: an event asks at most once per pair."""
    rows = (await session.execute(text(
        "SELECT e.id, e.org_id, e.evidence, r.name FROM alert_events e "
        "JOIN alert_rules r ON r.id = e.rule_id WHERE e.kind = 'firing' "
        "AND r.metric IN ('mesh_rtt', 'mesh_stretch') AND e.created_at > :since "
        "AND e.created_at <= :until ORDER BY e.created_at, e.id"),
        {"since": until - LOOKBACK, "until": until})).all()
    asked = {tuple(r) for r in (await session.execute(text(
        "SELECT alert_event_id, src_agent_id, dst_agent_id FROM path_trace_requests "
        "WHERE alert_event_id = ANY(:ids)"), {"ids": [r[0] for r in rows]})).all()} \
        if rows else set()
    made = 0
    for event_id, org_id, evidence, rule_name in rows:
        pairs: list[tuple[uuid.UUID, uuid.UUID]] = []
        for s in (evidence or {}).get("series") or []:
            try:
                pair = (uuid.UUID(s["src"]["id"]), uuid.UUID(s["dst"]["id"]))
            except (KeyError, TypeError, ValueError):
                continue
            if pair[0] != pair[1] and pair not in pairs:
                pairs.append(pair)
        for src, dst in pairs[:MAX_PAIRS_PER_EVENT]:
            if (event_id, src, dst) in asked:
                continue
            _, new = await request_trace(session, org_id, src, dst, "alert",
                                         f"alert {rule_name!r} fired", alert_event_id=event_id)
            made += new
    return made
