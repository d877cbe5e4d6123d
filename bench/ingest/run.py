"""Ingest throughput over HTTP against raw COPY of the same rows into the same table.

Starts its own PostgreSQL, Redis and API (uvicorn with --api-workers workers, as `make run`
does), enrolls a fleet, and prepares realistic columnar mesh batches (StormCloud's workload:
one sample per peer per round, 0.1% losses). Then, for each of --rounds rounds, it measures
two phases, alternating which goes first, each starting from the same state (mesh_raw
and ingest_batches emptied, then CHECKPOINT, so neither phase pays for the other's rows or
dirty pages):

- http ingest: --concurrency senders POST the gzip'd JSON batches to /api/v1/ingest/batches.
  Measured from the first request to the last 202, so it includes everything a real batch
  costs: HTTP, gunzip, JSON parse, validation, auth, rate limit, reference checks, the
  batch-id row, COPY and commit. Bodies are compressed before the clock starts.
- raw COPY: the same rows (same batches) pre-encoded in PostgreSQL's binary COPY format
  before the clock starts, then sent by --concurrency connections, one COPY transaction
  per batch. The client does nothing but ship bytes, so this is the rate the database
  itself sustains for these rows at the senders' concurrency: the ceiling for ingest.

Both phases end with count(*) equal to the rows sent. Every phase prints its rate, the CPU
seconds PostgreSQL, the API workers and this script (the HTTP senders) used, and the load
average: on a small machine the API and the senders share the cores with PostgreSQL, which
is most of what separates the two figures. The medians of the rounds are printed, then the
last line with the best of each (the machine may be shared; noise only slows a phase down):
`ingest: <n> samples/s, copy: <n> rows/s, ratio <x>` (ratio = ingest / copy).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import os
import random
import signal
import statistics
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import httpx
import orjson
import psutil

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "backend"))

from stormwatch.devtools.bootstrap import create_org_sync
from stormwatch.devtools.services import (
    PostgresServer,
    RedisServer,
    free_port,
    throwaway_servers,
    wait_for_port,
)
from stormwatch.services.ingest.parse import make_limits, parse_batch
from stormwatch.services.ingest.store import (
    MESH_RAW_COLUMNS,
    ensure_mesh_series_ids,
    mesh_copy_data,
)


def make_batch(agent_id: str, peers: list[str], rounds: int, start_us: int) -> dict:
    """StormCloud's base workload shape: every round one sample per peer, 10 ms apart."""
    rnd = random.Random(agent_id)
    n = len(peers)
    time_us, peer_idx, round_, rtt, status = [], [], [], [], []
    for r in range(rounds):
        t = start_us + r * 10_000
        for i in range(n):
            time_us.append(t + i * 37)
            peer_idx.append(i)
            round_.append(r)
            if rnd.random() < 0.001:
                rtt.append(None)
                status.append(1)
            else:
                rtt.append(int(rnd.lognormvariate(6.0, 0.35)))
                status.append(0)
    return {"batch_id": str(uuid.uuid4()), "agent_id": agent_id,
            "mesh": {"peers": peers, "time_us": time_us, "peer_idx": peer_idx, "round": round_,
                     "payload_bytes": [1024] * len(time_us), "rtt_us": rtt, "status": status}}


async def send_all(base_url: str, jobs: list[tuple[str, bytes]], concurrency: int) -> int:
    queue: asyncio.Queue[tuple[str, bytes]] = asyncio.Queue()
    for j in jobs:
        queue.put_nowait(j)
    accepted = 0

    async def sender() -> None:
        nonlocal accepted
        async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
            while True:
                try:
                    token, body = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                r = await client.post("/api/v1/ingest/batches", content=body, headers={
                    "Authorization": f"Bearer {token}", "Content-Type": "application/json",
                    "Content-Encoding": "gzip"})
                if r.status_code != 202:
                    raise RuntimeError(f"ingest answered {r.status_code}: {r.text[:300]}")
                accepted += r.json()["accepted"]["mesh"]

    await asyncio.gather(*(sender() for _ in range(concurrency)))
    return accepted


