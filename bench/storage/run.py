"""Bytes per raw sample on each storage engine (issue 19).

Loads StormCloud's base workload (8 agents, 100 rounds/s, one sample per peer per round with
the self-loop included: 8 x 8 series, 6,400 samples/s) for --minutes (default one hour)
through the product's ingest path (parse_batch, check_references, ensure_partitions and
store_batch: what POST /api/v1/ingest/batches runs after auth), into a throwaway cluster per
engine: plain PostgreSQL, and TimescaleDB when the extension is installed (that cluster
preloads it, so migration 0001 takes the hypertable branch). Each agent sends one batch per
10 s of rounds, as the agent does, four batches in flight at a time.

RTTs follow the topology (self-loop, same zone, other zone, other region) with lognormal noise,
rare spikes and 0.1% losses (status 1, no RTT), so the values compress like measurements, not
like constants. The rollups of the loaded hour are computed with the product's own rollup code
(1-minute, 5-minute and hour levels) to show their share beside the raw tables.

Counted for the raw tables: heap, indexes and TOAST of every partition or chunk of the four
raw tables (only mesh is loaded; the others are empty but counted), plus the mesh series table.
On TimescaleDB "compressed" is after compress_chunk on every chunk with the compression
settings the migrations set. Ends with
  storage: postgres <b> B/sample, timescaledb <b> B/sample raw, <c> B/sample compressed
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np
import psycopg

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "backend"))

from stormwatch.devtools.bootstrap import create_org_sync
from stormwatch.devtools.services import (
    PostgresServer,
    free_port,
    pg_bin,
    run_migrations,
)
from stormwatch.services.ingest.parse import make_limits, parse_batch
from stormwatch.services.ingest.store import (
    check_references,
    ensure_partitions,
    store_batch,
)

AGENTS = 8
ROUNDS_PER_S = 100
BATCH_S = 10
IN_FLIGHT = 4
LOSS = 0.001
# Placement of the 8 agents: (region, zone); RTT medians by relation, in microseconds
# (order of public intra-zone, cross-zone and cross-region measurements).
PLACEMENT = [(r, z) for r in range(2) for z in range(2) for _ in range(2)]
BASE_RTT_US = {"self": 40.0, "zone": 250.0, "region": 900.0, "wan": 22_000.0}
# Before migration 0014 mesh_samples is the table; after it, a view over mesh_raw and
# mesh_series. Views and tables that do not exist count nothing.
RAW_TABLES = ("mesh_samples", "mesh_raw", "mesh_series", "quorum_samples", "storage_samples",
              "throughput_samples")


def log(msg: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {msg}", flush=True)


def timescale_installed() -> bool:
    out = subprocess.run([str(pg_bin() / "pg_config"), "--pkglibdir"], capture_output=True,
                         text=True, check=True).stdout.strip()
    return Path(out, "timescaledb.so").exists()


def pair_model(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per (src, dst) median RTT and noise width."""
    med = np.empty((AGENTS, AGENTS))
    for i, (ri, zi) in enumerate(PLACEMENT):
        for j, (rj, zj) in enumerate(PLACEMENT):
            rel = ("self" if i == j else "zone" if (ri, zi) == (rj, zj)
                   else "region" if ri == rj else "wan")
            med[i, j] = BASE_RTT_US[rel] * rng.uniform(0.85, 1.2)
    sigma = np.where(med > 10_000, 0.02, 0.18)
    return med, sigma


