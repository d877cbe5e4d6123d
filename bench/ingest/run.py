"""Ingest throughput over HTTP against raw COPY of the same rows into the same table.

Starts its own PostgreSQL, Redis and API (uvicorn, as `make run` does), enrolls a fleet,
posts realistic gzip'd columnar mesh batches from concurrent senders, and then COPYs the
very same rows straight into mesh_samples over one connection. Last line:
`ingest: <n> samples/s, copy: <n> rows/s, ratio <x>`.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg
import httpx
import orjson

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "backend"))

from stormwatch.devtools.bootstrap import create_org_sync
from stormwatch.devtools.services import (
    PostgresServer,
    RedisServer,
    free_port,
    run_migrations,
    wait_for_port,
)
from stormwatch.services.ingest import (
    MESH_COLUMNS,
    make_limits,
    mesh_records,
    parse_batch,
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


async def raw_copy(dsn: str, batches: list[dict], org_id: uuid.UUID) -> tuple[int, float]:
    from datetime import UTC, datetime

    limits = make_limits(datetime.now(UTC), 14, 300, 600_000_000)
    # Rows are built before the clock starts: this is the database's own COPY rate.
    prepared = [mesh_records(parse_batch(b, limits), org_id) for b in batches]
    conn = await asyncpg.connect(dsn)
    try:
        start = time.perf_counter()
        rows = 0
        for records in prepared:
            async with conn.transaction():
                await conn.copy_records_to_table("mesh_samples", records=records,
                                                 columns=list(MESH_COLUMNS))
            rows += len(records)
        return rows, time.perf_counter() - start
    finally:
        await conn.close()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--agents", type=int, default=8)
    p.add_argument("--batches-per-agent", type=int, default=12)
    p.add_argument("--rounds-per-batch", type=int, default=625, help="8 peers -> 5000 samples")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--api-workers", type=int, default=2)
    args = p.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="stormwatch-bench-"))
    os.chmod(tmp, 0o755)
    pg = PostgresServer(tmp / "pg", free_port())
    redis = RedisServer(tmp / "redis", free_port())
    api = None
    try:
        pg.init()
        pg.start()
        redis.start()
        run_migrations(pg.url)
        creds = create_org_sync(pg.url, "Bench", "bench@stormwatch.local")
        port = free_port()
        env = {**os.environ, "DATABASE_URL": pg.url, "REDIS_URL": redis.url,
               "PYTHONPATH": str(REPO / "backend"), "LOG_LEVEL": "WARNING",
               "INGEST_RATE_BATCHES_PER_MIN": "100000"}
        api = subprocess.Popen(
            [str(Path(sys.executable).parent / "uvicorn"), "stormwatch.main:app", "--host",
             "127.0.0.1", "--port", str(port), "--workers", str(args.api_workers),
             "--log-level", "warning", "--no-access-log"],
            env=env, cwd=REPO, start_new_session=True)
        wait_for_port(port, 60, api)
        base = f"http://127.0.0.1:{port}"
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
        batches, jobs = [], []
        for b in range(args.batches_per_agent):
            for agent_id, token in agents:
                batch = make_batch(agent_id, peers, args.rounds_per_batch,
                                   start_us + b * args.rounds_per_batch * 10_000)
                batches.append(batch)
                jobs.append((token, gzip.compress(orjson.dumps(batch), 6)))
        total = sum(len(b["mesh"]["time_us"]) for b in batches)
        print(f"fleet: {args.agents} agents, {len(jobs)} batches, {total} samples, "
              f"{sum(len(j[1]) for j in jobs) / total:.1f} gzip bytes/sample", flush=True)

        # Warm the API workers' pools and partition caches outside the measurement.
        asyncio.run(send_all(base, [(agents[0][1], gzip.compress(orjson.dumps(
            make_batch(agents[0][0], peers, 10, start_us - 10**9))))] * 1, 1))
        t0 = time.perf_counter()
        accepted = asyncio.run(send_all(base, jobs, args.concurrency))
        ingest_s = time.perf_counter() - t0
        assert accepted == total, (accepted, total)
        ingest_rate = total / ingest_s
        print(f"http ingest: {total} samples committed in {ingest_s:.2f} s "
              f"({args.concurrency} concurrent senders, {args.api_workers} API workers)",
              flush=True)

        dsn = pg.url.replace("postgresql+asyncpg", "postgresql")
        for b in batches:
            b["batch_id"] = str(uuid.uuid4())
        rows, copy_s = asyncio.run(raw_copy(dsn, batches, uuid.UUID(creds.org_id)))
        copy_rate = rows / copy_s
        print(f"raw COPY: {rows} rows in {copy_s:.2f} s (one connection, one transaction "
              "per batch, rows prepared beforehand)", flush=True)
        print(f"ingest: {ingest_rate:.0f} samples/s, copy: {copy_rate:.0f} rows/s, "
              f"ratio {ingest_rate / copy_rate:.2f}")
        return 0
    finally:
        if api is not None:
            os.killpg(api.pid, signal.SIGTERM)
            api.wait(30)
        redis.stop()
        pg.stop("immediate")
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
