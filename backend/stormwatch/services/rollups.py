"""Rollups of raw samples into 1-minute buckets, of those into 5-minute and 1-hour ones, and
of the hours into 1-day ones.

Every computation rebuilds whole buckets from their sources and upserts them, so running
it twice gives the same rows. Every accepted sample reaches the minute rollups whenever it
arrives: the minute pass reads forward from its watermark (from the oldest raw sample on its
first pass) without skipping, a bounded span per pass; ingest marks the minutes of samples
that arrive below what a pass has claimed (`claim_minutes`), and marked minutes are re-rolled
oldest first; a sweep compares raw counts with rolled counts over recent hours as a backstop.
Coarser buckets are re-rolled whenever a finer row of theirs was recomputed after them.
A level added to a database that already holds finer rows (the 5-minute one, migration
0006) fills its history from the newest bucket back, a bounded span per pass.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import Connection, Engine, text

from stormwatch.services.analytics.group_stats import (
    StatColumns,
    merge_stat_rows,
    stats_from_values,
)
from stormwatch.services.analytics.sketches import Sketch, decode, encode

MINUTE, FIVE_MINUTES, HOUR, DAY = 60, 300, 3600, 86400
# Each coarser level and the level it is rolled from. 5-minute buckets exist for long
# timelines (a week in 10- to 30-minute windows reads 2016 rows per series, not 10 080);
# hours keep rolling from minutes so the two levels never wait on each other.
FINER = {FIVE_MINUTES: MINUTE, HOUR: MINUTE, DAY: HOUR}
COARSE_LEVELS = (FIVE_MINUTES, HOUR, DAY)
# Samples may arrive a little after their timestamp; the minute pass leaves this margin
# behind now (later ones are marked by ingest, see `claim_minutes`).
SETTLE = timedelta(seconds=30)
# A finer row committed this long after its computed_at would be missed by the coarser
# pass; the pass re-reads this far back, which only costs idempotent recomputation.
COMPUTED_AT_SLACK = timedelta(minutes=5)
# A pass claims at most this much new raw time, reads it MINUTE_CHUNK at a time (which bounds
# the rows held at once) and stops reading new or marked minutes once ROLL_SECONDS_PER_PASS is
# spent (one chunk or run at least): a backlog of hours or days drains over passes, oldest
# first, none of them one long transaction. Marked minutes: at most MAX_DIRTY_MINUTES_PER_PASS
# (org, minute) pairs a pass, an org's adjacent ones read together up to DIRTY_RUN at a time.
MAX_MINUTES_PER_PASS = 120
MINUTE_CHUNK = timedelta(minutes=15)
ROLL_SECONDS_PER_PASS = 20.0
MAX_DIRTY_MINUTES_PER_PASS = 1440
DIRTY_RUN = timedelta(hours=1)
# Coarse buckets are computed in spans of up to this length (one bucket at least), which bounds
# the finer rows held at once: adjacent stale buckets share one read, and a new level's history
# fills a span at a time, newest first, for at most FILL_SECONDS_PER_PASS per pass (one span at
# least), so the minute pass behind it is never held up for long.
COARSE_SPAN = timedelta(hours=1)
FILL_SECONDS_PER_PASS = 5.0


@dataclass(frozen=True)
class RollupKind:
    name: str
    raw_table: str
    table: str
    keys: tuple[str, ...]
    # (column prefix in the rollup table, SQL value over the raw row, NULL when absent)
    values: tuple[tuple[str, str], ...]
    failure_sql: str


KINDS: dict[str, RollupKind] = {
    "mesh": RollupKind(
        "mesh", "mesh_samples", "mesh_rollups", ("src_agent_id", "dst_agent_id", "payload_bytes"),
        (("rtt_us", "CASE WHEN status = 0 THEN rtt_us END"),), "status <> 0"),
    "quorum": RollupKind(
        "quorum", "quorum_samples", "quorum_rollups", ("agent_id", "group_name", "k", "n"),
        (("latency_us", "CASE WHEN status = 0 THEN latency_us END"),), "status <> 0"),
    "storage": RollupKind(
        "storage", "storage_samples", "storage_rollups",
        ("agent_id", "target_id", "op", "variant", "content", "size_bytes", "copies",
         "concurrency"),
        (("latency_us", "CASE WHEN status = 0 THEN latency_us END"),
         # Seed 000 Tables 1-2: latency minus the round trip to the endpoint.
         ("adj_latency_us",
          "CASE WHEN status = 0 AND rtt_us IS NOT NULL THEN greatest(latency_us - rtt_us, 0) END")),
        "status <> 0"),
    "throughput": RollupKind(
        "throughput", "throughput_samples", "throughput_rollups",
        ("src_agent_id", "dst_agent_id", "proto", "direction"),
        (("bytes_per_s", "bytes_per_s"),), "false"),
}


def floor_time(t: datetime, bucket_s: int) -> datetime:
    ts = int(t.timestamp())
    return datetime.fromtimestamp(ts - ts % bucket_s, UTC)


# --- grouping helpers -----------------------------------------------------------------


def _group_index(keys: Sequence[tuple[Any, ...]]
                 ) -> tuple[NDArray[np.int64], list[tuple[Any, ...]]]:
    index: dict[tuple[Any, ...], int] = {}
    ids = np.empty(len(keys), dtype=np.int64)
    for i, k in enumerate(keys):
        g = index.get(k)
        if g is None:
            g = index[k] = len(index)
        ids[i] = g
    return ids, list(index)


def _none_if_inf(x: float) -> float | None:
    return None if not np.isfinite(x) else float(x)


# --- upsert ---------------------------------------------------------------------------


def _upsert(conn: Connection, kind: RollupKind, bucket_s: int, series: list[tuple[Any, ...]],
            sample_count: NDArray[np.int64], failure_count: NDArray[np.int64],
            stats: dict[str, StatColumns]) -> int:
    """series: (org_id, *keys, bucket_start) per group."""
    if not series:
        return 0
    cols = ["org_id", "bucket_s", "bucket_start", *kind.keys, "sample_count", "failure_count"]
    for prefix, _ in kind.values:
        cols += [f"{prefix}_count", f"{prefix}_min", f"{prefix}_max", f"{prefix}_sum",
                 f"{prefix}_sum_sq", f"{prefix}_sketch", f"{prefix}_median", f"{prefix}_mad",
                 f"{prefix}_half_medians"]
    rows = []
    for i, key in enumerate(series):
        row: dict[str, Any] = {"org_id": key[0], "bucket_s": bucket_s, "bucket_start": key[-1]}
        for name, val in zip(kind.keys, key[1:-1], strict=True):
            row[name] = val
        row["sample_count"] = int(sample_count[i])
        row["failure_count"] = int(failure_count[i])
        for prefix, _ in kind.values:
            st = stats[prefix]
            row[f"{prefix}_count"] = int(st.count[i])
            row[f"{prefix}_min"] = _none_if_inf(st.minimum[i])
            row[f"{prefix}_max"] = _none_if_inf(st.maximum[i])
            row[f"{prefix}_sum"] = float(st.total[i])
            row[f"{prefix}_sum_sq"] = float(st.total_sq[i])
            row[f"{prefix}_sketch"] = st.sketches[i]
            row[f"{prefix}_median"] = (None if st.median is None
                                       else _none_if_inf(st.median[i]))
            row[f"{prefix}_mad"] = None if st.mad is None else _none_if_inf(st.mad[i])
            row[f"{prefix}_half_medians"] = (
                None if st.half_medians is None
                else [_none_if_inf(x) for x in st.half_medians[i]])
        rows.append(row)
    pk = ["org_id", "bucket_s", *kind.keys, "bucket_start"]
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in cols if c not in pk)
    sql = text(
        f"INSERT INTO {kind.table} ({', '.join(cols)}, computed_at) "
        f"VALUES ({', '.join(':' + c for c in cols)}, clock_timestamp()) "
        f"ON CONFLICT ({', '.join(pk)}) DO UPDATE SET {updates}, computed_at = clock_timestamp()")
    conn.execute(sql, rows)
    return len(rows)


# --- minute rollups from raw ----------------------------------------------------------


def roll_up_minutes(conn: Connection, kind_name: str, start: datetime, end: datetime,
                    org_id: uuid.UUID | None = None) -> int:
    """Recompute every 1-minute bucket in [start, end) (both floored to minutes) from raw
    samples. Buckets whose raw samples are gone are deleted so reruns match the source."""
    kind = KINDS[kind_name]
    start, end = floor_time(start, MINUTE), floor_time(end, MINUTE)
    if end <= start:
        return 0
    org_sql = " AND org_id = :org" if org_id is not None else ""
    vals = ", ".join(f"({expr})::float8" for _, expr in kind.values)
    result = conn.execute(text(
        f"SELECT org_id, {', '.join(kind.keys)}, "
        f"(floor(extract(epoch FROM time) / 60) * 60)::bigint AS m, "
        f"({kind.failure_sql}) AS failed, {vals}, "
        f"extract(second FROM time) >= 30 AS late_half "
        f"FROM {kind.raw_table} WHERE time >= :s AND time < :e{org_sql}"),
        {"s": start, "e": end, "org": org_id}).all()
    nk = len(kind.keys)
    written = 0
    if result:
        keys = [(r[0], *r[1 : 1 + nk], r[1 + nk]) for r in result]
        groups, uniq = _group_index(keys)
        n = len(uniq)
        failed = np.fromiter((bool(r[2 + nk]) for r in result), dtype=bool, count=len(result))
        sample_count = np.bincount(groups, minlength=n).astype(np.int64)
        failure_count = np.bincount(groups, weights=failed, minlength=n).astype(np.int64)
        late = np.fromiter((bool(r[-1]) for r in result), dtype=bool, count=len(result))
        stats = {}
        for j, (prefix, _) in enumerate(kind.values):
            v = np.fromiter((np.nan if r[3 + nk + j] is None else r[3 + nk + j] for r in result),
                            dtype=np.float64, count=len(result))
            stats[prefix] = stats_from_values(v, groups, n, late)
        series = [(*k[:-1], datetime.fromtimestamp(k[-1], UTC)) for k in uniq]
        written = _upsert(conn, kind, MINUTE, series, sample_count, failure_count, stats)
    # Minutes in range that no longer have raw samples (e.g. a batch rolled back) lose rows
    # computed earlier; rows newer than this pass are ours and are kept.
    conn.execute(text(
        f"DELETE FROM {kind.table} r WHERE bucket_s = 60 AND bucket_start >= :s "
        f"AND bucket_start < :e{org_sql.replace('org_id', 'r.org_id')} "
        f"AND computed_at < transaction_timestamp() AND NOT EXISTS (SELECT 1 FROM "
        f"{kind.raw_table} x WHERE x.org_id = r.org_id AND "
        + " AND ".join(f"x.{k} = r.{k}" for k in kind.keys)
        + " AND x.time >= r.bucket_start AND x.time < r.bucket_start + interval '1 minute')"),
        {"s": start, "e": end, "org": org_id})
    return written


# --- 5-minute, hour and day rollups from finer ones -----------------------------------


def finer_level(bucket_s: int) -> int:
    if bucket_s not in FINER:
        raise ValueError(f"no rollup level of {bucket_s} s above the minute one; one of "
                         + ", ".join(str(b) for b in COARSE_LEVELS))
    return FINER[bucket_s]


def coarse_span(bucket_s: int) -> timedelta:
    """COARSE_SPAN rounded down to whole buckets of `bucket_s`, one at least."""
    return timedelta(seconds=max(int(COARSE_SPAN.total_seconds()) // bucket_s, 1) * bucket_s)


def roll_up_coarse(conn: Connection, kind_name: str, bucket_s: int,
                   buckets: Sequence[tuple[uuid.UUID, datetime]]) -> int:
    """Recompute the given (org, bucket_start) buckets of size `bucket_s` (300, 3600 or
    86400) from the level they are rolled from (FINER: minutes, minutes, hours)."""
    kind = KINDS[kind_name]
    finer = finer_level(bucket_s)
    written = 0
    by_org: dict[uuid.UUID, list[datetime]] = {}
    for org, b in buckets:
        by_org.setdefault(org, []).append(floor_time(b, bucket_s))
    step, span = timedelta(seconds=bucket_s), coarse_span(bucket_s)
    for org, starts in by_org.items():
        # Runs of adjacent buckets, up to a span each, are read and written together.
        runs: list[list[datetime]] = []
        for b in sorted(set(starts)):
            if runs and b == runs[-1][1] and b + step - runs[-1][0] <= span:
                runs[-1][1] = b + step
            else:
                runs.append([b, b + step])
        for b, e in runs:
            written += _roll_coarse_span(conn, kind, org, bucket_s, finer, b, e)
        if bucket_s == HOUR:
            first_hour_of_day: dict[datetime, datetime] = {}
            for b in starts:
                day = floor_time(b, DAY)
                first_hour_of_day[day] = min(b, first_hour_of_day.get(day, b))
            for day, first in sorted(first_hour_of_day.items()):
                refresh_day_to_date(conn, kind_name, org, day, first)
    return written


def refresh_day_to_date(conn: Connection, kind_name: str, org: uuid.UUID, day: datetime,
                        from_hour: datetime | None = None) -> int:
    """Recompute the day-to-date sketches of the hourly rows of `day` from `from_hour` on
    (earlier hours only contribute their own sketches to the running merge)."""
    kind = KINDS[kind_name]
    day = floor_time(day, DAY)
    from_hour = from_hour or day
    sketch_cols = ", ".join(f"{p}_sketch" for p, _ in kind.values)
    rows = conn.execute(text(
        f"SELECT {', '.join(kind.keys)}, bucket_start, {sketch_cols} FROM {kind.table} "
        f"WHERE org_id = :o AND bucket_s = 3600 AND bucket_start >= :d AND bucket_start < :e "
        f"ORDER BY {', '.join(kind.keys)}, bucket_start"),
        {"o": org, "d": day, "e": day + timedelta(days=1)}).all()
    nk = len(kind.keys)
    updates: list[dict[str, Any]] = []
    running: dict[tuple[Any, ...], list[Sketch]] = {}
    for r in rows:
        key = tuple(r[:nk])
        acc = running.get(key)
        if acc is None:
            acc = running[key] = [Sketch(0, np.zeros(0), 0.0) for _ in kind.values]
        row: dict[str, Any] = {"o": org, "b": r[nk]}
        for j in range(len(kind.values)):
            acc[j] = _add_sketch(acc[j], decode(bytes(r[nk + 1 + j])))
            if r[nk] >= from_hour:
                row[f"d{j}"] = encode(acc[j])
        if r[nk] >= from_hour:
            row.update({f"k{i}": v for i, v in enumerate(key)})
            updates.append(row)
    if updates:
        sets = ", ".join(f"{p}_dtd_sketch = :d{j}" for j, (p, _) in enumerate(kind.values))
        match = " AND ".join(f"{k} = :k{i}" for i, k in enumerate(kind.keys))
        conn.execute(text(
            f"UPDATE {kind.table} SET {sets} WHERE org_id = :o AND bucket_s = 3600 AND "
            f"bucket_start = :b AND {match}"), updates)
    return len(updates)


def _add_sketch(a: Sketch, b: Sketch) -> Sketch:
    if not b.counts.size:
        return Sketch(a.offset, a.counts, a.zero_count + b.zero_count)
    if not a.counts.size:
        return Sketch(b.offset, b.counts.copy(), a.zero_count + b.zero_count)
    lo = min(a.offset, b.offset)
    hi = max(a.offset + a.counts.size, b.offset + b.counts.size)
    out = np.zeros(hi - lo)
    out[a.offset - lo : a.offset - lo + a.counts.size] += a.counts
    out[b.offset - lo : b.offset - lo + b.counts.size] += b.counts
    return Sketch(lo, out, a.zero_count + b.zero_count)


def _roll_coarse_span(conn: Connection, kind: RollupKind, org: uuid.UUID, bucket_s: int,
                      finer: int, b: datetime, e: datetime) -> int:
    """Recompute every `bucket_s` bucket of [b, e) (aligned to it) from the finer rows."""
    stat_cols = []
    for prefix, _ in kind.values:
        stat_cols += [f"{prefix}_count", f"{prefix}_min", f"{prefix}_max", f"{prefix}_sum",
                      f"{prefix}_sum_sq", f"{prefix}_sketch"]
    level_cols = [f"{prefix}_{c}" for prefix, _ in kind.values for c in ("median", "mad")]
    stat_cols += level_cols
    rows = conn.execute(text(
        f"SELECT {', '.join(kind.keys)}, "
        f"(floor(extract(epoch FROM bucket_start) / {int(bucket_s)}) * {int(bucket_s)})::bigint, "
        f"sample_count, failure_count, {', '.join(stat_cols)} "
        f"FROM {kind.table} WHERE org_id = :org AND bucket_s = :f AND bucket_start >= :b "
        f"AND bucket_start < :e"), {"org": org, "f": finer, "b": b, "e": e}).all()
    nk = len(kind.keys)
    written = 0
    if rows:
        groups, uniq = _group_index([tuple(r[: nk + 1]) for r in rows])
        n = len(uniq)
        sc = np.bincount(groups, weights=[r[nk + 1] for r in rows], minlength=n).astype(np.int64)
        fc = np.bincount(groups, weights=[r[nk + 2] for r in rows], minlength=n).astype(np.int64)
        stats = {}
        for j, (prefix, _) in enumerate(kind.values):
            base = nk + 3 + 6 * j

            def col(i: int, base: int = base) -> NDArray[np.float64]:
                return np.array([np.nan if r[base + i] is None else r[base + i] for r in rows],
                                dtype=np.float64)

            lv = nk + 3 + 6 * len(kind.values) + 2 * j
            stats[prefix] = merge_stat_rows(groups, n, col(0), col(1), col(2), col(3), col(4),
                                            [bytes(r[base + 5]) for r in rows],
                                            col(lv - base), col(lv + 1 - base))
        series = [(org, *k[:-1], datetime.fromtimestamp(k[-1], UTC)) for k in uniq]
        written = _upsert(conn, kind, bucket_s, series, sc, fc, stats)
    # Buckets whose finer rows are gone lose their rows; rows of this pass are kept.
    conn.execute(text(
        f"DELETE FROM {kind.table} r WHERE org_id = :org AND bucket_s = :bs "
        f"AND bucket_start >= :b AND bucket_start < :e "
        f"AND computed_at < transaction_timestamp() AND NOT EXISTS (SELECT 1 FROM {kind.table} x "
        f"WHERE x.org_id = r.org_id AND x.bucket_s = :f AND "
        + " AND ".join(f"x.{k} = r.{k}" for k in kind.keys)
        + " AND x.bucket_start >= r.bucket_start "
        f"AND x.bucket_start < r.bucket_start + interval '{int(bucket_s)} seconds')"),
        {"org": org, "bs": bucket_s, "b": b, "e": e, "f": finer})
    return written


def stale_coarse_buckets(conn: Connection, kind_name: str, bucket_s: int,
                         since: datetime
                         ) -> tuple[list[tuple[uuid.UUID, datetime]], datetime | None]:
    """(org, bucket) pairs at `bucket_s` whose finer rows were recomputed after `since`, and
    the newest computed_at seen."""
    kind = KINDS[kind_name]
    finer = finer_level(bucket_s)
    rows = conn.execute(text(
        f"SELECT org_id, to_timestamp(floor(extract(epoch FROM bucket_start) / :bs) * :bs) AS b, "
        f"max(computed_at) FROM {kind.table} WHERE bucket_s = :f AND computed_at > :since "
        f"GROUP BY 1, 2"), {"bs": bucket_s, "f": finer, "since": since}).all()
    newest = max((r[2] for r in rows), default=None)
    return [(r[0], r[1]) for r in rows], newest


# --- watermarks, claims and late samples -----------------------------------------------
#
# `{kind}:60` in rollup_watermarks is the minute pass's watermark: every sample older than it
# is in the minute rollups or in a marked (dirty) minute. `{kind}:60:claim` is how far the
# pass has announced it will read. A pass first raises the claim in a short transaction of its
# own, then reads raw samples below it. Ingest marks the minutes of a batch that are below the
# claim while holding a share lock on the claim row until it commits, so the claim's update
# waits for every batch that read the old claim: a batch committed before the claim is seen by
# the read that follows it, and a batch committed after it has marked its minutes. Migration
# 0009 creates the claim rows at -infinity, which ingest never marks below. No sample is left
# behind however long the worker was stopped or however old the samples are; the read is
# bounded per pass (MAX_MINUTES_PER_PASS, ROLL_SECONDS_PER_PASS) and drains oldest first.


def claim_key(kind_name: str) -> str:
    return f"{kind_name}:60:claim"


def _watermark(conn: Connection, key: str) -> datetime | None:
    # -infinity (an unclaimed claim row) reads as None: Python datetimes cannot hold it.
    return conn.execute(text(
        "SELECT CASE WHEN isfinite(rolled_until) THEN rolled_until END FROM rollup_watermarks "
        "WHERE kind = :k"), {"k": key}).scalar()


def _set_watermark(conn: Connection, key: str, value: datetime) -> None:
    conn.execute(text(
        "INSERT INTO rollup_watermarks (kind, rolled_until, updated_at) VALUES (:k, :v, now()) "
        "ON CONFLICT (kind) DO UPDATE SET rolled_until = EXCLUDED.rolled_until, "
        "updated_at = now()"),
        {"k": key, "v": value})


# What "the oldest raw sample of an org" probes: one (org_id, time) index probe per org, or,
# for mesh rows (migration 0014: no org column, one (series_id, time) b-tree), one per series.
_OLDEST_PROBES = {"mesh": ("mesh_series g", "mesh_raw", "r.series_id = g.id")}


def oldest_raw_sql(kind_name: str, time_cond: str) -> str:
    """SQL for the oldest raw sample of a kind whose `r.time` meets `time_cond`, found by
    index probes (per org, or per mesh series) rather than a scan."""
    kind = KINDS[kind_name]
    outer, table, match = _OLDEST_PROBES.get(kind_name, ("orgs g", kind.raw_table,
                                                         "r.org_id = g.id"))
    return (f"SELECT min(f.t) FROM {outer} CROSS JOIN LATERAL (SELECT r.time AS t FROM {table} "
            f"r WHERE {match} AND {time_cond} ORDER BY r.time LIMIT 1) f")


def _oldest_raw_before(conn: Connection, kind_name: str, before: datetime) -> datetime | None:
    """The oldest raw sample of a kind before `before` (index probes, oldest_raw_sql)."""
    return conn.execute(text(oldest_raw_sql(kind_name, "r.time < :b")), {"b": before}).scalar()


def claim_minutes(conn: Connection, kind_name: str, now: datetime | None = None) -> datetime:
    """Phase one of a minute pass, committed on its own before `roll_up_recent` reads: raise
    the kind's claim to the end of the minutes the pass will roll (from the watermark, or from
    the oldest raw sample on a first pass, at most MAX_MINUTES_PER_PASS, never past settled
    time). Never lowers it. Waits for batches being stored that read the old claim."""
    if kind_name not in KINDS:
        raise ValueError(f"unknown sample kind {kind_name!r}")
    now = now or datetime.now(UTC)
    end = floor_time(now - SETTLE, MINUTE)
    wm = _watermark(conn, f"{kind_name}:60")
    if wm is None:
        first = _oldest_raw_before(conn, kind_name, end)
        start = floor_time(first, MINUTE) if first is not None else end
    else:
        start = wm
    stop = max(start, min(end, start + timedelta(minutes=MAX_MINUTES_PER_PASS)))
    conn.execute(text(
        "INSERT INTO rollup_watermarks (kind, rolled_until, updated_at) VALUES (:k, :v, now()) "
        "ON CONFLICT (kind) DO UPDATE SET rolled_until = greatest(rollup_watermarks.rolled_until,"
        " EXCLUDED.rolled_until), updated_at = now()"), {"k": claim_key(kind_name), "v": stop})
    return stop


# Marks a minute for a re-roll. A minute already marked gets a later marked_at (strictly, even
# within one clock tick), so the pass that is rolling it keeps the mark (it deletes marks no
# newer than the one it read).
_MARK_UPSERT = (
    "ON CONFLICT (kind, org_id, minute) DO UPDATE SET marked_at = "
    "greatest(clock_timestamp(), rollup_dirty_minutes.marked_at + interval '1 microsecond')")


def mark_late_minutes(conn: Connection, kind_name: str, org_id: uuid.UUID,
                      times: Sequence[datetime]) -> int:
    """Mark the minutes of `times` that lie below the kind's claim, so a pass re-rolls them.
    Ingest does the same through `mark_minutes` (asyncpg) in the batch's transaction."""
    if kind_name not in KINDS:
        raise ValueError(f"unknown sample kind {kind_name!r}")
    minutes = sorted({floor_time(t, MINUTE) for t in times})
    if not minutes:
        return 0
    return int(conn.execute(text(
        "INSERT INTO rollup_dirty_minutes (kind, org_id, minute) "
        "SELECT :k, :o, m FROM unnest(CAST(:ms AS timestamptz[])) AS m "
        "WHERE m < (SELECT rolled_until FROM rollup_watermarks WHERE kind = :c FOR SHARE) "
        + _MARK_UPSERT), {"k": kind_name, "o": org_id, "ms": minutes,
                          "c": claim_key(kind_name)}).rowcount or 0)


