"""Stores a validated batch: reference checks, partitions, then one COPY transaction; and the
rows COPY writes (binary for mesh, records for the rest)."""

from __future__ import annotations

import time
import uuid
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import numpy as np
from numpy.typing import NDArray

from stormwatch.services.ingest.parse import EPOCH, BatchError, ParsedBatch
from stormwatch.services.rollups import mark_minutes

# Rows for COPY: the encoding lives beside the only code that writes it.

def _opt_int(arr: np.ndarray | None, n: int) -> list[int | None]:
    if arr is None:
        return [None] * n
    return [None if v != v else int(v) for v in arr.tolist()]


def _opt_float(arr: np.ndarray | None, n: int) -> list[float | None]:
    if arr is None:
        return [None] * n
    return [None if v != v else float(v) for v in arr.tolist()]


def _datetimes(t_us: np.ndarray) -> list[datetime]:
    base = EPOCH
    td = timedelta
    return [base + td(microseconds=v) for v in t_us.tolist()]


# PostgreSQL's binary COPY framing: signature, flags, header extension length; and trailer.
COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" * 2
COPY_TRAILER = b"\xff\xff"
PG_EPOCH_US = 946_684_800_000_000  # 2000-01-01 UTC, timestamptz's zero, in unix microseconds


def _field(name: str, size: int, kind: str) -> list[tuple[str, str]]:
    """One binary COPY field: its big-endian int32 length, then the value."""
    return [(f"{name}_len", ">i4"), (name, kind if size == 0 else f"V{size}")]


def _mesh_row_dtype(with_rtt: bool) -> np.dtype:
    fields: list[tuple[str, str]] = [("nfields", ">i2")]
    fields += _field("time", 0, ">i8") + _field("series", 0, ">i4")
    fields += _field("rtt", 0, ">i4") if with_rtt else [("rtt_len", ">i4")]
    fields += _field("round", 0, ">i8") + _field("status", 0, ">i2")
    return np.dtype(fields)  # packed: no padding between fields, as COPY wants


_MESH_ROW = {True: _mesh_row_dtype(True), False: _mesh_row_dtype(False)}


