"""Raw reads: every selected series' samples in a range as numpy columns (epoch seconds,
values, failure flags), packed per series in SQL so millions of samples arrive as a few byte
strings, and grouped into exact distributions per group (and window); mesh rows through
their series ids (mesh_series, then mesh_raw), and the loss reasons of a few mesh series
counted from their raw rows."""

from __future__ import annotations

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
    QueryError,
    load_fleet,
    where_clauses,
)
from stormwatch.services.analytics.group_stats import sort_by_group_then_value
from stormwatch.services.analytics.grouping import GroupFn, dense_ids, group_key
from stormwatch.services.analytics.stats import Distribution

# Raw reads stop past this many samples: more are refused (a rollup level answers instead).
RAW_ROW_LIMIT = 5_000_000
# Storage latency less the round trip to the endpoint (seed 000 Tables 1-2), over a raw row.
ADJUSTED_RAW = ("CASE WHEN status = 0 AND rtt_us IS NOT NULL "
                "THEN greatest(latency_us - rtt_us, 0) END")


@dataclass
class RawSeries:
    """One series' raw samples in a range, as columns: epoch seconds, values (NaN without
    one) and failure flags."""

    keys: tuple[Any, ...]
    t: np.ndarray
    v: np.ndarray
    failed: np.ndarray


async def read_raw(session: AsyncSession, kind: str, value_sql: str, where: list[str],
                   params: dict[str, Any]) -> list[RawSeries]:
    """Every selected series' raw samples in [:s, :e) of the org :org, read as packed
    binary columns (one row per series: a few million samples reach numpy as a few byte
    strings per series instead of a Python row each). At most RAW_ROW_LIMIT + 1 samples are
    read, so the caller can refuse more."""
    if kind == "mesh":
        return await _read_mesh_raw(session, where, params)
    spec = KIND_SPECS[kind]
    nk = len(spec.keys)
    keys_sql = ", ".join(spec.keys)
    inner = (f"SELECT {keys_sql}, time, ({value_sql})::float8 AS v, "
             f"({spec.raw_failure}) AS failed FROM {spec.raw_table} WHERE org_id = :org "
             f"AND time >= :s AND time < :e" + "".join(f" AND {c}" for c in where)
             + f" LIMIT {RAW_ROW_LIMIT + 1}")
    rows = (await session.execute(text(
        f"SELECT {keys_sql}, "
        f"string_agg(float8send(extract(epoch FROM time)::float8), ''::bytea), "
        f"string_agg(float8send(coalesce(v, 'NaN')), ''::bytea), "
        f"string_agg(boolsend(failed), ''::bytea) FROM ({inner}) r GROUP BY {keys_sql}"),
        params)).all()
    return [RawSeries(tuple(r[:nk]), np.frombuffer(r[nk], dtype=">f8").astype(np.float64),
                      np.frombuffer(r[nk + 1], dtype=">f8").astype(np.float64),
                      np.frombuffer(r[nk + 2], dtype=np.uint8).astype(bool)) for r in rows]


def group_packed_raw(series: Sequence[RawSeries], group: GroupFn, window_s: int | None
                     ) -> dict[Any, Distribution]:
    """Exact distributions per group (and window) from read_raw's series."""
    index: dict[Any, int] = {}
    cache: dict[tuple[Any, ...], Any] = {}
    gids: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    fails: list[np.ndarray] = []
    for r in series:
        g = group_key(group, r.keys, 0.0, None, cache)
        if g is None:
            continue
        gids.append(dense_ids(index, g, r.t, window_s))
        vals.append(r.v)
        fails.append(r.failed)
    if not index:
        return {}
    n = len(index)
    gid = np.concatenate(gids)
    v = np.concatenate(vals)
    # Samples without a value that did not fail (none today) still count as samples.
    samples = np.bincount(gid, minlength=n)
    failures = np.bincount(gid, weights=np.concatenate(fails), minlength=n)
    ok = np.isfinite(v)
    gid, v = gid[ok], v[ok]
    order = sort_by_group_then_value(gid, v)  # each group's slice is sorted
    gid, v = gid[order], v[order]
    bounds = np.searchsorted(gid, np.arange(n + 1))
    out: dict[Any, Distribution] = {}
    for g, j in index.items():
        d = Distribution.exact(v[bounds[j]:bounds[j + 1]], failures=int(failures[j]),
                               presorted=True)
        d.moments.samples = int(samples[j])
        out[g] = d
    return out


# --- raw mesh rows (migration 0014) ----------------------------------------------------
# A raw mesh row carries a series id, not the series' keys. A read picks the org's series
# that match the filters in mesh_series (hundreds of rows at most), then reads mesh_raw for
# those ids in the range, where the (series_id, time) b-tree gives the planner a bitmap scan
# that visits each heap page of the range once, however many series share it. (Through the
# mesh_samples view the planner probed the index once per series, revisiting every page of
# the range for each: bench-query's raw_summary_2m went from 0.9 s to 2.8 s.)