# For ingest (asyncpg), last statement of a batch's transaction: marks the batch's minutes
# that lie below the claim; the share lock on the claim row is held until the batch commits.
# Args: kind, org_id, the distinct minute starts of the batch's samples of that kind.
MARK_MINUTES_SQL = f"""
INSERT INTO rollup_dirty_minutes (kind, org_id, minute)
SELECT $1::varchar, $2::uuid, m FROM unnest($3::timestamptz[]) AS m
WHERE m < (SELECT rolled_until FROM rollup_watermarks
           WHERE kind = $1::varchar || ':60:claim' FOR SHARE)
{_MARK_UPSERT}
"""


async def mark_minutes(conn: Any, kind_name: str, org_id: uuid.UUID,
                       minutes: Sequence[datetime]) -> None:
    """`mark_late_minutes` for an asyncpg connection, inside the batch's transaction."""
    if kind_name not in KINDS:
        raise ValueError(f"unknown sample kind {kind_name!r}")
    if minutes:
        await conn.execute(MARK_MINUTES_SQL, kind_name, org_id, list(minutes))


def sweep_late_minutes(conn: Connection, kind_name: str, lookback: timedelta) -> int:
    """Mark rolled minutes whose raw sample count differs from what was rolled: a backstop
    for samples written other than through ingest (ingest marks its own)."""
    kind = KINDS[kind_name]
    wm = _watermark(conn, f"{kind_name}:60")
    if wm is None:
        return 0
    since = floor_time(wm - lookback, MINUTE)
    until = floor_time(wm, MINUTE)
    if until <= since:
        return 0
    return int(conn.execute(text(f"""
        INSERT INTO rollup_dirty_minutes (kind, org_id, minute)
        SELECT :k, raw.org_id, raw.m FROM (
            SELECT org_id, date_trunc('minute', time) AS m, count(*) AS c FROM {kind.raw_table}
            WHERE time >= :s AND time < :u GROUP BY 1, 2) raw
        LEFT JOIN (
            SELECT org_id, bucket_start AS m, sum(sample_count) AS c FROM {kind.table}
            WHERE bucket_s = 60 AND bucket_start >= :s AND bucket_start < :u GROUP BY 1, 2) r
        USING (org_id, m)
        WHERE r.c IS DISTINCT FROM raw.c
        {_MARK_UPSERT}"""), {"k": kind_name, "s": since, "u": until}).rowcount or 0)