def mesh_series_keys(batch: ParsedBatch
                     ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """The batch's distinct mesh series as (peer index, payload bytes) arrays, and for every
    row the index of its series among them."""
    m = batch.mesh
    assert m is not None
    # payload_bytes is at most 64 MiB (parse_batch), so both fit one int64 key.
    key = m["peer_idx"].astype(np.int64) << 32 | m["payload_bytes"].astype(np.int64)
    uniq, inverse = np.unique(key, return_inverse=True)
    return uniq >> 32, uniq & 0xFFFF_FFFF, inverse.astype(np.int64)


def mesh_copy_data(batch: ParsedBatch, series_ids: NDArray[np.int32]) -> bytes:
    """The mesh section as one binary COPY stream for MESH_RAW_COLUMNS, built with numpy;
    `series_ids` is every row's mesh_series id.

    Rows with and without an RTT have different layouts (a NULL is a -1 length and no
    value), so each group is one fixed-width record array; rows go in as two runs.
    """
    m = batch.mesh
    assert m is not None
    has_rtt = ~np.isnan(m["rtt_us"])
    parts = [COPY_HEADER]
    for with_rtt in (True, False):
        sel = has_rtt if with_rtt else ~has_rtt
        n = int(sel.sum())
        if not n:
            continue
        dtype = _MESH_ROW[with_rtt]
        rows = np.empty(n, dtype=dtype)
        rows["nfields"] = len(MESH_RAW_COLUMNS)
        for name in dtype.names or ():
            if name.endswith("_len") and name[:-4] in (dtype.names or ()):
                rows[name] = dtype[name[:-4]].itemsize
        rows["time"] = m["time_us"][sel] - PG_EPOCH_US
        rows["series"] = series_ids[sel]
        if with_rtt:
            rows["rtt"] = m["rtt_us"][sel]
        else:
            rows["rtt_len"] = -1
        rows["round"] = m["round"][sel]
        rows["status"] = m["status"][sel]
        parts.append(rows.tobytes())
    parts.append(COPY_TRAILER)
    return b"".join(parts)


# The columns of mesh_raw that ingest writes, in the order of mesh_copy_data's fields.
MESH_RAW_COLUMNS = ("time", "series_id", "rtt_us", "round", "status")
QUORUM_COLUMNS = ("time", "org_id", "agent_id", "group_name", "round", "k", "n", "latency_us",
                  "status")
STORAGE_COLUMNS = ("time", "org_id", "agent_id", "target_id", "op", "variant", "content",
                   "size_bytes", "stored_bytes", "copies", "concurrency", "attempt",
                   "latency_us", "ttfb_us", "rtt_us", "bytes_per_s", "status", "error_class")
THROUGHPUT_COLUMNS = ("time", "org_id", "src_agent_id", "dst_agent_id", "proto",
                      "experiment_id", "direction", "bytes_per_s", "loss_ratio", "jitter_us")


def quorum_records(batch: ParsedBatch, org_id: uuid.UUID) -> list[tuple[Any, ...]]:
    q = batch.quorum
    assert q is not None
    n = q["n"]
    groups = q["groups"]
    return list(zip(_datetimes(q["time_us"]), [org_id] * n, [batch.agent_id] * n,
                    [groups[i] for i in q["group_idx"].tolist()],
                    q["round"].astype(np.int64).tolist(), q["k"].astype(np.int64).tolist(),
                    q["n_members"].astype(np.int64).tolist(), _opt_int(q["latency_us"], n),
                    q["status"].tolist(), strict=True))


def storage_records(batch: ParsedBatch, org_id: uuid.UUID) -> list[tuple[Any, ...]]:
    s = batch.storage
    assert s is not None
    n = s["n"]
    targets = s["targets"]
    return list(zip(_datetimes(s["time_us"]), [org_id] * n, [batch.agent_id] * n,
                    [targets[i] for i in s["target_idx"].tolist()], s["op"], s["variant"],
                    s["content"], s["size_bytes"].astype(np.int64).tolist(),
                    _opt_int(s["stored_bytes"], n), s["copies"].astype(np.int64).tolist(),
                    s["concurrency"].astype(np.int64).tolist(),
                    s["attempt"].astype(np.int64).tolist(), _opt_int(s["latency_us"], n),
                    _opt_int(s["ttfb_us"], n), _opt_int(s["rtt_us"], n),
                    _opt_float(s["bytes_per_s"], n), s["status"].tolist(), s["error_class"],
                    strict=True))


def throughput_records(batch: ParsedBatch, org_id: uuid.UUID) -> list[tuple[Any, ...]]:
    t = batch.throughput
    assert t is not None
    n = t["n"]
    peers = t["peers"]
    return list(zip(_datetimes(t["time_us"]), [org_id] * n, [batch.agent_id] * n,
                    [peers[i] for i in t["peer_idx"].tolist()], t["proto"],
                    t["experiment_id"], t["direction"], t["bytes_per_s"].tolist(),
                    _opt_float(t["loss_ratio"], n), _opt_int(t["jitter_us"], n), strict=True))


_known_partitions: set[tuple[str, int]] = set()
class AgentGone(Exception):
    """The batch's agent was deleted while its batch was in flight (authenticated before the
    deletion committed, stored after): nothing of the batch is written."""


_TABLE_FOR = {"mesh": "mesh_raw", "quorum": "quorum_samples", "storage": "storage_samples",
              "throughput": "throughput_samples"}


def batch_minutes(time_us: NDArray[np.int64]) -> list[datetime]:
    """The distinct minute starts of a batch's sample times (microseconds since the epoch)."""
    return [EPOCH + timedelta(minutes=int(m)) for m in np.unique(time_us // 60_000_000)]


def oldest_sample(batch: ParsedBatch) -> datetime | None:
    """The time of the batch's oldest sample, any section (None when it holds none)."""
    oldest = [int(d["time_us"].min()) for d in (batch.mesh, batch.quorum, batch.storage,
                                                 batch.throughput) if d is not None and d["n"]]
    return EPOCH + timedelta(microseconds=min(oldest)) if oldest else None


def _keep_rows(data: dict[str, Any], keep: NDArray[np.bool_]) -> None:
    """Narrows a section's columns to the rows kept (the dictionaries stay whole)."""
    n = int(data["n"])
    for key, col in data.items():
        if key in ("n", "peers") or col is None:
            continue
        if isinstance(col, np.ndarray) and len(col) == n:
            data[key] = col[keep]
        elif isinstance(col, list) and len(col) == n:
            data[key] = [v for v, k in zip(col, keep.tolist(), strict=True) if k]
    data["n"] = int(keep.sum())


async def check_references(conn: asyncpg.Connection, org_id: uuid.UUID,
                           batch: ParsedBatch) -> dict[str, int]:
    """Every agent and target a batch names must belong to the sender's org, and every
    storage target must be assigned to the sending agent.

    Ids are looked up within the org only, so another org's agent is reported exactly like
    an id that does not exist: the answer reveals nothing about other orgs. Rows about a
    peer this org has deleted are removed from the batch and counted, returned as
    {section: rows set aside}; the rest of the batch is stored.
    """
    set_aside: dict[str, int] = {}
    if batch.referenced_agents:
        ids = list(batch.referenced_agents)
        rows = await conn.fetch("SELECT id FROM agents WHERE org_id = $1 AND id = ANY($2::uuid[])",
                                org_id, ids)
        known = {r["id"] for r in rows}
        deleted: set[uuid.UUID] = set()
        if len(known) < len(ids):
            deleted = {r["id"] for r in await conn.fetch(
                "SELECT id FROM deleted_agents WHERE org_id = $1 AND id = ANY($2::uuid[])",
                org_id, [i for i in ids if i not in known])}
        # Every id is checked before anything is set aside: a never-owned one refuses it all.
        for section in ("mesh", "throughput"):
            data = getattr(batch, section)
            if data is None:
                continue
            for i, peer in enumerate(data["peers"]):
                if peer not in known and peer not in deleted:
                    raise BatchError([section, "peers", i], f"unknown agent id {peer}")
        for section in ("mesh", "throughput"):
            data = getattr(batch, section)
            if data is None or not deleted:
                continue
            gone = np.array([p in deleted for p in data["peers"]], dtype=bool)
            drop = gone[data["peer_idx"]] if data["n"] else np.zeros(0, dtype=bool)
            if drop.any():
                set_aside[section] = int(drop.sum())
                _keep_rows(data, ~drop)
    if batch.referenced_targets:
        exists = await conn.fetchval("SELECT to_regclass('storage_targets') IS NOT NULL")
        if not exists:
            raise BatchError(["storage", "targets", 0], "no storage targets are configured")
        # A target counts as the agent's when it is on every agent or assigned to this one
        # (services/storage_targets.py); disabled ones too, for samples still in flight.
        rows = await conn.fetch(
            "SELECT t.id, t.assign_all OR EXISTS (SELECT 1 FROM storage_target_agents a "
            "WHERE a.target_id = t.id AND a.agent_id = $3) AS assigned "
            "FROM storage_targets t WHERE t.org_id = $1 AND t.id = ANY($2::uuid[])",
            org_id, list(batch.referenced_targets), batch.agent_id)
        assigned = {r["id"]: r["assigned"] for r in rows}
        assert batch.storage is not None
        for i, target in enumerate(batch.storage["targets"]):
            if target not in assigned:
                raise BatchError(["storage", "targets", i], f"unknown storage target id {target}")
            if not assigned[target]:
                raise BatchError(["storage", "targets", i],
                                 f"storage target {target} is not assigned to this agent")
    return set_aside


async def ensure_partitions(conn: asyncpg.Connection, batch: ParsedBatch) -> None:
    """Creates missing daily partitions outside the batch transaction (cached per process)."""
    for section, table in _TABLE_FOR.items():
        data = getattr(batch, section)
        if data is None or not data["n"]:
            continue
        t = data["time_us"]
        # A batch spans seconds, so its first and last day cover it (time_us is not sorted).
        for day in range(int(t.min()) // 86_400_000_000, int(t.max()) // 86_400_000_000 + 1):
            if (table, day) in _known_partitions:
                continue
            await conn.execute(
                "SELECT sw_ensure_partitions($1, to_timestamp($2), to_timestamp($2))",
                table, day * 86400.0)
            _known_partitions.add((table, day))


_SERIES_IDS = (
    "SELECT s.id, k.i FROM unnest($3::uuid[], $4::int[]) WITH ORDINALITY AS k(dst, payload, i) "
    "JOIN mesh_series s ON s.org_id = $1 AND s.src_agent_id = $2 AND s.dst_agent_id = k.dst "
    "AND s.payload_bytes = k.payload")


async def ensure_mesh_series_ids(conn: asyncpg.Connection, org_id: uuid.UUID,
                                 batch: ParsedBatch) -> NDArray[np.int32]:
    """Every mesh row's series id, creating the series first seen in this batch."""
    assert batch.mesh is not None
    peer_idx, payloads, inverse = mesh_series_keys(batch)
    args = (org_id, batch.agent_id, [batch.mesh["peers"][i] for i in peer_idx.tolist()],
            payloads.tolist())
    rows = await conn.fetch(_SERIES_IDS, *args)
    if len(rows) < len(peer_idx):
        # Only missing series are inserted: a conflicting insert would still use up an id.
        await conn.execute(
            "INSERT INTO mesh_series (org_id, src_agent_id, dst_agent_id, payload_bytes) "
            "SELECT $1, $2, k.dst, k.payload FROM unnest($3::uuid[], $4::int[]) AS k(dst, payload)"
            " WHERE NOT EXISTS (SELECT 1 FROM mesh_series s WHERE s.org_id = $1 AND "
            "s.src_agent_id = $2 AND s.dst_agent_id = k.dst AND s.payload_bytes = k.payload) "
            "ORDER BY 3, 4 ON CONFLICT DO NOTHING", *args)
        rows = await conn.fetch(_SERIES_IDS, *args)
    ids = np.zeros(len(peer_idx), dtype=np.int32)
    for r in rows:
        ids[r["i"] - 1] = r["id"]
    return ids[inverse]


async def store_batch(conn: asyncpg.Connection, org_id: uuid.UUID,
                      batch: ParsedBatch) -> tuple[bool, dict[str, int]]:
    """Writes the batch once. Returns (duplicate, accepted counts)."""
    counts = {s: batch.count(s) for s in _TABLE_FOR}
    async with conn.transaction():
        # The batch row goes first: a concurrent retry of the same batch waits on it and
        # then sees the conflict, so two copies can never both commit.
        try:
            inserted = await conn.fetchval(
                "INSERT INTO ingest_batches (agent_id, batch_id, org_id, mesh_rows, quorum_rows,"
                " storage_rows, throughput_rows, oldest_sample_at)"
                " VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING RETURNING true",
                batch.agent_id, batch.batch_id, org_id, counts["mesh"], counts["quorum"],
                counts["storage"], counts["throughput"], oldest_sample(batch))
        except asyncpg.ForeignKeyViolationError as exc:
            # The row's key share on its agent waits for a deletion in progress, then fails.
            if exc.constraint_name == "fk_ingest_batches_agent_id_agents":
                raise AgentGone from None
            raise
        if not inserted:
            stored = await conn.fetchrow(
                "SELECT mesh_rows, quorum_rows, storage_rows, throughput_rows FROM ingest_batches"
                " WHERE agent_id = $1 AND batch_id = $2", batch.agent_id, batch.batch_id)
            return True, {"mesh": stored["mesh_rows"], "quorum": stored["quorum_rows"],
                          "storage": stored["storage_rows"],
                          "throughput": stored["throughput_rows"]}
        if counts["mesh"]:
            # The bulk of every batch: encoded by numpy straight into COPY's binary format
            # (a memoryview, since asyncpg would take plain bytes for a file name).
            series_ids = await ensure_mesh_series_ids(conn, org_id, batch)
            await conn.copy_to_table("mesh_raw", source=memoryview(
                mesh_copy_data(batch, series_ids)), columns=list(MESH_RAW_COLUMNS),
                format="binary")
        jobs: list[tuple[str, tuple[str, ...], Any]] = [
            ("quorum_samples", QUORUM_COLUMNS, quorum_records if counts["quorum"] else None),
            ("storage_samples", STORAGE_COLUMNS, storage_records if counts["storage"] else None),
            ("throughput_samples", THROUGHPUT_COLUMNS,
             throughput_records if counts["throughput"] else None),
        ]
        for table, columns, make in jobs:
            if make is None:
                continue
            await conn.copy_records_to_table(table, records=make(batch, org_id),
                                             columns=list(columns))
        # Last, so the claim row's share lock is held only until commit: minutes a rollup pass
        # has claimed already are marked for a re-roll (services/rollups.py, claim_minutes).
        for section in _TABLE_FOR:
            data = getattr(batch, section)
            if data is not None and data["n"]:
                await mark_minutes(conn, section, org_id, batch_minutes(data["time_us"]))
    return False, counts


_retention_cache: dict[uuid.UUID, tuple[float, int]] = {}


async def raw_retention_days(conn: asyncpg.Connection, org_id: uuid.UUID, default: int) -> int:
    """The org's raw retention, read at most once a minute per process (every batch asks)."""
    cached = _retention_cache.get(org_id)
    now = time.monotonic()
    if cached and now - cached[0] < 60:
        return cached[1]
    value = await conn.fetchval("SELECT raw_retention_days FROM orgs WHERE id = $1", org_id)
    days = int(value or default)
    _retention_cache[org_id] = (now, days)
    return days
