"""Baselines: the rule's statistic over the 24 hours before the window's hour, or over the
same hour one week earlier, merged from hourly rollup sketches (never averaged percentiles).
One function for both drivers; per-hour answers are cached, as they only change hourly."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import numpy as np
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.services.alerts.metrics import MetricKind
from stormwatch.services.alerts.scope import SeriesKey
from stormwatch.services.alerts.values import hourly_distributions, merged_value
from stormwatch.services.analytics.filters import Filters, Fleet
from stormwatch.services.analytics.stats import Distribution

HOUR = 3600
WEEK = 7 * 86400


def baseline_hours(mode: str, hour: int) -> tuple[int, int]:
    """[from, to) in epoch seconds of the baseline of the windows in `hour`."""
    if mode == "week_ago":
        return hour - WEEK, hour - WEEK + HOUR
    return hour - 24 * HOUR, hour


async def baselines(session: AsyncSession, org_id: uuid.UUID, metric: MetricKind, f: Filters,
                    fleet: Fleet, statistic: str, mode: str, starts: Sequence[int]
                    ) -> dict[SeriesKey, np.ndarray]:
    """Baseline per series and window start (NaN where the baseline has no data)."""
    hours = sorted({w // HOUR * HOUR for w in starts})
    if not hours:
        return {}
    spans = [baseline_hours(mode, h) for h in hours]
    lo, hi = min(s for s, _ in spans), max(e for _, e in spans)
    from stormwatch.services.alerts.values import from_epoch
    q = Filters(**{**f.__dict__, "start": from_epoch(lo), "end": from_epoch(hi),
                   "resolution": "auto"})
    dists = await hourly_distributions(session, org_id, metric, q, fleet)
    out: dict[SeriesKey, np.ndarray] = {}
    hour_index = {h: i for i, h in enumerate(hours)}
    w_hour = np.asarray([hour_index[w // HOUR * HOUR] for w in starts], dtype=np.int64)
    for key, by_hour in dists.items():
        per_hour = np.full(len(hours), np.nan)
        for i, (s, e) in enumerate(spans):
            part: list[Distribution] = [d for t, d in by_hour.items() if s <= t < e]
            v = merged_value(part, statistic)
            per_hour[i] = np.nan if v is None else v
        out[key] = per_hour[w_hour]
    return out