async def raw_copy(dsn: str, streams: list[bytes], concurrency: int) -> float:
    """COPYs pre-encoded batches over `concurrency` connections; returns seconds taken."""
    conns = [await asyncpg.connect(dsn) for _ in range(concurrency)]
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for data in streams:
        queue.put_nowait(data)

    async def copier(conn: asyncpg.Connection) -> None:
        while True:
            try:
                data = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            async with conn.transaction():
                await conn.copy_to_table("mesh_raw", source=memoryview(data),
                                         columns=list(MESH_RAW_COLUMNS), format="binary")

    try:
        start = time.perf_counter()
        await asyncio.gather(*(copier(c) for c in conns))
        return time.perf_counter() - start
    finally:
        for c in conns:
            await c.close()


async def encode_streams(dsn: str, org_id: uuid.UUID, batches: list[dict],
                         limits: object) -> list[bytes]:
    """The batches as mesh_raw COPY streams, with the series ids ingest would look up."""
    conn = await asyncpg.connect(dsn)
    try:
        out = []
        for b in batches:
            parsed = parse_batch(b, limits)  # type: ignore[arg-type]
            out.append(mesh_copy_data(parsed, await ensure_mesh_series_ids(conn, org_id, parsed)))
        return out
    finally:
        await conn.close()