def roll_up_dirty_minutes(conn: Connection, kind_name: str,
                          limit: int = MAX_DIRTY_MINUTES_PER_PASS,
                          deadline: float | None = None) -> int:
    """Re-roll up to `limit` marked minutes, oldest first. Each org's adjacent minutes are
    read as one run (up to DIRTY_RUN long), so a backfill of days costs a query per run, not
    per minute; past `deadline` (time.monotonic()) the pass stops after the current run."""
    rows = conn.execute(text(
        "SELECT org_id, minute, marked_at FROM rollup_dirty_minutes WHERE kind = :k "
        "ORDER BY minute, org_id LIMIT :n"), {"k": kind_name, "n": limit}).all()
    runs: list[tuple[uuid.UUID, list[tuple[datetime, datetime]]]] = []
    open_run: dict[uuid.UUID, list[tuple[datetime, datetime]]] = {}
    for org, minute, marked_at in rows:
        run = open_run.get(org)
        if (run is None or minute != run[-1][0] + timedelta(minutes=1)
                or minute - run[0][0] >= DIRTY_RUN):
            run = open_run[org] = []
            runs.append((org, run))
        run.append((minute, marked_at))
    done = 0
    for org, run in runs:
        first, last = run[0][0], run[-1][0]
        roll_up_minutes(conn, kind_name, first, last + timedelta(minutes=1), org)
        conn.execute(text(
            "DELETE FROM rollup_dirty_minutes d USING unnest(CAST(:ms AS timestamptz[]), "
            "CAST(:ts AS timestamptz[])) AS x(m, t) WHERE d.kind = :k AND d.org_id = :o "
            "AND d.minute = x.m AND d.marked_at <= x.t"),
            {"k": kind_name, "o": org, "ms": [m for m, _ in run], "ts": [t for _, t in run]})
        done += len(run)
        if deadline is not None and time.monotonic() >= deadline:
            break
    return done


