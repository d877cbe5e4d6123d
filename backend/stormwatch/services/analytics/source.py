"""Where an analysis answer comes from: raw samples (exact) for short ranges, otherwise the
rollup level whose rows for the selected series stay within a budget, aligned to the
windows asked for, skipping levels still filling their history and raw samples past the
org's retention; and the recent span after the last rolled minute that a rollup answer
reads raw."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from stormwatch.services.analytics.filters import Filters, KindSpec, QueryError

RES_SECONDS = {"1m": 60, "5m": 300, "1h": 3600, "1d": 86400}
# Rollup levels, finest first.
LEVELS = ("1m", "5m", "1h", "1d")
# Raw answers are exact but cost a row per sample; beyond these ranges rollups answer.
RAW_MAX_FEW_SERIES = timedelta(hours=3)
RAW_MAX_FLEET = timedelta(minutes=15)
FEW_SERIES = 8
# Rollup rows a query may merge when the resolution is chosen automatically.
ROLLUP_ROW_BUDGET = 50_000
# A rollup level may round a range's edges to its steps by at most this share of the range.
EDGE_FRACTION = 0.001
# A rollup answer's samples after its last rolled minute come raw, at most this far back from
# the range's end (a worker down for hours leaves a gap rather than a huge raw read).
RAW_TAIL_MAX = RAW_MAX_FLEET


@dataclass
class Source:
    resolution: Literal["raw", "1m", "5m", "1h", "1d"]
    start: datetime
    end: datetime

    @property
    def bucket_s(self) -> int | None:
        return RES_SECONDS.get(self.resolution)

    def as_dict(self) -> dict[str, Any]:
        return {"resolution": self.resolution, "start": self.start, "end": self.end,
                "exact": self.resolution == "raw"}


def floor_to(t: datetime, s: int) -> datetime:
    ts = math.floor(t.timestamp())
    return datetime.fromtimestamp(ts - ts % s, UTC)


def ceil_to(t: datetime, s: int) -> datetime:
    ts = math.ceil(t.timestamp())
    return datetime.fromtimestamp(ts + (-ts) % s, UTC)


def choose_source(f: Filters, few_series: bool, window_s: int | None = None,
                  n_series: int | None = None, raw_since: datetime | None = None,
                  complete_from: dict[int, datetime] | None = None) -> Source:
    """Raw for short ranges; otherwise the finest rollup level whose row count for the
    selected series stays within ROLLUP_ROW_BUDGET (and no coarser than the window), then
    for windows the coarsest level dividing them. Ranges starting before `raw_since` (the
    raw retention) always come from rollups; a level still filling its history
    (`complete_from`: bucket_s -> first complete bucket) is skipped for ranges that start
    before it is complete."""
    span = f.end - f.start
    res: str = f.resolution
    raw_kept = raw_since is None or f.start >= raw_since
    if res == "auto":
        filling = complete_from or {}
        levels = [lvl for lvl in LEVELS
                  if RES_SECONDS[lvl] not in filling or f.start >= filling[RES_SECONDS[lvl]]]
        raw_max = RAW_MAX_FEW_SERIES if few_series else RAW_MAX_FLEET
        if span <= raw_max and raw_kept:
            res = "raw"
        else:
            series = max(n_series or 1, 1)
            res = levels[-1]
            for cand in levels:
                if series * span.total_seconds() / RES_SECONDS[cand] <= ROLLUP_ROW_BUDGET:
                    res = cand
                    break
            # Sketches merge exactly at any level: a coarser one only moves the range's edges
            # to its steps. Take it while that stays within EDGE_FRACTION of the range (a
            # pair's week: 2016 5-minute rows instead of 10 080 minutes, a fifth of the reads).
            i = levels.index(res)
            while (window_s is None and i + 1 < len(levels)
                   and RES_SECONDS[levels[i + 1]] <= span.total_seconds() * EDGE_FRACTION):
                i += 1
            res = levels[i]
        # Windows narrower than the rollup step would be empty or uneven: step down.
        while window_s is not None and res != "raw" and (
                RES_SECONDS[res] > window_s or window_s % RES_SECONDS[res]):
            i = levels.index(res)
            res = levels[i - 1] if i else "raw"
        # Aligned windows built from a coarser level hold exactly the same samples: use the
        # coarsest level that divides the window (fewer rows for the same answer; a week of
        # 15-minute windows reads 2016 5-minute rows per series instead of 10 080 minutes).
        if window_s is not None and res != "raw":
            for cand in reversed(levels):
                step = RES_SECONDS[cand]
                if RES_SECONDS[res] < step <= window_s and window_s % step == 0:
                    res = cand
                    break
    if res == "raw":
        if f.resolution == "auto" and not raw_kept:
            raise QueryError("window_s", "raw samples before the raw retention are deleted and "
                             "rollups answer: window_s must be a multiple of 60 s")
        return Source("raw", f.start, f.end)
    s = RES_SECONDS[res]
    if window_s is not None and window_s % s:
        raise QueryError("window_s", f"window_s must be a multiple of {s} s at resolution {res}")
    return Source(res, floor_to(f.start, s), ceil_to(f.end, s))  # type: ignore[arg-type]


def raw_tail(source: Source, f: Filters, rolled_until: datetime | None
             ) -> tuple[datetime, datetime] | None:
    """The part of a rollup-resolution answer read from raw samples: from where the org's
    minute rollups in range stop (`rolled_until`, the end of the last minute rolled; None
    when none is) to the requested end, never before the range's start nor more than
    RAW_TAIL_MAX before its end. The minute pass rolls only whole, settled minutes and the
    coarser levels are rolled from them, so the rollups hold the samples before
    `rolled_until` and the raw tail those after: the two never overlap. None when the
    rollups cover the whole range or the answer is raw anyway."""
    if source.resolution == "raw":
        return None
    start = f.start if rolled_until is None else max(rolled_until, f.start)
    start = max(start, f.end - RAW_TAIL_MAX)
    return (start, f.end) if start < f.end else None


def few_series(spec: KindSpec, f: Filters) -> bool:
    if spec.pair:
        return bool(f.src and f.dst and len(f.src) * len(f.dst) <= FEW_SERIES)
    return bool(f.src and len(f.src) <= FEW_SERIES)
