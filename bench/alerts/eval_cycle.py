"""Times one alert evaluation cycle: 200 rules over a 24-agent fleet (576 pairs, self-loops
included) at 10 rounds/s, the newest 30 s window due, as `make bench-alerts` reports it.
Alone: `PYTHONPATH=backend .venv/bin/python bench/alerts/eval_cycle.py` from the repository root.

The fleet, its samples and rules go into a new org of the given database; the cycle is the
worker's own (services/alerts/evaluate.evaluate_cycle), run `repeats` times over the same
window (each rule's cursor is put back between runs) and reported as the median."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import statistics
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import psycopg
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from sqlalchemy.pool import NullPool
from stormwatch.services.alerts.evaluate import evaluate_cycle

REGIONS = ("us-east-1", "us-west-2", "eu-west-1", "ap-southeast-1")
WINDOW_S = 30
RATE_HZ = 10


def _sync_url(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://").replace(
        "postgresql+psycopg://", "postgresql://")


def seed(database_url: str, rules: int, agents: int, now: datetime) -> dict[str, Any]:
    """An org with `agents` agents, every ordered pair's samples for the two newest windows
    (a few pairs spiking), and `rules` rules of mixed scopes, statistics and conditions."""
    org = uuid.uuid4()
    rng = np.random.default_rng(42)
    ids = [uuid.uuid4() for _ in range(agents)]
    region = {a: REGIONS[i % len(REGIONS)] for i, a in enumerate(ids)}
    zone = {a: f"{region[a]}{'abc'[(i // len(REGIONS)) % 3]}" for i, a in enumerate(ids)}
    newest_end = (int(now.timestamp()) - 6) // WINDOW_S * WINDOW_S
    start = newest_end - 2 * WINDOW_S
    with psycopg.connect(_sync_url(database_url), autocommit=False) as c:
        c.execute("INSERT INTO orgs (id, name, slug) VALUES (%s, %s, %s)",
                  (org, "alert bench", f"alert-bench-{org.hex[:8]}"))
        for i, a in enumerate(ids):
            c.execute("INSERT INTO agents (id, org_id, name, provider, region, zone, "
                      "token_prefix, token_hash, last_seen) VALUES (%s, %s, %s, 'aws', %s, %s, "
                      "'x', %s, now())", (a, org, f"bench-{i:02d}", region[a], zone[a],
                                          uuid.uuid4().hex * 2))
        for s in ids:
            for d in ids:
                if s != d:
                    tc = ("cross_region" if region[s] != region[d] else "cross_az"
                          if zone[s] != zone[d] else "same_subnet")
                    c.execute("INSERT INTO agent_pairs (org_id, src_agent_id, dst_agent_id, "
                              "topology_class) VALUES (%s, %s, %s, %s)", (org, s, d, tc))
        c.execute("SELECT sw_ensure_partitions('mesh_raw', %s, %s)",
                  (datetime.fromtimestamp(start, UTC) - timedelta(days=1),
                   datetime.fromtimestamp(newest_end, UTC) + timedelta(days=1)))
        n = 2 * WINDOW_S * RATE_HZ
        t = start + np.arange(n) / RATE_HZ
        buf = io.StringIO()
        spiking = {(ids[0], ids[1]), (ids[2], ids[3]), (ids[4], ids[5])}
        for s in ids:
            for d in ids:
                base = 300.0 if s == d else (800.0 if region[s] == region[d] else 40_000.0)
                v = base * rng.lognormal(0, 0.15, n)
                if (s, d) in spiking:
                    v[rng.random(n) < 0.05] = base * 30
                lost = rng.random(n) < 0.001
                for j in range(n):
                    ts = datetime.fromtimestamp(t[j], UTC).isoformat()
                    if lost[j]:
                        buf.write(f"{ts}\t{org}\t{s}\t{d}\t{j}\t1024\t\\N\t1\n")
                    else:
                        buf.write(f"{ts}\t{org}\t{s}\t{d}\t{j}\t1024\t{int(v[j])}\t0\n")
        buf.seek(0)
        with c.cursor().copy("COPY mesh_samples (time, org_id, src_agent_id, dst_agent_id, "
                             "round, payload_bytes, rtt_us, status) FROM STDIN") as cp:
            while chunk := buf.read(1 << 20):
                cp.write(chunk)
        stats = ("p99", "p99.9", "p50", "mean", "loss_rate", "p95", "std", "p99.99")
        for i in range(rules):
            stat = stats[i % len(stats)]
            kind = i % 5
            scope: dict[str, Any]
            if kind == 0:
                scope = {"src": [str(ids[i % agents])]}
            elif kind == 1:
                scope = {"regions": [REGIONS[i % len(REGIONS)]]}
            elif kind == 2:
                scope = {"topology_class": ["cross_region"]}
            elif kind == 3:
                scope = {"src": [str(ids[i % agents])], "dst": [str(ids[(i + 1) % agents])]}
            else:
                scope = {}
            # thresholds above the fleet's normal levels (40 ms across regions): the three
            # spiking pairs breach, the rest of the fleet is quiet, as most of the time
            cond = ({"type": "above", "value": 0.02} if stat == "loss_rate"
                    else {"type": "above", "value": float(100_000 + 1_000 * i)})
            c.execute(
                "INSERT INTO alert_rules (id, org_id, name, severity, metric, statistic, scope, "
                "window_s, condition, x, y, n, m, evaluated_until) VALUES (%s, %s, %s, "
                "'warning', 'mesh_rtt', %s, %s, %s, %s, %s, %s, %s, NULL, %s)",
                (uuid.uuid4(), org, f"bench rule {i}", stat, json.dumps(scope), WINDOW_S,
                 json.dumps(cond), 1 if i % 3 else 2, 1 if i % 3 else 3,
                 2 if i % 7 == 0 else 1, datetime.fromtimestamp(newest_end - WINDOW_S, UTC)))
        c.commit()
    return {"org": org, "newest_end": newest_end, "pairs": agents * agents}


async def time_cycles(database_url: str, org: uuid.UUID, newest_end: int, repeats: int
                      ) -> tuple[list[float], Any]:
    engine = create_async_engine(database_url, poolclass=NullPool)
    sm = async_sessionmaker(engine, expire_on_commit=False)
    times = []
    res = None
    now = datetime.fromtimestamp(newest_end + 6, UTC)
    try:
        for _ in range(repeats):
            with psycopg.connect(_sync_url(database_url), autocommit=True) as c:
                c.execute("UPDATE alert_rules SET evaluated_until = %s WHERE org_id = %s",
                          (datetime.fromtimestamp(newest_end - WINDOW_S, UTC), org))
                c.execute("DELETE FROM alerts WHERE org_id = %s", (org,))
                c.execute("DELETE FROM alert_series_state WHERE org_id = %s", (org,))
            res = await evaluate_cycle(sm, now=now, org_ids=[org])
            times.append(res.elapsed_ms)
    finally:
        await engine.dispose()
    return times, res


def run(database_url: str, rules: int = 200, agents: int = 24, repeats: int = 3
        ) -> dict[str, Any]:
    """One cycle's time (median of `repeats`) with what it covered."""
    s = seed(database_url, rules, agents, datetime.now(UTC))
    times, res = asyncio.run(time_cycles(database_url, s["org"], s["newest_end"], repeats))
    return {"rules": res.rules, "series": s["pairs"], "series_evaluated": res.series,
            "events": res.events, "eval_ms": statistics.median(times), "runs_ms": times}


def with_own_database(fn: Any) -> Any:
    """Runs fn(database_url) on a PostgreSQL of its own, removed afterwards."""
    from stormwatch.devtools.services import throwaway_servers

    with throwaway_servers("stormwatch-alert-bench-") as servers:
        return fn(servers.pg.url)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--database-url", help="default: a throwaway PostgreSQL, migrated")
    p.add_argument("--rules", type=int, default=200)
    p.add_argument("--agents", type=int, default=24)
    a = p.parse_args()
    if a.database_url:
        r = run(a.database_url, a.rules, a.agents)
    else:
        r = with_own_database(lambda url: run(url, a.rules, a.agents))
    print(f"alerts eval: {r['rules']} rules x {r['series']} series {r['eval_ms']:.0f} ms "
          f"(runs {', '.join(f'{t:.0f}' for t in r['runs_ms'])} ms; "
          f"{r['series_evaluated']} rule-series, {r['events']} events)")


if __name__ == "__main__":
    main()