def roll_up_recent(conn: Connection, kind_name: str, now: datetime | None = None,
                   budget_s: float = ROLL_SECONDS_PER_PASS) -> dict[str, int]:
    """Phase two of a minute pass (after `claim_minutes` committed): new minutes from the
    watermark up to the claim (from the oldest raw sample on a first pass), marked late
    minutes, then the 5-minute buckets, hours and days whose finer rows changed (and a bounded
    span of a level still filling its history). New minutes are read MINUTE_CHUNK at a time
    and both minute steps stop once `budget_s` is spent (after one chunk or run at least), so
    a long backlog drains over passes, oldest first. Safe to run concurrently with itself only
    under the advisory lock taken here."""
    now = now or datetime.now(UTC)
    got = conn.execute(text("SELECT pg_try_advisory_xact_lock(hashtext(:k))"),
                       {"k": f"rollup:{kind_name}"}).scalar()
    if not got:
        return {"skipped": 1}
    deadline = time.monotonic() + budget_s
    key = f"{kind_name}:60"
    end = floor_time(now - SETTLE, MINUTE)
    claim = _watermark(conn, claim_key(kind_name))
    wm = _watermark(conn, key)
    minutes = 0
    if claim is not None:
        if wm is None:
            # Read after the claim committed: every sample below it that is not marked.
            first = _oldest_raw_before(conn, kind_name, claim)
            wm = floor_time(first, MINUTE) if first is not None else claim
        stop = min(claim, end, wm + timedelta(minutes=MAX_MINUTES_PER_PASS))
        t = wm
        while t < stop:
            e = min(stop, t + MINUTE_CHUNK)
            minutes += roll_up_minutes(conn, kind_name, t, e)
            t = e
            if time.monotonic() >= deadline:
                break
        _set_watermark(conn, key, t)
    dirty = roll_up_dirty_minutes(conn, kind_name, deadline=deadline)
    out = {"minutes": minutes, "dirty": dirty}
    # Hours after 5-minute buckets (both from minutes), days after the hours of this pass.
    for bucket_s in COARSE_LEVELS:
        k = f"{kind_name}:{bucket_s}"
        since = _watermark(conn, k) or datetime(1970, 1, 1, tzinfo=UTC)
        buckets, _ = stale_coarse_buckets(conn, kind_name, bucket_s, since)
        out[str(bucket_s)] = roll_up_coarse(conn, kind_name, bucket_s, buckets)
        # Finer rows commit at most a few minutes after their computed_at.
        _set_watermark(conn, k, max(since, datetime.now(UTC) - COMPUTED_AT_SLACK))
        filled = fill_level_history(conn, kind_name, bucket_s)
        if filled is not None:
            out[f"{bucket_s}:fill"] = filled
    return out