def make_batch(rng: np.random.Generator, agent: int, ids: list[str], med: np.ndarray,
               sigma: np.ndarray, first_round: int, start_us: int) -> dict[str, Any]:
    rounds = BATCH_S * ROUNDS_PER_S
    n = rounds * AGENTS
    r = np.repeat(np.arange(rounds), AGENTS)
    peer = np.tile(np.arange(AGENTS), rounds)
    # Probes of a round go out back to back; a reply's time is its send time.
    t = start_us + r * (1_000_000 // ROUNDS_PER_S) + peer * 41 + rng.integers(0, 30, n)
    rtt = med[agent, peer] * np.exp(sigma[agent, peer] * rng.standard_normal(n))
    spikes = rng.random(n) < 0.005
    rtt[spikes] += rng.exponential(5_000.0, spikes.sum())
    rtt_us = np.maximum(np.round(rtt), 1).astype(np.int64)
    lost = rng.random(n) < LOSS
    rtt_list: list[int | None] = rtt_us.tolist()
    for i in np.flatnonzero(lost):
        rtt_list[i] = None
    return {"batch_id": str(uuid.uuid4()), "agent_id": ids[agent],
            "mesh": {"peers": ids, "time_us": t.tolist(), "peer_idx": peer.tolist(),
                     "round": (first_round + r).tolist(), "payload_bytes": [64] * n,
                     "rtt_us": rtt_list, "status": lost.astype(np.int64).tolist()}}


async def load(dsn: str, org_id: uuid.UUID, ids: list[str], minutes: int,
               start: datetime) -> int:
    """Sends every batch through the ingest service, IN_FLIGHT at a time; returns samples."""
    rng = np.random.default_rng(19)
    med, sigma = pair_model(rng)
    start_us = int(start.timestamp() * 1_000_000)
    jobs = [(b, a) for b in range(minutes * 60 // BATCH_S) for a in range(AGENTS)]
    queue: asyncio.Queue[tuple[int, int]] = asyncio.Queue()
    for j in jobs:
        queue.put_nowait(j)
    total = 0
    limits = make_limits(datetime.now(UTC), 14, 300, 600_000_000)

    async def sender() -> None:
        nonlocal total
        conn = await asyncpg.connect(dsn)
        try:
            while True:
                try:
                    b, a = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                body = make_batch(rng, a, ids, med, sigma, b * BATCH_S * ROUNDS_PER_S,
                                  start_us + b * BATCH_S * 1_000_000)
                batch = parse_batch(body, limits)
                await check_references(conn, org_id, batch)
                await ensure_partitions(conn, batch)
                duplicate, counts = await store_batch(conn, org_id, batch)
                assert not duplicate
                total += counts["mesh"]
                if (b * AGENTS + a) % (AGENTS * 60) == 0:
                    log(f"  batch {b * AGENTS + a}/{len(jobs)}")
        finally:
            await conn.close()

    await asyncio.gather(*(sender() for _ in range(IN_FLIGHT)))
    return total


def relation_bytes(conn: psycopg.Connection, timescale: bool,
                   tables: tuple[str, ...] = RAW_TABLES) -> dict[str, int]:
    """Heap, index and TOAST bytes of tables (every partition or chunk): the raw ones unless
    told otherwise."""
    out = {"heap": 0, "index": 0, "toast": 0}
    for table in tables:
        kind = conn.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)",
                            (table,)).fetchone()
        if kind is None or kind[0] not in ("r", "p"):
            continue
        is_hyper = timescale and conn.execute(
            "SELECT count(*) FROM timescaledb_information.hypertables "
            "WHERE hypertable_name = %s", (table,)).fetchone()[0]
        if is_hyper:
            heap, index, toast = conn.execute(
                "SELECT sum(table_bytes), sum(index_bytes), sum(toast_bytes) "
                "FROM hypertable_detailed_size(%s)", (table,)).fetchone()
        else:
            rels = ("SELECT relid FROM pg_partition_tree(%s)" if kind[0] == "p"
                    else "SELECT to_regclass(%s) AS relid")
            heap, index, toast = conn.execute(
                "SELECT sum(pg_relation_size(relid)), sum(pg_indexes_size(relid)), "
                "sum(pg_total_relation_size(relid) - pg_relation_size(relid) "
                f"- pg_indexes_size(relid)) FROM ({rels}) r", (table,)).fetchone()
        out["heap"] += int(heap or 0)
        out["index"] += int(index or 0)
        out["toast"] += int(toast or 0)
    return out


def per_sample(b: dict[str, int], n: int) -> str:
    total = sum(b.values())
    return (f"{total / n:.1f} B/sample (heap {b['heap'] / n:.1f}, indexes {b['index'] / n:.1f},"
            f" TOAST {b['toast'] / n:.1f}; {total / 2**20:.0f} MiB)")


def roll_up(url: str, start: datetime, minutes: int) -> None:
    """The loaded span's rollups, with the product's rollup functions."""
    from sqlalchemy import create_engine
    from stormwatch.services.rollups import roll_up_coarse, roll_up_minutes

    engine = create_engine(url.replace("postgresql+asyncpg://", "postgresql+psycopg://"))
    try:
        with engine.begin() as conn:
            org = conn.exec_driver_sql("SELECT id FROM orgs").scalar_one()
        for m in range(0, minutes, 5):
            with engine.begin() as conn:
                roll_up_minutes(conn, "mesh", start + timedelta(minutes=m),
                                start + timedelta(minutes=min(m + 5, minutes)))
        for bucket_s in (300, 3600):
            step = timedelta(seconds=bucket_s)
            b = start - timedelta(seconds=start.timestamp() % bucket_s)
            buckets = []
            while b < start + timedelta(minutes=minutes):
                buckets.append((org, b))
                b += step
            with engine.begin() as conn:
                roll_up_coarse(conn, "mesh", bucket_s, buckets)
    finally:
        engine.dispose()


def run_engine(engine: str, minutes: int, tmp: Path) -> dict[str, Any]:
    # The server preloads TimescaleDB for that engine only (devtools.services).
    pg = PostgresServer(tmp / engine, free_port(), engine=engine)
    pg.init()
    pg.start()
    try:
        run_migrations(pg.url)
        dsn = pg.url.replace("postgresql+asyncpg", "postgresql")
        with psycopg.connect(dsn, autocommit=True) as conn:
            got = conn.execute("SELECT value FROM sw_meta WHERE key = 'storage_engine'"
                               ).fetchone()[0]
            if got != engine:
                raise RuntimeError(f"{engine} cluster migrated to {got}")
        creds = create_org_sync(pg.url, "Bench", "bench@stormwatch.local")
        org_id = uuid.UUID(creds.org_id)
        ids = [str(uuid.uuid4()) for _ in range(AGENTS)]
        with psycopg.connect(dsn, autocommit=True) as conn:
            for i, a in enumerate(ids):
                conn.execute("INSERT INTO agents (id, org_id, name, token_prefix, token_hash) "
                             "VALUES (%s, %s, %s, %s, %s)",
                             (a, org_id, f"sc-{i}", "swa_", uuid.uuid4().hex))
        # Whole minutes a few hours back: inside retention, and not in the future.
        start = (datetime.now(UTC) - timedelta(hours=3)).replace(second=0, microsecond=0)
        log(f"{engine}: loading {minutes} min of {AGENTS} agents x {ROUNDS_PER_S} rounds/s")
        t0 = time.perf_counter()
        n = asyncio.run(load(dsn, org_id, ids, minutes, start))
        took = time.perf_counter() - t0
        log(f"{engine}: {n:,} samples ingested in {took:.0f} s ({n / took:,.0f}/s, "
            f"load {os.getloadavg()[0]:.1f})")
        with psycopg.connect(dsn, autocommit=True) as conn:
            stored = conn.execute("SELECT count(*) FROM mesh_samples").fetchone()[0]
            assert stored == n, (stored, n)
            # What autovacuum would leave: visibility map and free space map in place.
            conn.execute("VACUUM ANALYZE")
            raw = relation_bytes(conn, engine == "timescaledb")
        log(f"{engine}: raw {per_sample(raw, n)}")
        roll_up(pg.url, start, minutes)
        with psycopg.connect(dsn, autocommit=True) as conn:
            rollups = sum(relation_bytes(conn, engine == "timescaledb", ("mesh_rollups",))
                          .values())
            rollup_rows = conn.execute("SELECT count(*) FROM mesh_rollups").fetchone()[0]
            result: dict[str, Any] = {"n": n, "raw": raw, "rollups": int(rollups)}
            log(f"{engine}: rollups {rollup_rows:,} rows, {int(rollups) / n:.3f} B/sample")
            if engine == "timescaledb":
                # mesh_raw since migration 0014, mesh_samples before it
                hyper = conn.execute(
                    "SELECT hypertable_name FROM timescaledb_information.hypertables WHERE "
                    "hypertable_name IN ('mesh_raw', 'mesh_samples')").fetchone()[0]
                settings = conn.execute(
                    "SELECT attname, segmentby_column_index, orderby_column_index, "
                    "orderby_asc FROM timescaledb_information.compression_settings "
                    "WHERE hypertable_name = %s ORDER BY attname", (hyper,)).fetchall()
                log(f"{engine}: compression settings of {hyper} from the migrations: {settings}")
                t0 = time.perf_counter()
                chunks = conn.execute("SELECT compress_chunk(c, if_not_compressed => true) "
                                      "FROM show_chunks(%s::regclass) c", (hyper,)).fetchall()
                conn.execute("VACUUM ANALYZE")
                result["compressed"] = relation_bytes(conn, True)
                log(f"{engine}: compressed {len(chunks)} chunks in "
                    f"{time.perf_counter() - t0:.0f} s: {per_sample(result['compressed'], n)}")
                assert conn.execute("SELECT count(*) FROM mesh_samples").fetchone()[0] == n
        return result
    finally:
        pg.stop("immediate")
        shutil.rmtree(pg.data_dir, ignore_errors=True)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--minutes", type=int, default=60, help="span of the workload loaded")
    p.add_argument("--engines", default="postgres,timescaledb")
    args = p.parse_args()
    engines = [e for e in args.engines.split(",") if e]
    if "timescaledb" in engines and not timescale_installed():
        log("timescaledb is not installed here: plain PostgreSQL only")
        engines.remove("timescaledb")
    tmp = Path(tempfile.mkdtemp(prefix="stormwatch-bench-storage-"))
    os.chmod(tmp, 0o755)
    try:
        results = {e: run_engine(e, args.minutes, tmp) for e in engines}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    parts = []
    shares = []
    for e, r in results.items():
        n = r["n"]
        raw = sum(r["raw"].values()) / n
        if e == "postgres":
            parts.append(f"postgres {raw:.1f} B/sample")
        else:
            parts.append(f"timescaledb {raw:.1f} B/sample raw, "
                         f"{sum(r['compressed'].values()) / n:.1f} B/sample compressed")
        shares.append(f"{e} {r['rollups'] / n:.3f}")
    print(f"rollups beside them: {', '.join(shares)} B/sample "
          f"({args.minutes} min, {AGENTS}x{AGENTS} series at {ROUNDS_PER_S} rounds/s)")
    print(f"storage: {', '.join(parts)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
