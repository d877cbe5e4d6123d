"""Queries behind the analysis API: they pick raw samples or a rollup level for the range,
filter by the caller's org and the agents' metadata, and return exact or sketched
distributions per group (and per window). No FastAPI here."""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
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
    KindSpec,
    QueryError,
    load_fleet,
    where_clauses,
)
from stormwatch.services.analytics.group_stats import (
    grouped_weighted_medians,
)
from stormwatch.services.analytics.grouping import GroupFn, group_key
from stormwatch.services.analytics.raw import (
    ADJUSTED_RAW,
    RAW_ROW_LIMIT,
    group_packed_raw,
    read_raw,
)
from stormwatch.services.analytics.rollup_reads import (
    SharedBins,
    group_packed_rollups,
    packed_column,
    packed_rollups_sql,
)
from stormwatch.services.analytics.sketches import (
    GroupedBins,
    Sketch,
    decode_many,
    grouped_quantiles,
)
from stormwatch.services.analytics.source import (
    RAW_MAX_FEW_SERIES,
    RAW_MAX_FLEET,
    RES_SECONDS,
    Source,
    ceil_to,
    choose_source,
    few_series,
    floor_to,
    raw_tail,
)
from stormwatch.services.analytics.stats import Distribution, Moments

# Beyond this span, hourly answers merge day-to-date sketches rather than every hour's.
DAY_TO_DATE_MIN_SPAN = timedelta(hours=4)


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
        dtd = await _load_day_to_date(session, spec, prefix, params, where, group, source)
        if dtd is not None:
            return _with_raw_tail(Grouped(source, *dtd), tail)
    assert source.bucket_s is not None
    rows = (await session.execute(text(packed_rollups_sql(spec, prefix, where, source.bucket_s)),
                                  params)).all()
    return _with_raw_tail(Grouped(source, *group_packed_rollups(rows, nk, group, window_s)),
                          tail)


async def _load_day_to_date(session: AsyncSession, spec: KindSpec, prefix: str,
                            params: dict[str, Any], where: list[str], group: GroupFn,
                            source: Source
                            ) -> tuple[dict[Any, Distribution], SharedBins | None] | None:
    """Hourly answer from day-to-date sketches: per series and UTC day, the day-to-date
    sketch of its last hour in range, minus (on a partial first day) that of its last hour
    before the range. Moments are summed from the hourly rows in SQL, with each series'
    first and last hour in range; the sketches are then fetched by exact (series, hour)
    keys: the last hour for the last day, 23:00 for the days before, the hour before the
    range for the minus. Only series with gaps at those hours need a second look-up.
    None when a needed sketch is missing."""
    keys_sql = ", ".join(spec.keys)
    nk = len(spec.keys)
    cond = "".join(f" AND {c}" for c in where)
    base = f"FROM {spec.table} WHERE org_id = :org AND bucket_s = 3600{cond}"
    moments = (await session.execute(text(
        f"SELECT {keys_sql}, sum(sample_count), sum(failure_count), sum({prefix}_count), "
        f"min({prefix}_min), max({prefix}_max), sum({prefix}_sum), sum({prefix}_sum_sq), "
        f"min(bucket_start), max(bucket_start) {base} AND bucket_start >= :s "
        f"AND bucket_start < :e GROUP BY {keys_sql}"), params)).all()
    index: dict[Any, int] = {}
    cache: dict[tuple[Any, ...], Any] = {}
    acc: dict[int, list[Any]] = {}
    wanted: list[tuple[tuple[Any, ...], datetime]] = []
    sign: list[float] = []
    wanted_group: list[int] = []
    wanted_day: list[datetime | None] = []
    series_group: dict[tuple[Any, ...], int] = {}
    day0 = floor_to(source.start, 86400)
    day = timedelta(days=1)
    last_hour = timedelta(hours=23)
    for r in moments:
        key = tuple(r[:nk])
        g = group_key(group, key, 0.0, None, cache)
        if g is None:
            continue
        j = index.get(g)
        if j is None:
            j = index[g] = len(index)
            acc[j] = [0.0, 0.0, 0.0, math.inf, -math.inf, 0.0, 0.0]
        a = acc[j]
        for i in (0, 1, 2, 5, 6):
            a[i] += float(r[nk + i] or 0)
        if r[nk + 3] is not None:
            a[3] = min(a[3], r[nk + 3])
        if r[nk + 4] is not None:
            a[4] = max(a[4], r[nk + 4])
        first, last = r[nk + 7], r[nk + 8]
        d, last_day = floor_to(first, 86400), floor_to(last, 86400)
        while d <= last_day:
            wanted.append((key, last if d == last_day else d + last_hour))
            sign.append(1.0)
            wanted_group.append(j)
            wanted_day.append(d)
            d += day
        series_group[key] = j
    n = len(index)
    if n == 0:
        return {}, None
    before = source.start - timedelta(hours=1)
    if day0 < source.start:
        for key, j in series_group.items():
            wanted.append((key, before))
            sign.append(-1.0)
            wanted_group.append(j)
            wanted_day.append(None)
    fetched = await _fetch_dtd(session, spec, prefix, params, wanted)
    if fetched is None:
        return None
    idx, lengths, buf = fetched
    got = set(idx.tolist())
    missing = [i for i in range(len(wanted)) if i not in got]
    if missing:
        # Gaps at the expected hours: look up the actual last hour of those series' days.
        plus_last: dict[tuple[Any, ...], datetime] = {}
        if any(wanted_day[i] is not None for i in missing):
            plus_last = {(*r[:nk], r[nk]): r[nk + 1] for r in (await session.execute(text(
                f"SELECT {keys_sql}, date_trunc('day', bucket_start, 'UTC'), "
                f"max(bucket_start) {base} AND bucket_start >= :s AND bucket_start < :e "
                f"GROUP BY 1{''.join(f', {i + 2}' for i in range(nk))}"), params)).all()}
        minus_last: dict[tuple[Any, ...], datetime] = {}
        if any(wanted_day[i] is None for i in missing):
            minus_last = {tuple(r[:nk]): r[nk] for r in (await session.execute(text(
                f"SELECT {keys_sql}, max(bucket_start) {base} AND bucket_start >= :d "
                f"AND bucket_start < :b GROUP BY {keys_sql}"),
                {**params, "d": day0, "b": before})).all()}
        more: list[tuple[tuple[Any, ...], datetime]] = []
        more_of: list[int] = []
        for i in missing:
            key, d_i = wanted[i][0], wanted_day[i]
            hour = minus_last.get(key) if d_i is None else plus_last.get((*key, d_i))
            if hour is not None:
                more.append((key, hour))
                more_of.append(i)
        if more:
            extra = await _fetch_dtd(session, spec, prefix, params, more)
            if extra is None:
                return None
            idx = np.concatenate([idx, np.asarray(more_of, dtype=np.int64)[extra[0]]])
            lengths = np.concatenate([lengths, extra[1]])
            buf += extra[2]
    # The hour before the range is subtracted only from a first-day sketch actually added.
    found = set(idx.tolist())
    with_day0 = {wanted[i][0] for i in found if wanted_day[i] == day0}
    weight = np.asarray(sign)
    for i in found:
        if wanted_day[i] is None and wanted[i][0] not in with_day0:
            weight[i] = 0.0
    dec = decode_many(buf, lengths)
    w_group = np.asarray(wanted_group, dtype=np.int64)[idx]
    w_sign = weight[idx]
    bins = GroupedBins(n)
    bins.add_bins(w_group[dec.sketch], dec.keys, dec.counts * w_sign[dec.sketch])
    bins.zero += np.bincount(w_group, weights=dec.zero * w_sign, minlength=n)
    offset, matrix = bins.matrix()
    np.maximum(matrix, 0.0, out=matrix)
    zero = np.maximum(bins.zero, 0.0)
    out: dict[Any, Distribution] = {}
    for g, j in index.items():
        a = acc[j]
        m = Moments(samples=int(a[0]), failures=int(a[1]), count=int(a[2]), total=float(a[5]),
                    total_sq=float(a[6]), minimum=float(a[3]), maximum=float(a[4]))
        row = matrix[j] if matrix.shape[1] else np.zeros(0)
        out[g] = Distribution.sketched(Sketch(offset, row, float(zero[j])), m)
    return out, SharedBins(offset, matrix, zero, index)