def run_minute_pass(engine: Engine, kind_name: str, now: datetime | None = None
                    ) -> dict[str, int]:
    """One rollup pass of a kind as the worker runs it: the claim in a short transaction of
    its own, then the pass itself in another."""
    with engine.begin() as conn:
        claim_minutes(conn, kind_name, now)
    with engine.begin() as conn:
        return roll_up_recent(conn, kind_name, now)


# Backlog per kind, for the health endpoint (polled, so index probes only): marked minutes,
# the oldest of them, the watermark, and the oldest raw sample at or after the watermark
# (oldest_raw_sql's index probes).
BACKLOG_SQL = " UNION ALL ".join(
    f"""SELECT '{name}' AS kind,
    (SELECT count(*) FROM rollup_dirty_minutes WHERE kind = '{name}') AS dirty_minutes,
    (SELECT min(minute) FROM rollup_dirty_minutes WHERE kind = '{name}') AS oldest_dirty,
    (SELECT rolled_until FROM rollup_watermarks WHERE kind = '{name}:60') AS rolled_until,
    ({oldest_raw_sql(name, f"r.time >= coalesce((SELECT rolled_until FROM rollup_watermarks "
                           f"WHERE kind = '{name}:60'), '-infinity')")}) AS oldest_new"""
    for name in KINDS)


