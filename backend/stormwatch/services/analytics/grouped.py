"""Distributions per group (and per window), the answer most analyses start from: the
filters turned into SQL conditions, the source chosen for the range, then exact
distributions from raw samples, or sketched ones merged from a rollup level (from
day-to-date sketches for long hourly ranges) with the samples after the last rolled minute
merged in raw; and many groups' quantiles at once from their shared bins."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.services.analytics.day_to_date import DAY_TO_DATE_MIN_SPAN, load_day_to_date
from stormwatch.services.analytics.filters import (
    KIND_SPECS,
    Filters,
    Fleet,
    QueryError,
    load_fleet,
    where_clauses,
)
from stormwatch.services.analytics.grouping import GroupFn
from stormwatch.services.analytics.raw import (
    ADJUSTED_RAW,
    RAW_ROW_LIMIT,
    group_packed_raw,
    read_raw,
)
from stormwatch.services.analytics.rollup_reads import (
    SharedBins,
    group_packed_rollups,
    packed_rollups_sql,
)
from stormwatch.services.analytics.sketches import Sketch, grouped_quantiles
from stormwatch.services.analytics.source import Source, choose_source, few_series, raw_tail
from stormwatch.services.analytics.stats import Distribution, Moments


@dataclass
class Grouped:
    """Distributions per group key (and per window start when windowed)."""

    source: Source
    groups: dict[Any, Distribution]
    # The merged sketches' (group x key) count matrix, when the loader built one.
    bins: SharedBins | None = None

    def quantiles(self, keys: Sequence[Any], qs: Sequence[float]) -> np.ndarray:
        """Quantiles for many groups at once (groups x qs), NaN where empty. Sketched groups
        share one count matrix, so this is one vectorised pass instead of a loop."""
        out = np.full((len(keys), len(qs)), np.nan)
        dists = [self.groups[k] for k in keys]
        sk = [d.sketch for d in dists]
        b = self.bins
        if dists and b is not None and all(k in b.row_of for k in keys):
            rows = np.fromiter((b.row_of[k] for k in keys), dtype=np.int64, count=len(keys))
            mat = b.matrix[rows] if b.matrix.shape[1] else np.zeros((len(keys), 1))
            out = grouped_quantiles(b.offset, mat, b.zero[rows], qs)
            mins = np.array([d.moments.minimum for d in dists])[:, None]
            maxs = np.array([d.moments.maximum for d in dists])[:, None]
            return np.where(np.isfinite(out), np.clip(out, mins, maxs), np.nan)
        if dists and all(s is not None for s in sk):
            lo = min(s.offset for s in sk)  # type: ignore[union-attr]
            hi = max(s.offset + s.counts.size for s in sk)  # type: ignore[union-attr]
            mat = np.zeros((len(sk), max(hi - lo, 1)))
            zero = np.zeros(len(sk))
            for i, s in enumerate(sk):
                assert s is not None
                if s.counts.size:
                    mat[i, s.offset - lo : s.offset - lo + s.counts.size] = s.counts
                zero[i] = s.zero_count
            out = grouped_quantiles(lo, mat, zero, qs)
            mins = np.array([d.moments.minimum for d in dists])[:, None]
            maxs = np.array([d.moments.maximum for d in dists])[:, None]
            return np.where(np.isfinite(out), np.clip(out, mins, maxs), np.nan)
        for i, d in enumerate(dists):
            out[i] = [np.nan if v is None else v for v in d.quantiles(qs)]
        return out


async def load_grouped(session: AsyncSession, org_id: uuid.UUID, kind: str, f: Filters,
                       group: GroupFn, fleet: Fleet | None = None,
                       window_s: int | None = None) -> Grouped:
    """Distributions per group(series key) — or per (group, window start) with window_s."""
    f.validate()
    spec = KIND_SPECS[kind]
    # Prepared statements switch to a generic plan after a few runs; without the actual
    # series and range, that plan scans every series' rows of the range and filters them
    # (seconds instead of milliseconds for a pair's week). Plan each query for its values.
    await session.execute(text("SET LOCAL plan_cache_mode = force_custom_plan"))
    fleet = fleet or await load_fleet(session, org_id)
    params: dict[str, Any] = {"org": org_id}
    where, n_series = where_clauses(spec, fleet, f, params)
    raw_since = (datetime.now(UTC) - timedelta(days=fleet.raw_retention_days)
                 if fleet.raw_retention_days else None)
    source = choose_source(f, few_series(spec, f), window_s, n_series, raw_since,
                           fleet.complete_from(kind))
    params.update(s=source.start, e=source.end)
    nk = len(spec.keys)
    prefix = spec.value_prefix
    if kind == "storage" and f.adjusted:
        prefix = "adj_latency_us"
    value_sql = ADJUSTED_RAW if (kind == "storage" and f.adjusted) else spec.raw_value
    if source.resolution == "raw":
        series = await read_raw(session, kind, value_sql, where, params)
        if sum(s.t.size for s in series) > RAW_ROW_LIMIT:
            raise QueryError("resolution", "more than 5 million raw samples in range: narrow "
                             "the range or filters, or use a rollup resolution")
        return Grouped(source, group_packed_raw(series, group, window_s))
    # Where the org's minute rollups in range end (the (org, resolution, time) index answers).
    last_minute = (await session.execute(text(
        f"SELECT max(bucket_start) FROM {spec.table} WHERE org_id = :org AND bucket_s = 60 "
        "AND bucket_start >= :s AND bucket_start < :e"), params)).scalar()
    rolled_until = None if last_minute is None else last_minute + timedelta(minutes=1)
    tail: dict[Any, Distribution] = {}
    span = raw_tail(source, f, rolled_until)
    if span is not None:
        tail = group_packed_raw(await read_raw(
            session, kind, value_sql, where, {**params, "s": span[0], "e": span[1]}),
            group, window_s)
    if (source.resolution == "1h" and window_s is None
            and source.end - source.start > DAY_TO_DATE_MIN_SPAN):
        dtd = await load_day_to_date(session, spec, prefix, params, where, group, source)
        if dtd is not None:
            return _with_raw_tail(Grouped(source, *dtd), tail)
    assert source.bucket_s is not None
    rows = (await session.execute(text(packed_rollups_sql(spec, prefix, where, source.bucket_s)),
                                  params)).all()
    return _with_raw_tail(Grouped(source, *group_packed_rollups(rows, nk, group, window_s)),
                          tail)


def _with_raw_tail(grouped: Grouped, tail: dict[Any, Distribution]) -> Grouped:
    """Rollup distributions with the raw tail's samples merged in (as sketches, so every
    group keeps the rollups' 1% guarantee and one representation)."""
    if not tail:
        return grouped
    out = dict(grouped.groups)
    for k, t in tail.items():
        sk = Sketch.from_values(t.values if t.values is not None else [])
        m = Moments()
        m.add(t.moments)
        base = out.get(k)
        if base is not None:
            m.add(base.moments)
            if base.sketch is not None:
                sk = base.sketch.merge(sk)
        out[k] = Distribution.sketched(sk, m)
    return Grouped(grouped.source, out)
