"""Window levels for level shifts and cycles: one level per group and window, the exact
median of raw samples, the minute rows' exact medians (or their half-minute medians for
seed 003's 30 s windows), or the count-weighted median of coarser rows' levels; never a
sketch bin."""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.services.analytics.filters import (
    KIND_SPECS,
    Filters,
    Fleet,
    QueryError,
    load_fleet,
    where_clauses,
)
from stormwatch.services.analytics.group_stats import grouped_weighted_medians
from stormwatch.services.analytics.grouping import GroupFn, group_key
from stormwatch.services.analytics.raw import ADJUSTED_RAW, RAW_ROW_LIMIT, read_raw
from stormwatch.services.analytics.source import (
    RAW_MAX_FEW_SERIES,
    RAW_MAX_FLEET,
    RES_SECONDS,
    Source,
    ceil_to,
    choose_source,
    few_series,
    floor_to,
)

# Seed 003's window: minute rollups keep the medians of their two half-minutes for it.
HALF_MINUTE = 30


@dataclass
class Levels:
    """One level per group and window: exact medians from raw samples, the minute rows'
    exact medians (or half-minute medians for 30 s windows), or the weighted median of
    coarser rows' levels. Never a sketch bin."""

    source: Source
    window_s: int
    times: np.ndarray  # window starts (epoch s), every window of the range
    groups: list[Any]
    values: np.ndarray  # (groups x windows), NaN where a window has no level
    counts: np.ndarray  # values behind each level


async def load_levels(session: AsyncSession, org_id: uuid.UUID, kind: str, f: Filters,
                      window_s: int, group: GroupFn | None = None,
                      fleet: Fleet | None = None) -> Levels:
    """Window levels per group(series key) (default: everything selected as one group) for
    level shifts and cycles (see `Levels`)."""
    f.validate()
    spec = KIND_SPECS[kind]
    group = group or (lambda k: "all")
    await session.execute(text("SET LOCAL plan_cache_mode = force_custom_plan"))
    fleet = fleet or await load_fleet(session, org_id)
    params: dict[str, Any] = {"org": org_id}
    where, n_series = where_clauses(spec, fleet, f, params)
    raw_since = (datetime.now(UTC) - timedelta(days=fleet.raw_retention_days)
                 if fleet.raw_retention_days else None)
    few = few_series(spec, f)
    raw_max = RAW_MAX_FEW_SERIES if few else RAW_MAX_FLEET
    raw_kept = raw_since is None or f.start >= raw_since
    halves = window_s == HALF_MINUTE and (
        f.resolution == "1m"
        or (f.resolution == "auto" and (f.end - f.start > raw_max or not raw_kept)))
    if halves:
        source = Source("1m", floor_to(f.start, 60), ceil_to(f.end, 60))
    else:
        source = choose_source(f, few, window_s, n_series, raw_since, fleet.complete_from(kind))
    params.update(s=source.start, e=source.end)
    adjusted = kind == "storage" and f.adjusted
    prefix = "adj_latency_us" if adjusted else spec.value_prefix
    conds = "".join(f" AND {c}" for c in where)
    keys_sql = ", ".join(spec.keys)
    nk = len(spec.keys)
    index: dict[Any, int] = {}
    cache: dict[tuple[Any, ...], Any] = {}
    parts: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []  # (group, t, v, w)
    if source.resolution == "raw":
        value_sql = ADJUSTED_RAW if adjusted else spec.raw_value
        series = await read_raw(session, kind, value_sql, where, params)
        if sum(one.t.size for one in series) > RAW_ROW_LIMIT:
            raise QueryError("resolution", "more than 5 million raw samples in range: widen "
                             "window_s to a multiple of 60 s or use a rollup resolution")
        for one in series:
            g = group_key(group, one.keys, 0.0, None, cache)
            if g is None:
                continue
            j = index.setdefault(g, len(index))
            parts.append((j, one.t, one.v, np.ones(one.v.size)))
    else:
        # One row per series with its columns packed as big-endian float8 (as the raw path):
        # a fleet's day of minute rows is ~350 000 rows, too many to build as Python tuples.
        def packed(expr: str) -> str:
            return f"string_agg(float8send(coalesce(({expr})::float8, 'NaN')), ''::bytea)"

        value_cols = (f"{packed(f'{prefix}_half_medians[1]')}, "
                      f"{packed(f'{prefix}_half_medians[2]')}" if halves
                      else packed(f"{prefix}_median"))
        rows = (await session.execute(text(
            f"SELECT {keys_sql}, {packed('extract(epoch FROM bucket_start)')}, "
            f"{packed(f'{prefix}_count')}, {value_cols} FROM {spec.table} WHERE org_id = :org "
            f"AND bucket_s = {int(RES_SECONDS[source.resolution])} AND bucket_start >= :s "
            f"AND bucket_start < :e AND {prefix}_median IS NOT NULL{conds} "
            f"GROUP BY {keys_sql}"), params)).all()
        for r in rows:
            g = group_key(group, tuple(r[:nk]), 0.0, None, cache)
            if g is None:
                continue
            j = index.setdefault(g, len(index))
            t0, n, *vs = (np.frombuffer(b, dtype=">f8").astype(np.float64) for b in r[nk:])
            n = np.nan_to_num(n, nan=0.0)
            if halves:
                # Each half carries about half the minute's samples.
                parts.append((j, np.concatenate([t0, t0 + HALF_MINUTE]),
                              np.concatenate(vs), np.concatenate([n, n]) / 2))
            else:
                parts.append((j, t0, vs[0], n))
    start = int(source.start.timestamp()) // window_s * window_s
    end = int(math.ceil(source.end.timestamp() / window_s)) * window_s
    times = np.arange(start, end, window_s, dtype=np.int64)
    n_groups, n_windows = len(index), times.size
    values = np.full((n_groups, n_windows), np.nan)
    counts = np.zeros((n_groups, n_windows))
    if parts and n_windows:
        gj = np.concatenate([np.full(p[1].size, p[0], dtype=np.int64) for p in parts])
        t = np.concatenate([p[1] for p in parts])
        v = np.concatenate([p[2] for p in parts])
        w = np.concatenate([p[3] for p in parts]).astype(np.float64)
        wi = ((t // window_s) * window_s - start).astype(np.int64) // window_s
        keep = (wi >= 0) & (wi < n_windows)
        cell = gj[keep] * n_windows + wi[keep]
        v, w = v[keep], w[keep]
        values = grouped_weighted_medians(v, w, cell, n_groups * n_windows).reshape(
            n_groups, n_windows)
        ok = np.isfinite(v)
        counts = np.bincount(cell[ok], weights=w[ok], minlength=n_groups * n_windows).astype(
            np.float64).reshape(n_groups, n_windows)
    return Levels(source, window_s, times, list(index), values, counts)
