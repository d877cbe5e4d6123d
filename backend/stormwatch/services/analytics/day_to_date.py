"""Hourly answers over long ranges from day-to-date sketches: rather than merging every
hour's sketch, each series contributes one sketch per UTC day (its last hour's day-to-date
sketch, less the hour before the range on a partial first day), with moments summed from the
hourly rows in SQL. A sketch found missing sends the caller back to the hourly rows."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.services.analytics.filters import KindSpec
from stormwatch.services.analytics.grouping import GroupFn, group_key
from stormwatch.services.analytics.rollup_reads import SharedBins, packed_column
from stormwatch.services.analytics.sketches import GroupedBins, Sketch, decode_many
from stormwatch.services.analytics.source import Source, floor_to
from stormwatch.services.analytics.stats import Distribution, Moments

# Beyond this span, hourly answers merge day-to-date sketches rather than every hour's.
DAY_TO_DATE_MIN_SPAN = timedelta(hours=4)


async def load_day_to_date(session: AsyncSession, spec: KindSpec, prefix: str,
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
