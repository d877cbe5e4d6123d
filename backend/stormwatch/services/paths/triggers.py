"""Traces asked for when a pair's round trips change (docs/paths.md "When traces run"): its
RTT level shifts, or its loss rises. Each pass reads the last WATCH of every active org's mesh
pairs (30 s window medians, the change-point detector of services/analytics/changepoints.py;
loss counts from the raw samples) and asks one trace per new shift or loss episode.

Safe to run twice: a shift is asked about once (a request or a trace of the pair after the
shift's start means it was), and rising loss at most once per LOSS_RETRACE per pair."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.services.analytics.changepoints import level_shifts
from stormwatch.services.analytics.filters import Filters, load_fleet
from stormwatch.services.analytics.levels import load_levels
from stormwatch.services.paths.requests import request_trace

WATCH = timedelta(minutes=30)
WINDOW_S = 30
# A shift is new while its first window is among the last RECENT_WINDOWS: the detector
# confirms a shift once MIN_SIDE (5) windows of the new level are in, so a shift is seen
# 2.5-3 min after it starts and stays new for 6 passes or more (the pass runs every 30 s).
RECENT_WINDOWS = 12
# Steps smaller than both are noise to a person reading a timeline: 100 µs and 1% of the
# pair's level (besides the detector's own noise test). 1%: the demo's 5.7 ms step on a
# 187 ms path is 3% and worth a trace; a 0.3 ms wobble of it is not.
MIN_STEP_US = 100.0
MIN_STEP_FRACTION = 0.01
MIN_CONFIDENCE = 0.99
# Loss rises when the last LOSS_RECENT loses at least LOSS_MIN_RATE (and LOSS_MIN_FAILURES
# probes) and LOSS_RISE times the rate of the WATCH before it.
LOSS_RECENT = timedelta(minutes=3)
LOSS_MIN_RATE = 0.01
LOSS_MIN_FAILURES = 3
LOSS_RISE = 3.0
LOSS_RETRACE = timedelta(minutes=10)
RAW_SPAN = timedelta(minutes=5)
Pair = tuple[uuid.UUID, uuid.UUID]


@dataclass(frozen=True)
class Cause:
    trigger: str  # level_shift | loss
    since: datetime  # the shift's first window, or where the loss episode is judged from
    reason: str


def new_shift(values: NDArray[np.float64], times: NDArray[np.int64],
              recent: int = RECENT_WINDOWS) -> tuple[int, float] | None:
    """The newest confident level shift of these window medians that starts in the last
    `recent` windows, as (window start epoch s, step µs); None when there is none."""
    ok = np.isfinite(values)
    if ok.sum() < 6:
        return None
    level = float(np.median(values[ok]))
    r = level_shifts(values, min_step=max(MIN_STEP_US, MIN_STEP_FRACTION * abs(level)))
    for s in reversed(r["shifts"]):
        if s["index"] >= values.size - recent and s["confidence"] >= MIN_CONFIDENCE:
            return int(times[s["index"]]), float(s["step"])
    return None


def rising_loss(recent: tuple[int, int], before: tuple[int, int]) -> float | None:
    """The recent loss rate when it has risen: (samples, failures) of the recent span and of
    the span before it."""
    n, f = recent
    if n == 0 or f < LOSS_MIN_FAILURES or f / n < LOSS_MIN_RATE:
        return None
    rate = f / n
    bn, bf = before
    return rate if bn == 0 or rate >= LOSS_RISE * (bf / bn) else None


async def active_orgs(session: AsyncSession, now: datetime) -> list[uuid.UUID]:
    """Orgs with an agent heard within WATCH."""
    return [r[0] for r in (await session.execute(text(
        "SELECT DISTINCT org_id FROM agents WHERE last_seen >= :s ORDER BY org_id"),
        {"s": now - WATCH})).all()]


async def causes(session: AsyncSession, org_id: uuid.UUID, now: datetime
                 ) -> dict[tuple[uuid.UUID, uuid.UUID], Cause]:
    """Each pair's reason to trace now, if any (a level shift wins over loss)."""
    end = datetime.fromtimestamp(int(now.timestamp()) // WINDOW_S * WINDOW_S, UTC)
    start = end - WATCH
    out: dict[tuple[uuid.UUID, uuid.UUID], Cause] = {}
    recent_from = now - LOSS_RECENT
    rows = (await session.execute(text(
        "SELECT s.src_agent_id, s.dst_agent_id, "
        "count(*) FILTER (WHERE r.time >= :r), "
        "count(*) FILTER (WHERE r.time >= :r AND r.status <> 0), "
        "count(*) FILTER (WHERE r.time < :r), "
        "count(*) FILTER (WHERE r.time < :r AND r.status <> 0) "
        "FROM mesh_raw r JOIN mesh_series s ON s.id = r.series_id "
        "WHERE r.series_id IN (SELECT id FROM mesh_series WHERE org_id = :o) "
        "AND r.time >= :s AND r.time < :e GROUP BY s.src_agent_id, s.dst_agent_id"),
        {"o": org_id, "s": now - WATCH, "e": now, "r": recent_from})).all()
    for src, dst, n, f, bn, bf in rows:
        rate = rising_loss((int(n), int(f)), (int(bn), int(bf)))
        if rate is not None and src != dst:
            before = f"{bf / bn:.1%}" if bn else "no samples"
            out[(src, dst)] = Cause("loss", now - LOSS_RETRACE,
                                    f"loss rose to {rate:.1%} over the last "
                                    f"{int(LOSS_RECENT.total_seconds() // 60)} min "
                                    f"(before: {before})")
    times, levels = await pair_levels(session, org_id, start, end)
    for (src, dst), values in levels.items():
        if src == dst:
            continue
        got = new_shift(values, times)
        if got is not None:
            at, step = got
            out[(src, dst)] = Cause(
                "level_shift", datetime.fromtimestamp(at, UTC),
                f"RTT level shifted {'up' if step > 0 else 'down'} by {abs(step) / 1000:.2f} ms "
                f"at {datetime.fromtimestamp(at, UTC):%H:%M:%S} UTC")
    return out


async def pair_levels(session: AsyncSession, org_id: uuid.UUID, start: datetime,
                      end: datetime) -> tuple[NDArray[np.int64], dict[Pair, NDArray[np.float64]]]:
    """30 s window medians per pair over [start, end): the half-minute medians of the minute
    rollups up to RAW_SPAN before the end, raw samples after (rollups lag a minute and a
    half; raw for the whole WATCH would sort every sample of the fleet each pass)."""
    fleet = await load_fleet(session, org_id)
    split = end - RAW_SPAN
    times = np.arange(int(start.timestamp()), int(end.timestamp()), WINDOW_S, dtype=np.int64)
    out: dict[Pair, NDArray[np.float64]] = {}
    for f in (Filters(start=start, end=split, resolution="1m"),
              Filters(start=split, end=end, resolution="raw")):
        lv = await load_levels(session, org_id, "mesh", f, WINDOW_S,
                               lambda k: (k[0], k[1]), fleet)
        cols = (lv.times - times[0]) // WINDOW_S
        keep = (cols >= 0) & (cols < times.size)
        for j, pair in enumerate(lv.groups):
            row = out.setdefault(pair, np.full(times.size, np.nan))
            row[cols[keep]] = lv.values[j][keep]
    return times, out


async def already_asked(session: AsyncSession, org_id: uuid.UUID, src: uuid.UUID,
                        dst: uuid.UUID, since: datetime) -> bool:
    """A trace of the pair started, or one was asked for, at or after `since`."""
    return (await session.execute(text(
        "SELECT EXISTS (SELECT FROM path_traces WHERE org_id = :o AND src_agent_id = :s AND "
        "dst_agent_id = :d AND started_at >= :t) OR EXISTS (SELECT FROM path_trace_requests "
        "WHERE org_id = :o AND src_agent_id = :s AND dst_agent_id = :d AND "
        "requested_at >= :t)"), {"o": org_id, "s": src, "d": dst, "t": since})).scalar_one()


async def request_for_changes(session: AsyncSession, now: datetime | None = None,
                              orgs: Sequence[uuid.UUID] | None = None) -> int:
    """Asks a trace of each pair of the orgs (default: every active org) whose RTT level
    shifted or whose loss rose lately, once per shift or loss episode; returns how many
    requests were made. The caller commits."""
    now = now or datetime.now(UTC)
    made = 0
    for org_id in orgs if orgs is not None else await active_orgs(session, now):
        for (src, dst), cause in sorted((await causes(session, org_id, now)).items()):
            if await already_asked(session, org_id, src, dst, cause.since):
                continue
            _, new = await request_trace(session, org_id, src, dst, cause.trigger, cause.reason,
                                         now=now)
            made += new
    return made