async def reset(dsn: str) -> None:
    """The same starting state for every phase: no samples, no batch ids, clean buffers."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("TRUNCATE mesh_raw, ingest_batches")
        await conn.execute("CHECKPOINT")
    finally:
        await conn.close()


async def count_rows(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval("SELECT count(*) FROM mesh_samples"))
    finally:
        await conn.close()


def tree_cpu_s(pid: int) -> float:
    """CPU seconds used so far by a process tree, including children that already exited
    (a PostgreSQL backend's time moves to the postmaster's children_* once it is reaped)."""
    total = 0.0
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    for proc in procs:
        try:
            t = proc.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.NoSuchProcess:
            pass
    return total


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--agents", type=int, default=8)
    p.add_argument("--batches-per-agent", type=int, default=12)
    p.add_argument("--rounds-per-batch", type=int, default=625, help="8 peers -> 5000 samples")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--api-workers", type=int, default=2)
    p.add_argument("--rounds", type=int, default=4, help="measurement rounds (order alternates)")
    args = p.parse_args()

    with throwaway_servers("stormwatch-bench-", with_redis=True) as servers:
        assert servers.redis is not None
        return measure(args, servers.pg, servers.redis)


def measure(args: argparse.Namespace, pg: PostgresServer, redis: RedisServer) -> int:
    """Both phases for --rounds rounds against an API started on the given servers."""
    api = None
    try:
        creds = create_org_sync(pg.url, "Bench", "bench@stormwatch.local")
        org_id = uuid.UUID(creds.org_id)
        port = free_port()
        env = {**os.environ, "DATABASE_URL": pg.url, "REDIS_URL": redis.url,
               "PYTHONPATH": str(REPO / "backend"), "LOG_LEVEL": "WARNING",
               "INGEST_RATE_BATCHES_PER_MIN": "100000"}
        api = subprocess.Popen(
            [str(Path(sys.executable).parent / "uvicorn"), "stormwatch.main:app", "--host",
             "127.0.0.1", "--port", str(port), "--workers", str(args.api_workers),
             "--log-level", "warning", "--no-access-log"],
            env=env, cwd=REPO, start_new_session=True)
        wait_for_port(port, 300, api)  # a loaded machine can take minutes
        base = f"http://127.0.0.1:{port}"
        dsn = pg.url.replace("postgresql+asyncpg", "postgresql")
        agents = []
        with httpx.Client(base_url=base, timeout=30) as c:
            for i in range(args.agents):
                r = c.post("/api/v1/agents/enroll", json={
                    "enrollment_token": creds.enrollment_token, "name": f"bench-{i}",
                    "mesh_address": f"127.0.0.1:{7000 + i}"})
                r.raise_for_status()
                agents.append((r.json()["agent_id"], r.json()["agent_token"]))
        peers = [a for a, _ in agents]
        start_us = time.time_ns() // 1000 - 3 * 3600 * 1_000_000
        batches, tokens = [], []
        for b in range(args.batches_per_agent):
            for agent_id, token in agents:
                batches.append(make_batch(agent_id, peers, args.rounds_per_batch,
                                          start_us + b * args.rounds_per_batch * 10_000))
                tokens.append(token)
        total = sum(len(b["mesh"]["time_us"]) for b in batches)
        limits = make_limits(datetime.now(UTC), 14, 300, 600_000_000)
        streams = asyncio.run(encode_streams(dsn, org_id, batches, limits))

        def http_jobs() -> list[tuple[str, bytes]]:
            # Fresh batch ids each round, or the API would answer "duplicate" and skip work.
            for b in batches:
                b["batch_id"] = str(uuid.uuid4())
            return [(t, gzip.compress(orjson.dumps(b), 6)) for t, b in zip(tokens, batches,
                                                                            strict=True)]

        jobs = http_jobs()
        print(f"raw storage: {pg.engine} (STORMWATCH_ENGINE=postgres|timescaledb|auto)")
        print(f"fleet: {args.agents} agents, {len(jobs)} batches, {total} samples, "
              f"{sum(len(j[1]) for j in jobs) / total:.1f} gzip bytes/sample, "
              f"{sum(map(len, streams)) / total:.0f} COPY bytes/row; {os.cpu_count()} CPUs, "
              f"{load()}", flush=True)

        # Warm the API workers' pools and partition caches outside the measurement.
        asyncio.run(send_all(base, [(token, gzip.compress(orjson.dumps(
            make_batch(agent_id, peers, 10, start_us - 10**9))))
            for agent_id, token in agents], args.concurrency))

        rates: dict[str, list[float]] = {"http": [], "copy": []}
        for rnd in range(args.rounds):
            for phase in (("http", "copy") if rnd % 2 == 0 else ("copy", "http")):
                asyncio.run(reset(dsn))
                before = load()
                pg_pid = int((pg.data_dir / "postmaster.pid").read_text().split()[0])
                cpu0 = tree_cpu_s(api.pid), tree_cpu_s(pg_pid), time.process_time()
                if phase == "http":
                    jobs = http_jobs()
                    t0 = time.perf_counter()
                    accepted = asyncio.run(send_all(base, jobs, args.concurrency))
                    took = time.perf_counter() - t0
                    assert accepted == total, (accepted, total)
                else:
                    took = asyncio.run(raw_copy(dsn, streams, args.concurrency))
                api_cpu, pg_cpu, bench_cpu = (tree_cpu_s(api.pid) - cpu0[0],
                                              tree_cpu_s(pg_pid) - cpu0[1],
                                              time.process_time() - cpu0[2])
                committed = asyncio.run(count_rows(dsn))
                assert committed == total, (phase, committed, total)
                rates[phase].append(total / took)
                what = (f"http ingest ({args.concurrency} senders, {args.api_workers} API "
                        "workers)" if phase == "http" else
                        f"raw COPY ({args.concurrency} connections, binary, pre-encoded)")
                print(f"round {rnd + 1}: {what}: {total} rows committed in {took:.2f} s = "
                      f"{total / took:.0f}/s; CPU s: PostgreSQL {pg_cpu:.2f}, API "
                      f"{api_cpu:.2f}, bench {bench_cpu:.2f} [{before} -> {load()}]",
                      flush=True)

        med_http, med_copy = statistics.median(rates["http"]), statistics.median(rates["copy"])
        print(f"medians: ingest {med_http:.0f} samples/s, copy {med_copy:.0f} rows/s, "
              f"ratio {med_http / med_copy:.2f}; best of {args.rounds} rounds below", flush=True)
        ingest_rate, copy_rate = max(rates["http"]), max(rates["copy"])
        print(f"ingest: {ingest_rate:.0f} samples/s, copy: {copy_rate:.0f} rows/s, "
              f"ratio {ingest_rate / copy_rate:.2f}")
        return 0
    finally:
        if api is not None:
            os.killpg(api.pid, signal.SIGTERM)
            api.wait(30)


if __name__ == "__main__":
    sys.exit(main())