async def _fetch_dtd(session: AsyncSession, spec: KindSpec, prefix: str, params: dict[str, Any],
                     wanted: Sequence[tuple[tuple[Any, ...], datetime]]
                     ) -> tuple[np.ndarray, np.ndarray, bytes] | None:
    """Day-to-date sketches of the hourly rows at exactly the wanted (series, hour) keys:
    (index into `wanted` of each row found, sketch lengths, concatenated sketches). None
    when a found row has no day-to-date sketch yet."""
    if not wanted:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), b""
    nk = len(spec.keys)
    arrays = ", ".join(f"CAST(:w{i} AS {t}[])" for i, t in enumerate(spec.key_types))
    names = ", ".join(f"k{i}" for i in range(nk))
    match = " AND ".join(f"r.{k} = x.k{i}" for i, k in enumerate(spec.keys))
    p = {f"w{i}": [w[0][i] for w in wanted] for i in range(nk)}
    p["wh"] = [w[1] for w in wanted]
    row = (await session.execute(text(
        f"SELECT {packed_column('x.i::int', 'int4send')}, "
        f"{packed_column(f'length(r.{prefix}_dtd_sketch)', 'int4send')}, "
        f"string_agg(r.{prefix}_dtd_sketch, ''::bytea), bool_or(r.{prefix}_dtd_sketch IS NULL) "
        f"FROM unnest({arrays}, CAST(:wh AS timestamptz[])) WITH ORDINALITY "
        f"AS x({names}, hour, i) JOIN {spec.table} r ON r.org_id = :org AND r.bucket_s = 3600 "
        f"AND {match} AND r.bucket_start = x.hour"), {"org": params["org"], **p})).one()
    if row[3]:
        return None
    if row[0] is None:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), b""
    idx = np.frombuffer(row[0], dtype=">i4").astype(np.int64) - 1
    lengths = np.frombuffer(row[1], dtype=">i4").astype(np.int64)
    return idx, lengths, bytes(row[2])


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