# 2000-01-01 (PostgreSQL's epoch) in Unix seconds: timestamptz_send sends microseconds since.
PG_EPOCH_S = 946_684_800.0
MESH_SERIES_COLUMNS = "id, org_id, src_agent_id, dst_agent_id, payload_bytes"


async def mesh_series_ids(session: AsyncSession, org_cond: str, where: Sequence[str],
                          params: dict[str, Any]) -> dict[int, tuple[Any, ...]]:
    """The mesh series matching `org_cond` and the filters `where` (conditions on
    src_agent_id, dst_agent_id and payload_bytes): id -> (org_id, src, dst, payload)."""
    rows = (await session.execute(text(
        f"SELECT {MESH_SERIES_COLUMNS} FROM mesh_series WHERE {org_cond}"
        + "".join(f" AND {c}" for c in where)), params)).all()
    return {int(r[0]): tuple(r[1:]) for r in rows}


# A FROM item with mesh_samples' columns for the series ids :sids in [:s, :e): mesh_raw read
# by series id and time, the keys joined from mesh_series (by primary key).
MESH_RAW_FROM = (
    "(SELECT s.org_id, s.src_agent_id, s.dst_agent_id, s.payload_bytes, r.time, r.round, "
    "r.rtt_us, r.status FROM mesh_raw r JOIN mesh_series s ON s.id = r.series_id "
    "WHERE r.series_id = ANY(CAST(:sids AS integer[])) AND r.time >= :s AND r.time < :e)")


async def _read_mesh_raw(session: AsyncSession, where: list[str], params: dict[str, Any]
                         ) -> list[RawSeries]:
    """read_raw for mesh: the series from mesh_series, then their rows of mesh_raw packed
    per series id in the rows' own binary forms (timestamptz_send: microseconds since
    2000; the RTT with -1 for none, ingest keeps RTTs >= 0; the status), decoded and
    turned into values and failures by numpy."""
    series = await mesh_series_ids(session, "org_id = :org", where, params)
    if not series:
        return []
    # The per-series aggregates of a fleet's hour (~30 MB for 2 M samples) stay in memory
    # rather than spilling to disk under the default 4 MB; JIT compiling costs more than it
    # saves on this plan.
    await session.execute(text("SET LOCAL work_mem = '64MB'"))
    await session.execute(text("SET LOCAL jit = off"))
    rows = (await session.execute(text(
        "SELECT series_id, string_agg(timestamptz_send(time), ''::bytea), "
        "string_agg(int4send(coalesce(rtt_us, -1)), ''::bytea), "
        "string_agg(int2send(status), ''::bytea) FROM (SELECT series_id, time, rtt_us, status "
        "FROM mesh_raw WHERE series_id = ANY(CAST(:sids AS integer[])) AND time >= :s "
        f"AND time < :e LIMIT {RAW_ROW_LIMIT + 1}) r GROUP BY series_id"),
        {"sids": list(series), "s": params["s"], "e": params["e"]})).all()
    out = []
    for r in rows:
        t = np.frombuffer(r[1], dtype=">i8").astype(np.float64) * 1e-6 + PG_EPOCH_S
        rtt = np.frombuffer(r[2], dtype=">i4")
        status = np.frombuffer(r[3], dtype=">i2")
        ok = (status == 0) & (rtt >= 0)
        out.append(RawSeries(series[int(r[0])][1:], t, np.where(ok, rtt, np.nan),
                             status != 0))
    return out


# Loss reasons are read from raw rows (rollups keep the loss count, not its causes): a few
# pairs at a time, over at most a week.
STATUS_MAX_SERIES = 50
STATUS_MAX_SPAN = timedelta(days=7)


async def mesh_status_counts(session: AsyncSession, org_id: uuid.UUID, f: Filters
                             ) -> tuple[dict[int, int], datetime, datetime]:
    """Failed mesh rounds of the selected series by status code, over the part of the range
    raw samples still hold (at most STATUS_MAX_SPAN before its end); with that part's
    bounds. Few series only: the loss rows are found by scanning each series' rows."""
    f.validate()
    spec = KIND_SPECS["mesh"]
    fleet = await load_fleet(session, org_id)
    params: dict[str, Any] = {"org": org_id}
    where, _ = where_clauses(spec, fleet, f, params)
    series = await mesh_series_ids(session, "org_id = :org", where, params)
    if len(series) > STATUS_MAX_SERIES:
        raise QueryError("src", f"loss reasons are read from raw samples of at most "
                         f"{STATUS_MAX_SERIES} series; these filters select {len(series)}: "
                         "choose a source and destination")
    start = max(f.start, f.end - STATUS_MAX_SPAN)
    if fleet.raw_retention_days:
        start = max(start, datetime.now(UTC) - timedelta(days=fleet.raw_retention_days))
    start = min(start, f.end)
    if not series:
        return {}, start, f.end
    rows = (await session.execute(text(
        "SELECT status, count(*) FROM mesh_raw WHERE series_id = ANY(CAST(:sids AS integer[])) "
        "AND time >= :s AND time < :e AND status <> 0 GROUP BY status"),
        {"sids": list(series), "s": start, "e": f.end})).all()
    return {int(r[0]): int(r[1]) for r in rows}, start, f.end
