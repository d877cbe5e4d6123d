"""Hourly answers over long ranges from day-to-date sketches: rather than merging every
hour's sketch, each series contributes one sketch per UTC day (its last hour's day-to-date
sketch, less the hour before the range on a partial first day), with moments summed from the
hourly rows in SQL. A sketch found missing sends the caller back to the hourly rows."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple

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


class _Totals:
    """One group's moments, summed over its series' hourly rows."""

    __slots__ = ("samples", "failures", "count", "total", "total_sq", "minimum", "maximum")

    def __init__(self) -> None:
        self.samples = self.failures = self.count = self.total = self.total_sq = 0.0
        self.minimum, self.maximum = math.inf, -math.inf

    def add(self, r: Any) -> None:
        """Adds a row of the hourly moments query (columns named there)."""
        self.samples += float(r.samples or 0)
        self.failures += float(r.failures or 0)
        self.count += float(r.value_count or 0)
        self.total += float(r.value_sum or 0)
        self.total_sq += float(r.value_sum_sq or 0)
        if r.value_min is not None:
            self.minimum = min(self.minimum, r.value_min)
        if r.value_max is not None:
            self.maximum = max(self.maximum, r.value_max)

    def moments(self) -> Moments:
        return Moments(samples=int(self.samples), failures=int(self.failures),
                       count=int(self.count), total=float(self.total),
                       total_sq=float(self.total_sq), minimum=float(self.minimum),
                       maximum=float(self.maximum))


class _At(NamedTuple):
    """An hourly row of a series: where a day-to-date sketch is looked up."""

    key: tuple[Any, ...]
    hour: datetime


class _Wanted(NamedTuple):
    """A day-to-date sketch the answer needs: added (sign 1) for a day of the range, or
    subtracted (sign -1, day None) for the hour before a partial first day."""

    key: tuple[Any, ...]
    hour: datetime
    sign: float
    group: int
    day: datetime | None


class _Fetched(NamedTuple):
    """Sketches found for a list of `_At`: the list index of each, lengths, bytes."""

    found: np.ndarray
    lengths: np.ndarray
    sketches: bytes


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
    # Column names chosen apart from every kind's key columns (quorum's include k and n).
    moments = (await session.execute(text(
        f"SELECT {keys_sql}, sum(sample_count) AS samples, sum(failure_count) AS failures, "
        f"sum({prefix}_count) AS value_count, min({prefix}_min) AS value_min, "
        f"max({prefix}_max) AS value_max, sum({prefix}_sum) AS value_sum, "
        f"sum({prefix}_sum_sq) AS value_sum_sq, min(bucket_start) AS first_hour, "
        f"max(bucket_start) AS last_hour {base} AND bucket_start >= :s "
        f"AND bucket_start < :e GROUP BY {keys_sql}"), params)).all()
    index: dict[Any, int] = {}
    cache: dict[tuple[Any, ...], Any] = {}
    totals: dict[int, _Totals] = {}
    wanted: list[_Wanted] = []
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
            totals[j] = _Totals()
        totals[j].add(r)
        d, last_day = floor_to(r.first_hour, 86400), floor_to(r.last_hour, 86400)
        while d <= last_day:
            wanted.append(_Wanted(key, r.last_hour if d == last_day else d + last_hour, 1.0,
                                  j, d))
            d += day
        series_group[key] = j
    n = len(index)
    if n == 0:
        return {}, None
    before = source.start - timedelta(hours=1)
    if day0 < source.start:
        for key, j in series_group.items():
            wanted.append(_Wanted(key, before, -1.0, j, None))
    fetched = await _fetch_dtd(session, spec, prefix, params,
                               [_At(w.key, w.hour) for w in wanted])
    if fetched is None:
        return None
    idx, lengths, buf = fetched
    got = set(idx.tolist())
    missing = [i for i in range(len(wanted)) if i not in got]
    if missing:
        # Gaps at the expected hours: look up the actual last hour of those series' days.
        plus_last: dict[tuple[Any, ...], datetime] = {}
        if any(wanted[i].day is not None for i in missing):
            plus_last = {(*r[:nk], r.day): r.last_hour for r in (await session.execute(text(
                f"SELECT {keys_sql}, date_trunc('day', bucket_start, 'UTC') AS day, "
                f"max(bucket_start) AS last_hour {base} AND bucket_start >= :s "
                f"AND bucket_start < :e "
                f"GROUP BY 1{''.join(f', {i + 2}' for i in range(nk))}"), params)).all()}
        minus_last: dict[tuple[Any, ...], datetime] = {}
        if any(wanted[i].day is None for i in missing):
            minus_last = {tuple(r[:nk]): r.last_hour for r in (await session.execute(text(
                f"SELECT {keys_sql}, max(bucket_start) AS last_hour {base} "
                f"AND bucket_start >= :d AND bucket_start < :b GROUP BY {keys_sql}"),
                {**params, "d": day0, "b": before})).all()}
        more: list[_At] = []
        more_of: list[int] = []
        for i in missing:
            w = wanted[i]
            hour = minus_last.get(w.key) if w.day is None else plus_last.get((*w.key, w.day))
            if hour is not None:
                more.append(_At(w.key, hour))
                more_of.append(i)
        if more:
            extra = await _fetch_dtd(session, spec, prefix, params, more)
            if extra is None:
                return None
            idx = np.concatenate([idx, np.asarray(more_of, dtype=np.int64)[extra.found]])
            lengths = np.concatenate([lengths, extra.lengths])
            buf += extra.sketches
    # The hour before the range is subtracted only from a first-day sketch actually added.
    found = set(idx.tolist())
    with_day0 = {wanted[i].key for i in found if wanted[i].day == day0}
    weight = np.asarray([w.sign for w in wanted])
    for i in found:
        if wanted[i].day is None and wanted[i].key not in with_day0:
            weight[i] = 0.0
    dec = decode_many(buf, lengths)
    w_group = np.asarray([w.group for w in wanted], dtype=np.int64)[idx]
    w_sign = weight[idx]
    bins = GroupedBins(n)
    bins.add_bins(w_group[dec.sketch], dec.keys, dec.counts * w_sign[dec.sketch])
    bins.zero += np.bincount(w_group, weights=dec.zero * w_sign, minlength=n)
    offset, matrix = bins.matrix()
    np.maximum(matrix, 0.0, out=matrix)
    zero = np.maximum(bins.zero, 0.0)
    out: dict[Any, Distribution] = {}
    for g, j in index.items():
        row = matrix[j] if matrix.shape[1] else np.zeros(0)
        out[g] = Distribution.sketched(Sketch(offset, row, float(zero[j])), totals[j].moments())
    return out, SharedBins(offset, matrix, zero, index)


async def _fetch_dtd(session: AsyncSession, spec: KindSpec, prefix: str, params: dict[str, Any],
                     at: Sequence[_At]) -> _Fetched | None:
    """Day-to-date sketches of the hourly rows at exactly the given (series, hour) keys:
    the index into `at` of each row found, sketch lengths, concatenated sketches. None
    when a found row has no day-to-date sketch yet."""
    if not at:
        return _Fetched(np.zeros(0, np.int64), np.zeros(0, np.int64), b"")
    nk = len(spec.keys)
    arrays = ", ".join(f"CAST(:w{i} AS {t}[])" for i, t in enumerate(spec.key_types))
    names = ", ".join(f"k{i}" for i in range(nk))
    match = " AND ".join(f"r.{k} = x.k{i}" for i, k in enumerate(spec.keys))
    p = {f"w{i}": [a.key[i] for a in at] for i in range(nk)}
    p["wh"] = [a.hour for a in at]
    row = (await session.execute(text(
        f"SELECT {packed_column('x.i::int', 'int4send')} AS found, "
        f"{packed_column(f'length(r.{prefix}_dtd_sketch)', 'int4send')} AS lengths, "
        f"string_agg(r.{prefix}_dtd_sketch, ''::bytea) AS sketches, "
        f"bool_or(r.{prefix}_dtd_sketch IS NULL) AS unfinished "
        f"FROM unnest({arrays}, CAST(:wh AS timestamptz[])) WITH ORDINALITY "
        f"AS x({names}, hour, i) JOIN {spec.table} r ON r.org_id = :org AND r.bucket_s = 3600 "
        f"AND {match} AND r.bucket_start = x.hour"), {"org": params["org"], **p})).one()
    if row.unfinished:
        return None
    if row.found is None:
        return _Fetched(np.zeros(0, np.int64), np.zeros(0, np.int64), b"")
    # WITH ORDINALITY counts from 1.
    return _Fetched(np.frombuffer(row.found, dtype=">i4").astype(np.int64) - 1,
                    np.frombuffer(row.lengths, dtype=">i4").astype(np.int64),
                    bytes(row.sketches))
