"""Rollup tasks. Every task rebuilds whole buckets from their sources and upserts them,
so running one twice, or two at once (an advisory lock serialises each kind), is safe."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from stormwatch.core.config import get_settings
from stormwatch.core.db import get_sync_engine
from stormwatch.services import audit, rollups
from stormwatch.worker.app import celery_app


@celery_app.task(name="stormwatch.roll_up_recent_samples")
def roll_up_recent_samples() -> dict[str, dict[str, int]]:
    """For every kind: claim, then new minutes (a bounded span, oldest first), marked late
    minutes, then changed 5-minute buckets, hours and days (and a bounded span of a new
    level's history, see `fill_level_history`)."""
    return {kind: rollups.run_minute_pass(get_sync_engine(), kind) for kind in rollups.KINDS}


@celery_app.task(name="stormwatch.roll_up_window")
def roll_up_window(kind: str, start: str, end: str, org_id: str | None = None) -> dict[str, int]:
    """Recompute [start, end) (ISO 8601) at every level: backfills and repairs."""
    s, e = datetime.fromisoformat(start), datetime.fromisoformat(end)
    if s.tzinfo is None or e.tzinfo is None:
        raise ValueError("start and end must carry a UTC offset")
    org = uuid.UUID(org_id) if org_id else None
    out = {"minutes": 0, "five_minutes": 0, "hours": 0, "days": 0}
    step = timedelta(hours=1)
    t = rollups.floor_time(s, 60)
    while t < e:
        # One transaction per hour keeps locks and memory bounded on long backfills.
        with get_sync_engine().begin() as conn:
            out["minutes"] += rollups.roll_up_minutes(conn, kind, t, min(t + step, e), org)
        t += step
    with get_sync_engine().begin() as conn:
        since = datetime.now(UTC) - timedelta(days=1)
        for bucket_s, name in ((300, "five_minutes"), (3600, "hours"), (86400, "days")):
            buckets, _ = rollups.stale_coarse_buckets(conn, kind, bucket_s,
                                                       min(since, s - timedelta(days=1)))
            lo, hi = rollups.floor_time(s, bucket_s), e
            buckets = [(o, b) for o, b in buckets if lo <= b < hi and (org is None or o == org)]
            out[name] += rollups.roll_up_coarse(conn, kind, bucket_s, buckets)
    return out


@celery_app.task(name="stormwatch.sweep_late_samples")
def sweep_late_samples(lookback_hours: float = 3.0) -> dict[str, int]:
    """Find rolled minutes whose raw counts changed (late samples nobody marked)."""
    out = {}
    for kind in rollups.KINDS:
        with get_sync_engine().begin() as conn:
            out[kind] = rollups.sweep_late_minutes(conn, kind, timedelta(hours=lookback_hours))
    return out


@celery_app.task(name="stormwatch.apply_rollup_retention")
def apply_rollup_retention() -> dict[str, int]:
    """Rollups past each org's retention, and audit entries past AUDIT_RETENTION_DAYS."""
    with get_sync_engine().begin() as conn:
        removed = rollups.apply_rollup_retention(conn)
        removed["audit_events"] = audit.prune(conn, get_settings().audit_retention_days)
        return removed