@dataclass(frozen=True)
class KindBacklog:
    dirty_minutes: int
    # The oldest sample not yet in the minute rollups (a marked minute counts from its start).
    oldest_unrolled_at: datetime | None
    rolled_until: datetime | None


def backlog_from_rows(rows: Sequence[Sequence[Any]]) -> dict[str, KindBacklog]:
    out = {}
    for kind, dirty, oldest_dirty, rolled_until, oldest_new in rows:
        oldest = min((t for t in (oldest_dirty, oldest_new) if t is not None), default=None)
        out[kind] = KindBacklog(int(dirty), oldest, rolled_until)
    return out


# --- a level added after its finer rows: history filled from the newest back -----------


def fill_key(kind_name: str, bucket_s: int) -> str:
    return f"{kind_name}:{bucket_s}:fill"


def fill_level_history(conn: Connection, kind_name: str, bucket_s: int,
                       budget_s: float = FILL_SECONDS_PER_PASS) -> int | None:
    """Roll the `bucket_s` buckets older than the level's fill mark, newest first.

    The migration that adds a level to a database holding finer rows sets the mark (in
    `rollup_watermarks`, key `fill_key`) to the first bucket after it ran: from there on the
    stale-bucket pass keeps the level complete, and queries read the finer level for ranges
    that start before the mark. Each call rolls spans (`coarse_span`) back from the mark for
    `budget_s` seconds (one span at least) and moves the mark behind them; the mark goes
    once no finer row is left before it. None when the level has no mark."""
    kind = KINDS[kind_name]
    finer = finer_level(bucket_s)
    key = fill_key(kind_name, bucket_s)
    mark = _watermark(conn, key)
    if mark is None:
        return None
    span = coarse_span(bucket_s)
    deadline = time.monotonic() + budget_s
    orgs = list(conn.execute(text("SELECT id FROM orgs ORDER BY id")).scalars())
    written = 0
    while True:
        # Each org's newest finer row before the mark: gaps in the history are skipped.
        last: dict[uuid.UUID, datetime] = {}
        for org in orgs:
            t = conn.execute(text(
                f"SELECT max(bucket_start) FROM {kind.table} WHERE org_id = :o "
                f"AND bucket_s = :f AND bucket_start < :m"),
                {"o": org, "f": finer, "m": mark}).scalar()
            if t is not None:
                last[org] = t
        if not last:
            conn.execute(text("DELETE FROM rollup_watermarks WHERE kind = :k"), {"k": key})
            return written
        end = floor_time(max(last.values()), bucket_s) + timedelta(seconds=bucket_s)
        start = end - span
        for org, t in last.items():
            if t >= start:
                written += _roll_coarse_span(conn, kind, org, bucket_s, finer, start, end)
        mark = start
        _set_watermark(conn, key, mark)
        if time.monotonic() >= deadline:
            return written


def apply_rollup_retention(conn: Connection) -> dict[str, int]:
    """Delete rollups older than each org's rollup retention (default 400 days)."""
    out: dict[str, int] = {}
    for kind in KINDS.values():
        out[kind.table] = int(conn.execute(text(
            f"DELETE FROM {kind.table} r USING orgs o WHERE r.org_id = o.id "
            "AND r.bucket_start < now() - make_interval(days => o.rollup_retention_days)"))
            .rowcount or 0)
    return out
