"""Draining a rollup backlog: the minute pass's cost per pass while it catches up.

Starts its own PostgreSQL, migrates a fresh database, and writes --samples mesh samples over
the previous --hours hours (--pairs pairs of one org, times uniform, 0.1% losses) with no
rollup pass run yet: the state a first install or a spool shipped after an outage leaves.
Then runs the worker's pass (`run_minute_pass`, claim then roll) for mesh until the health
endpoint's backlog query reports nothing left, printing per pass its wall time, how far the
watermark moved and the marked minutes left, then the raw and per-level sample counts
(which must agree) and the backlog query's time (best of 5, at the start and at the end).
Last line: `rollup backlog: <n> samples over <h> h drained in <k> passes, longest pass <s> s,
backlog query <ms> ms`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "backend"))

import psycopg
from sqlalchemy import create_engine
from stormwatch.devtools.services import throwaway_servers
from stormwatch.services import rollups


def backlog_ms(conn: psycopg.Connection) -> float:
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        conn.execute(rollups.BACKLOG_SQL).fetchall()
        best = min(best, time.perf_counter() - t0)
    return best * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=2_000_000)
    ap.add_argument("--hours", type=float, default=6.0)
    ap.add_argument("--pairs", type=int, default=72)
    ap.add_argument("--max-passes", type=int, default=30)
    args = ap.parse_args()
    with throwaway_servers("stormwatch-bench-rollups-") as servers:
        pg = servers.pg
        os.environ["DATABASE_URL"] = pg.url
        conn = psycopg.connect(f"host=127.0.0.1 port={pg.port} user={pg.user} dbname={pg.database}",
                               autocommit=True)
        org = uuid.uuid4()
        conn.execute("INSERT INTO orgs (id, name, slug) VALUES (%s, 'bench', 'bench')", (org,))
        agents = [uuid.uuid4() for _ in range(args.pairs + 1)]
        t0 = time.perf_counter()
        conn.execute(
            "INSERT INTO mesh_samples (time, org_id, src_agent_id, dst_agent_id, round, "
            "payload_bytes, rtt_us, status) SELECT now() - make_interval(secs => %s * random()),"
            " %s, a[1 + i %% %s], a[2 + i %% %s], i, 1024, CASE WHEN i %% 1000 <> 0 THEN 300 + "
            "(i::bigint * 7919) %% 500 END, CASE WHEN i %% 1000 = 0 THEN 1 ELSE 0 END "
            "FROM generate_series(1, %s) i, (SELECT %s::uuid[] AS a) x",
            (args.hours * 3600, org, args.pairs, args.pairs, args.samples, agents))
        conn.execute("ANALYZE mesh_raw, mesh_series")
        print(f"loaded {args.samples} samples over {args.hours} h in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
        start_ms = backlog_ms(conn)
        engine = create_engine(pg.url.replace("+asyncpg", "+psycopg"))
        longest = 0.0
        passes = 0
        for passes in range(1, args.max_passes + 1):
            t0 = time.perf_counter()
            out = rollups.run_minute_pass(engine, "mesh")
            took = time.perf_counter() - t0
            longest = max(longest, took)
            row = next(r for r in conn.execute(rollups.BACKLOG_SQL).fetchall() if r[0] == "mesh")
            b = rollups.backlog_from_rows([row])["mesh"]
            print(f"pass {passes}: {took:.1f} s, minute rows {out.get('minutes')}, marked "
                  f"{out.get('dirty')}, rolled until {b.rolled_until:%H:%M}, marked left "
                  f"{b.dirty_minutes}, oldest unrolled {b.oldest_unrolled_at}", flush=True)
            if b.dirty_minutes == 0 and b.oldest_unrolled_at is None:
                break
        raw = conn.execute("SELECT count(*) FROM mesh_samples").fetchone()[0]
        levels = dict(conn.execute("SELECT bucket_s, sum(sample_count)::bigint FROM mesh_rollups "
                                   "GROUP BY 1 ORDER BY 1").fetchall())
        print(f"raw {raw}, per level {levels}", flush=True)
        end_ms = backlog_ms(conn)
        print(f"backlog query: {start_ms:.1f} ms before the first pass, {end_ms:.1f} ms after")
        print(f"rollup backlog: {args.samples} samples over {args.hours:g} h drained in {passes} "
              f"passes, longest pass {longest:.1f} s, backlog query {end_ms:.1f} ms")
        engine.dispose()
        conn.close()


if __name__ == "__main__":
    main()
