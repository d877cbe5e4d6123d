"""Rollups against a real PostgreSQL, at every level (minute, 5-minute, hour, day):
idempotent, complete after late samples, and exact to the sketch's 1% on heavy-tailed
data."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, text

from stormwatch.services import rollups
from stormwatch.services.analytics import group_stats
from stormwatch.services.analytics.sketches import decode, merge_sketches

PCTS = [0.5, 0.9, 0.99, 0.999, 0.9999]


def _heavy_tailed(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.lognormal(np.log(800.0), 0.35, n)
    spikes = rng.random(n) < 0.0005
    v[spikes] *= 1000.0  # rare 1000x spikes, the tail the percentiles must keep
    return np.maximum(np.round(v), 1.0)


def _insert_mesh(db: Engine, org: str, src: uuid.UUID, dst: uuid.UUID, start: datetime,
                 rtts: np.ndarray, step_s: float, lost_every: int = 0) -> None:
    rows = []
    for i, v in enumerate(rtts):
        lost = lost_every and i % lost_every == lost_every - 1
        rows.append({"t": start + timedelta(seconds=i * step_s), "o": org, "s": src, "d": dst,
                     "r": i, "v": None if lost else int(v), "st": 1 if lost else 0})
    with db.begin() as conn:
        conn.execute(text(
            "INSERT INTO mesh_samples (time, org_id, src_agent_id, dst_agent_id, round, "
            "payload_bytes, rtt_us, status) VALUES (:t, :o, :s, :d, :r, 1024, :v, :st)"), rows)


def _snapshot(db: Engine, org: str) -> list[tuple]:
    with db.connect() as conn:
        return [tuple(r) for r in conn.execute(text(
            "SELECT bucket_s, bucket_start, src_agent_id, dst_agent_id, sample_count, "
            "failure_count, rtt_us_count, rtt_us_min, rtt_us_max, rtt_us_sum, rtt_us_sum_sq, "
            "rtt_us_sketch FROM mesh_rollups WHERE org_id = :o ORDER BY 1, 2, 3, 4"),
            {"o": org}).all()]


def _buckets(org: str, start: datetime, end: datetime, bucket_s: int
             ) -> list[tuple[uuid.UUID, datetime]]:
    first = rollups.floor_time(start, bucket_s)
    n = int((end - first).total_seconds() // bucket_s) + 1
    return [(uuid.UUID(org), first + timedelta(seconds=i * bucket_s)) for i in range(n)]


def _roll_all(db: Engine, org: str, start: datetime, end: datetime) -> None:
    with db.begin() as conn:
        rollups.roll_up_minutes(conn, "mesh", start, end, uuid.UUID(org))
        rollups.roll_up_coarse(conn, "mesh", 300, _buckets(org, start, end, 300))
        rollups.roll_up_coarse(conn, "mesh", 3600, _buckets(org, start, end, 3600))
        # Every day the span touches: two hours across midnight UTC are two day buckets.
        rollups.roll_up_coarse(conn, "mesh", 86400, _buckets(org, start, end, 86400))


def _set_rolled(conn: Any, kind: str, t: datetime) -> None:
    """The minute pass's watermark and claim at `t`, as after a pass that rolled up to it."""
    for key in (f"{kind}:60", rollups.claim_key(kind)):
        conn.execute(text("INSERT INTO rollup_watermarks (kind, rolled_until) VALUES (:k, :t) "
                          "ON CONFLICT (kind) DO UPDATE SET rolled_until = :t"), {"k": key, "t": t})


@pytest.fixture
def org_id(make_org: Callable) -> str:
    return make_org().org_id


def test_rollup_percentiles_match_numpy_for_buckets_ranges_and_groups(db: Engine,
                                                                     org_id: str) -> None:
    rng = np.random.default_rng(7)
    start = rollups.floor_time(datetime.now(UTC) - timedelta(hours=4), 3600)
    a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    ab = _heavy_tailed(rng, 36_000)  # 2 h at 5 samples/s
    ac = _heavy_tailed(rng, 36_000) * 1.3
    _insert_mesh(db, org_id, a, b, start, ab, 0.2)
    _insert_mesh(db, org_id, a, c, start, ac, 0.2)
    _roll_all(db, org_id, start, start + timedelta(hours=2))

    with db.connect() as conn:
        minute = conn.execute(text(
            "SELECT rtt_us_sketch, rtt_us_count FROM mesh_rollups WHERE org_id = :o AND "
            "bucket_s = 60 AND src_agent_id = :a AND dst_agent_id = :b AND bucket_start = :t"),
            {"o": org_id, "a": a, "b": b, "t": start + timedelta(minutes=17)}).one()
        hours = conn.execute(text(
            "SELECT rtt_us_sketch FROM mesh_rollups WHERE org_id = :o AND bucket_s = 3600 "
            "AND src_agent_id = :a AND dst_agent_id = :b ORDER BY bucket_start"),
            {"o": org_id, "a": a, "b": b}).scalars().all()
        fives = conn.execute(text(
            "SELECT rtt_us_sketch, rtt_us_count FROM mesh_rollups WHERE org_id = :o AND "
            "bucket_s = 300 AND src_agent_id = :a AND dst_agent_id = :b ORDER BY bucket_start"),
            {"o": org_id, "a": a, "b": b}).all()
        days = conn.execute(text(
            "SELECT rtt_us_sketch FROM mesh_rollups WHERE org_id = :o AND bucket_s = 86400"),
            {"o": org_id}).scalars().all()

    one_minute = ab[17 * 300 : 18 * 300]
    assert minute.rtt_us_count == one_minute.size
    five_minutes = ab[15 * 300 : 20 * 300]  # the 5-minute bucket holding minute 17
    assert len(fives) == 24 and [f.rtt_us_count for f in fives] == [1500] * 24
    cases = [
        (decode(minute.rtt_us_sketch), one_minute),  # a single bucket
        (decode(fives[3].rtt_us_sketch), five_minutes),  # a single 5-minute bucket
        (merge_sketches(decode(f.rtt_us_sketch) for f in fives), ab),  # merged 5-minute range
        (merge_sketches(decode(h) for h in hours), ab),  # merged range
        (merge_sketches(decode(d) for d in days), np.concatenate([ab, ac])),  # group of pairs
    ]
    for sketch, values in cases:
        assert sketch.count == values.size
        for q in PCTS:
            exact = np.quantile(values, q, method="lower")
            got = sketch.quantile(q)
            assert got is not None and abs(got - exact) / exact <= 0.01, (q, got, exact)


def test_a_rollup_run_twice_gives_the_same_rows(db: Engine, org_id: str) -> None:
    rng = np.random.default_rng(1)
    start = rollups.floor_time(datetime.now(UTC) - timedelta(hours=3), 3600)
    a, b = uuid.uuid4(), uuid.uuid4()
    _insert_mesh(db, org_id, a, b, start, _heavy_tailed(rng, 3_000), 1.0, lost_every=50)
    _roll_all(db, org_id, start, start + timedelta(hours=1))
    first = _snapshot(db, org_id)
    _roll_all(db, org_id, start, start + timedelta(hours=1))
    assert _snapshot(db, org_id) == first
    minute_rows = [r for r in first if r[0] == 60]
    assert len(minute_rows) == 50  # 3000 s of samples -> 50 minutes, one row each
    assert sum(r[4] for r in minute_rows) == 3000
    assert sum(r[5] for r in minute_rows) == 60
    five_rows = [r for r in first if r[0] == 300]
    assert len(five_rows) == 10  # ... and 10 five-minute buckets of 300 samples
    assert [r[4] for r in five_rows] == [300] * 10
    assert sum(r[5] for r in five_rows) == 60


def test_late_samples_are_rolled_in_without_duplicates(db: Engine, org_id: str) -> None:
    rng = np.random.default_rng(2)
    now = datetime.now(UTC)
    # 5-minute aligned: the 5-minute buckets checked below are minutes 0-4, 5-9, ...
    start = rollups.floor_time(now - timedelta(minutes=50), 300)
    a, b = uuid.uuid4(), uuid.uuid4()
    on_time = _heavy_tailed(rng, 1200)
    _insert_mesh(db, org_id, a, b, start, on_time, 1.0)
    o = uuid.UUID(org_id)
    with db.begin() as conn:
        rollups.roll_up_minutes(conn, "mesh", start, start + timedelta(minutes=20))
        _set_rolled(conn, "mesh", start + timedelta(minutes=20))
        rollups.roll_up_coarse(conn, "mesh", 300, _buckets(org_id, start,
                                                           start + timedelta(minutes=19), 300))
    # Late samples for minute 5, which is already rolled: one batch marks it through the
    # ingest hook, another arrives silently and is found by the count sweep.
    late_marked = _heavy_tailed(rng, 30) * 2
    late_silent = _heavy_tailed(rng, 10) * 3
    t5 = start + timedelta(minutes=5, seconds=0.5)
    _insert_mesh(db, org_id, a, b, t5, late_marked, 1.0)
    _insert_mesh(db, org_id, a, b, start + timedelta(minutes=9, seconds=0.25), late_silent, 1.0)
    with db.connect() as conn:
        before_rerun = conn.execute(text("SELECT clock_timestamp()")).scalar_one()
    with db.begin() as conn:
        assert rollups.mark_late_minutes(conn, "mesh", o, [t5]) == 1
        assert rollups.sweep_late_minutes(conn, "mesh", timedelta(hours=1)) >= 1
        rollups.roll_up_dirty_minutes(conn, "mesh")
        # The 5-minute level finds what to re-roll as the worker does: buckets whose
        # minutes were recomputed since its last pass.
        stale, _ = rollups.stale_coarse_buckets(conn, "mesh", 300, before_rerun)
        stale = [x for x in stale if x[0] == o]
        assert stale == [(o, start + timedelta(minutes=5))]  # minutes 5 and 9, one bucket
        rollups.roll_up_coarse(conn, "mesh", 300, stale)
        rollups.roll_up_coarse(conn, "mesh", 300, stale)
        hours = {(o, start), (o, start + timedelta(hours=1))}
        rollups.roll_up_coarse(conn, "mesh", 3600, sorted(hours))
        rollups.roll_up_coarse(conn, "mesh", 3600, sorted(hours))
    with db.connect() as conn:
        m5 = conn.execute(text(
            "SELECT count(*), sum(sample_count) FROM mesh_rollups WHERE org_id = :o AND "
            "bucket_s = 60 AND bucket_start = :t"),
            {"o": org_id, "t": start + timedelta(minutes=5)}).one()
        m9 = conn.execute(text(
            "SELECT sum(sample_count) FROM mesh_rollups WHERE org_id = :o AND bucket_s = 60 "
            "AND bucket_start = :t"), {"o": org_id, "t": start + timedelta(minutes=9)}).scalar()
        total_hours = conn.execute(text(
            "SELECT sum(sample_count) FROM mesh_rollups WHERE org_id = :o AND bucket_s = 3600"),
            {"o": org_id}).scalar()
        fives = dict(conn.execute(text(
            "SELECT bucket_start, sum(sample_count) FROM mesh_rollups WHERE org_id = :o "
            "AND bucket_s = 300 GROUP BY 1"), {"o": org_id}).all())
        five_sketch = conn.execute(text(
            "SELECT rtt_us_sketch FROM mesh_rollups WHERE org_id = :o AND bucket_s = 300 "
            "AND bucket_start = :t"), {"o": org_id, "t": start + timedelta(minutes=5)}
            ).scalar_one()
        rolled_minutes = conn.execute(text(
            "SELECT sum(sample_count) FROM mesh_rollups WHERE org_id = :o AND bucket_s = 60 "
            "AND bucket_start < :e"), {"o": org_id, "e": start + timedelta(minutes=20)}).scalar()
        dirty_left = conn.execute(text("SELECT count(*) FROM rollup_dirty_minutes "
                                       "WHERE org_id = :o"), {"o": org_id}).scalar()
    assert m5 == (1, 60 + 30)
    assert m9 == 60 + 10
    assert rolled_minutes == 20 * 60 + 40
    assert total_hours == rolled_minutes  # hours hold exactly the rolled minutes, once
    assert fives == {start + timedelta(minutes=m): 300 + (40 if m == 5 else 0)
                     for m in (0, 5, 10, 15)}
    assert dirty_left == 0
    # The late samples are in the 5-minute bucket's sketch too, tail included.
    in_bucket = np.concatenate([on_time[300:600], late_marked, late_silent])
    got = decode(five_sketch)
    assert got.count == in_bucket.size == 340
    for q in [*PCTS, 1.0]:
        exact = np.quantile(in_bucket, q, method="lower")
        assert abs((got.quantile(q) or 0) - exact) / exact <= 0.01, (q, got.quantile(q), exact)


def test_the_recent_pass_keeps_up_and_is_idempotent(db: Engine, org_id: str) -> None:
    rng = np.random.default_rng(3)
    now = datetime.now(UTC)
    start = rollups.floor_time(now - timedelta(minutes=30), 60)
    a, b = uuid.uuid4(), uuid.uuid4()
    _insert_mesh(db, org_id, a, b, start, _heavy_tailed(rng, 600), 1.0)
    with db.begin() as conn:
        conn.execute(text("DELETE FROM rollup_watermarks WHERE kind LIKE 'mesh:%'"))
        _set_rolled(conn, "mesh", start)
    for _ in range(2):
        rollups.run_minute_pass(db, "mesh", now)
    with db.connect() as conn:
        per_level = dict(conn.execute(text(
            "SELECT bucket_s, sum(sample_count) FROM mesh_rollups WHERE org_id = :o "
            "GROUP BY 1"), {"o": org_id}).all())
    assert per_level == {60: 600, 300: 600, 3600: 600, 86400: 600}


async def test_ingest_marks_the_claimed_minutes_of_a_batch_in_its_own_transaction(
        services: Any, db: Engine, org_id: str) -> None:
    import asyncpg

    now = datetime.now(UTC)
    claimed = rollups.floor_time(now - timedelta(minutes=10), 60)
    with db.begin() as conn:
        _set_rolled(conn, "quorum", claimed)
    dsn = services.database_url.replace("postgresql+asyncpg", "postgresql")
    conn = await asyncpg.connect(dsn)
    # Minutes -6, -5, -1 before the claim and two after it; the batch marks only its own.
    batch = [claimed - timedelta(minutes=k) for k in (6, 5, 1)] + [claimed, now]
    try:
        async with conn.transaction():
            await rollups.mark_minutes(conn, "quorum", uuid.UUID(org_id),
                                       [rollups.floor_time(t, 60) for t in batch])
    finally:
        await conn.close()
    with db.connect() as c:
        minutes = c.execute(text(
            "SELECT minute FROM rollup_dirty_minutes WHERE kind = 'quorum' AND org_id = :o "
            "ORDER BY minute"), {"o": org_id}).scalars().all()
        c.execute(text("DELETE FROM rollup_dirty_minutes WHERE org_id = :o"), {"o": org_id})
        c.commit()
    assert [claimed - m for m in minutes] == [timedelta(minutes=k) for k in (6, 5, 1)]


# --- quorum groups, storage targets and throughput pairs -----------------------------


@dataclass
class KindCase:
    """How to write raw samples of one kind and which rollup columns hold their values."""

    kind: str
    insert_sql: str
    prefixes: tuple[str, ...]

    def rows(self, org: str, series: dict[str, Any], start: datetime, values: np.ndarray,
             step_s: float, failed_every: int = 0) -> list[dict[str, Any]]:
        out = []
        for i, v in enumerate(values):
            # throughput samples have no failure status
            failed = (bool(failed_every) and i % failed_every == failed_every - 1
                      and self.kind != "throughput")
            out.append({**series, "t": start + timedelta(seconds=i * step_s), "o": org, "r": i,
                        "v": None if failed else float(v),
                        "st": 3 if failed else 0,
                        "err": "server_error" if failed else None,
                        # the endpoint's round trip, a fifth of the request latency
                        "rtt": int(v // 5)})
        return out


KIND_CASES = {
    "quorum": KindCase(
        "quorum",
        "INSERT INTO quorum_samples (time, org_id, agent_id, group_name, round, k, n, "
        "latency_us, status) VALUES (:t, :o, :agent, :group, :r, 2, 3, :v, :st)",
        ("latency_us",)),
    "storage": KindCase(
        "storage",
        "INSERT INTO storage_samples (time, org_id, agent_id, target_id, op, variant, content, "
        "size_bytes, stored_bytes, copies, concurrency, attempt, latency_us, rtt_us, status, "
        "error_class) VALUES (:t, :o, :agent, :target, :op, 'plain', 'binary', 10000, 10000, "
        "1, 1, 1, :v, :rtt, :st, :err)",
        ("latency_us", "adj_latency_us")),
    "throughput": KindCase(
        "throughput",
        "INSERT INTO throughput_samples (time, org_id, src_agent_id, dst_agent_id, proto, "
        "experiment_id, direction, bytes_per_s) VALUES (:t, :o, :agent, :dst, 'tcp', :exp, "
        "'forward', :v)",
        ("bytes_per_s",)),
}


def _series(kind: str, n: int) -> list[dict[str, Any]]:
    agent, exp = uuid.uuid4(), uuid.uuid4()
    return [{"agent": agent, "group": f"g{i}", "target": uuid.uuid4(), "op": "get",
             "dst": uuid.uuid4(), "exp": exp} for i in range(n)]


def _insert(db: Engine, case: KindCase, rows: list[dict[str, Any]]) -> None:
    with db.begin() as conn:
        conn.execute(text(case.insert_sql), rows)


def _roll_kind(db: Engine, kind: str, org: str, start: datetime, end: datetime) -> None:
    o = uuid.UUID(org)
    with db.begin() as conn:
        rollups.roll_up_minutes(conn, kind, start, end, o)
        rollups.roll_up_coarse(conn, kind, 300, _buckets(org, start, end, 300))
        hours = _buckets(org, start, end, 3600)
        rollups.roll_up_coarse(conn, kind, 3600, hours)
        rollups.roll_up_coarse(conn, kind, 86400, hours)


def _kind_snapshot(db: Engine, kind: str, org: str) -> list[str]:
    table = rollups.KINDS[kind].table
    with db.connect() as conn:
        return list(conn.execute(text(
            f"SELECT (to_jsonb(r) - 'computed_at')::text FROM {table} r WHERE org_id = :o "
            "ORDER BY 1"), {"o": org}).scalars())


def _values_of(case: KindCase, rows: list[dict[str, Any]], prefix: str) -> np.ndarray:
    ok = [r for r in rows if r["v"] is not None and not r["st"]]
    v = np.array([r["v"] for r in ok])
    if prefix == "adj_latency_us":
        return np.maximum(np.round(v) - np.array([r["rtt"] for r in ok]), 0)
    return np.round(v) if case.kind != "throughput" else v


@pytest.mark.parametrize("kind", list(KIND_CASES))
def test_other_kinds_roll_up_idempotently_to_within_one_percent(db: Engine, org_id: str,
                                                                kind: str) -> None:
    case = KIND_CASES[kind]
    rng = np.random.default_rng(11)
    start = rollups.floor_time(datetime.now(UTC) - timedelta(hours=4), 3600)
    scale = 1e8 if kind == "throughput" else 20_000.0
    series = _series(kind, 2)
    rows = [case.rows(org_id, s, start, _heavy_tailed(rng, 14_400) * scale / 800, 0.5,
                      failed_every=97) for s in series]
    for r in rows:
        _insert(db, case, r)
    _roll_kind(db, kind, org_id, start, start + timedelta(hours=2))
    first = _kind_snapshot(db, kind, org_id)
    _roll_kind(db, kind, org_id, start, start + timedelta(hours=2))
    assert _kind_snapshot(db, kind, org_id) == first  # the same rows, none added

    table = rollups.KINDS[kind].table
    key = rollups.KINDS[kind].keys[1]  # group_name, target_id or dst_agent_id
    key_of = {"quorum": "group", "storage": "target", "throughput": "dst"}[kind]
    with db.connect() as conn:
        counts = dict(conn.execute(text(
            f"SELECT bucket_s, sum(sample_count) FROM {table} WHERE org_id = :o GROUP BY 1"),
            {"o": org_id}).all())
        failures = conn.execute(text(
            f"SELECT sum(failure_count) FROM {table} WHERE org_id = :o AND bucket_s = 86400"),
            {"o": org_id}).scalar()
        for prefix in case.prefixes:
            minute = conn.execute(text(
                f"SELECT {prefix}_sketch FROM {table} WHERE org_id = :o AND bucket_s = 60 "
                f"AND bucket_start = :t AND {key} = :k"),
                {"o": org_id, "t": start + timedelta(minutes=17),
                 "k": series[0][key_of]}).scalar_one()
            hours = conn.execute(text(
                f"SELECT {prefix}_sketch FROM {table} WHERE org_id = :o AND bucket_s = 3600 "
                f"AND {key} = :k"), {"o": org_id, "k": series[0][key_of]}).scalars().all()
            fives = conn.execute(text(
                f"SELECT {prefix}_sketch FROM {table} WHERE org_id = :o AND bucket_s = 300 "
                f"AND {key} = :k ORDER BY bucket_start"),
                {"o": org_id, "k": series[0][key_of]}).scalars().all()
            days = conn.execute(text(
                f"SELECT {prefix}_sketch FROM {table} WHERE org_id = :o AND bucket_s = 86400"),
                {"o": org_id}).scalars().all()
            one = _values_of(case, rows[0], prefix)
            in_minute = _values_of(case, [r for r in rows[0] if start + timedelta(minutes=17)
                                          <= r["t"] < start + timedelta(minutes=18)], prefix)
            in_five = _values_of(case, [r for r in rows[0] if start + timedelta(minutes=15)
                                        <= r["t"] < start + timedelta(minutes=20)], prefix)
            assert len(fives) == 24
            cases = [(decode(minute), in_minute),
                     (decode(fives[3]), in_five),
                     (merge_sketches(decode(f) for f in fives), one),
                     (merge_sketches(decode(h) for h in hours), one),
                     (merge_sketches(decode(d) for d in days),
                      np.concatenate([_values_of(case, r, prefix) for r in rows]))]
            for sketch, values in cases:
                assert sketch.count == values.size
                for q in PCTS:
                    exact = np.quantile(values, q, method="lower")
                    got = sketch.quantile(q)
                    assert got is not None and abs(got - exact) / exact <= 0.01, (
                        prefix, q, got, exact)
    assert counts == {60: 28_800, 300: 28_800, 3600: 28_800, 86400: 28_800}
    assert failures == (0 if kind == "throughput" else 2 * (14_400 // 97))


@pytest.mark.parametrize("kind", list(KIND_CASES))
def test_late_samples_of_other_kinds_are_rolled_in_once(db: Engine, org_id: str,
                                                        kind: str) -> None:
    case = KIND_CASES[kind]
    rng = np.random.default_rng(12)
    # 5-minute aligned: the 5-minute buckets checked below are minutes 0-4, 5-9, ...
    start = rollups.floor_time(datetime.now(UTC) - timedelta(minutes=50), 300)
    (s,) = _series(kind, 1)
    on_time = case.rows(org_id, s, start, _heavy_tailed(rng, 1200) * 25, 1.0)
    _insert(db, case, on_time)
    with db.begin() as conn:
        rollups.roll_up_minutes(conn, kind, start, start + timedelta(minutes=20))
        _set_rolled(conn, kind, start + timedelta(minutes=20))
        rollups.roll_up_coarse(conn, kind, 3600, [(uuid.UUID(org_id), start)])
        rollups.roll_up_coarse(conn, kind, 300, _buckets(org_id, start,
                                                         start + timedelta(minutes=19), 300))
    late = case.rows(org_id, s, start + timedelta(minutes=5, seconds=0.5),
                     _heavy_tailed(rng, 30) * 50, 1.0)
    silent = case.rows(org_id, s, start + timedelta(minutes=9, seconds=0.25),
                       _heavy_tailed(rng, 10) * 75, 1.0)
    _insert(db, case, late + silent)
    o = uuid.UUID(org_id)
    with db.connect() as conn:
        before_rerun = conn.execute(text("SELECT clock_timestamp()")).scalar_one()
    with db.begin() as conn:
        assert rollups.mark_late_minutes(conn, kind, o, [late[0]["t"]]) == 1
        assert rollups.sweep_late_minutes(conn, kind, timedelta(hours=1)) >= 1
        rollups.roll_up_dirty_minutes(conn, kind)
        stale, _ = rollups.stale_coarse_buckets(conn, kind, 300, before_rerun)
        stale = [x for x in stale if x[0] == o]
        assert stale == [(o, start + timedelta(minutes=5))]
        rollups.roll_up_coarse(conn, kind, 300, stale)
        rollups.roll_up_coarse(conn, kind, 300, stale)
        hours = sorted({(o, start), (o, start + timedelta(hours=1))})
        rollups.roll_up_coarse(conn, kind, 3600, hours)
        rollups.roll_up_coarse(conn, kind, 3600, hours)
    table = rollups.KINDS[kind].table
    with db.connect() as conn:
        per_minute = dict(conn.execute(text(
            f"SELECT bucket_start, sum(sample_count) FROM {table} WHERE org_id = :o AND "
            "bucket_s = 60 GROUP BY 1"), {"o": org_id}).all())
        rows_m5 = conn.execute(text(
            f"SELECT count(*) FROM {table} WHERE org_id = :o AND bucket_s = 60 AND "
            "bucket_start = :t"), {"o": org_id, "t": start + timedelta(minutes=5)}).scalar()
        hour_total = conn.execute(text(
            f"SELECT sum(sample_count) FROM {table} WHERE org_id = :o AND bucket_s = 3600"),
            {"o": org_id}).scalar()
        fives = dict(conn.execute(text(
            f"SELECT bucket_start, sum(sample_count) FROM {table} WHERE org_id = :o AND "
            "bucket_s = 300 GROUP BY 1"), {"o": org_id}).all())
        five_sketch = conn.execute(text(
            f"SELECT {case.prefixes[0]}_sketch FROM {table} WHERE org_id = :o AND "
            "bucket_s = 300 AND bucket_start = :t"),
            {"o": org_id, "t": start + timedelta(minutes=5)}).scalar_one()
        sketch = conn.execute(text(
            f"SELECT {case.prefixes[0]}_sketch FROM {table} WHERE org_id = :o AND "
            "bucket_s = 60 AND bucket_start = :t"),
            {"o": org_id, "t": start + timedelta(minutes=5)}).scalar_one()
    assert rows_m5 == 1
    assert per_minute[start + timedelta(minutes=5)] == 60 + 30
    assert per_minute[start + timedelta(minutes=9)] == 60 + 10
    assert sum(per_minute.values()) == 20 * 60 + 40
    assert hour_total == 20 * 60 + 40
    assert fives == {start + timedelta(minutes=m): 300 + (40 if m == 5 else 0)
                     for m in (0, 5, 10, 15)}
    # The late samples are in the minute's sketch, not just its counts.
    m5 = start + timedelta(minutes=5)
    in_m5 = _values_of(case, [r for r in on_time if m5 <= r["t"] < m5 + timedelta(minutes=1)]
                       + late, case.prefixes[0])
    got = decode(sketch)
    assert got.count == in_m5.size == 90
    for q in (0.5, 0.9, 1.0):
        exact = np.quantile(in_m5, q, method="lower")
        assert abs((got.quantile(q) or 0) - exact) / exact <= 0.01
    b5 = start + timedelta(minutes=5)
    in_b5 = _values_of(case, [r for r in on_time if b5 <= r["t"] < b5 + timedelta(minutes=5)]
                       + late + silent, case.prefixes[0])
    got5 = decode(five_sketch)
    assert got5.count == in_b5.size == 340
    for q in [*PCTS, 1.0]:
        exact = np.quantile(in_b5, q, method="lower")
        assert abs((got5.quantile(q) or 0) - exact) / exact <= 0.01


# --- a level added to a database that already holds minutes --------------------------


def test_a_level_added_later_fills_its_history_from_the_newest_bucket_back(
        db: Engine, org_id: str) -> None:
    rng = np.random.default_rng(5)
    now = datetime.now(UTC)
    start = rollups.floor_time(now - timedelta(hours=3), 3600)
    a, b = uuid.uuid4(), uuid.uuid4()
    values = _heavy_tailed(rng, 7200)  # 2 h at 1 sample/s
    _insert_mesh(db, org_id, a, b, start, values, 1.0, lost_every=40)
    o = uuid.UUID(org_id)
    with db.begin() as conn:
        rollups.roll_up_minutes(conn, "mesh", start, start + timedelta(hours=2), o)
    # What migration 0006 leaves in a database with minute rows: a fill mark at the first
    # 5-minute bucket after it ran.
    key = rollups.fill_key("mesh", 300)
    first_mark = rollups.floor_time(now, 300) + timedelta(minutes=5)
    with db.begin() as conn:
        conn.execute(text("INSERT INTO rollup_watermarks (kind, rolled_until) VALUES (:k, :t) "
                          "ON CONFLICT (kind) DO UPDATE SET rolled_until = :t"),
                     {"k": key, "t": first_mark})
    marks = [first_mark]
    try:
        for _ in range(5000):
            with db.begin() as conn:
                # One span per call (no time budget), newest first.
                assert rollups.fill_level_history(conn, "mesh", 300, budget_s=0) is not None
                mark = conn.execute(text("SELECT rolled_until FROM rollup_watermarks "
                                         "WHERE kind = :k"), {"k": key}).scalar()
            if mark is None:
                break
            assert mark < marks[-1] and int(mark.timestamp()) % 300 == 0
            marks.append(mark)
        else:
            pytest.fail("the fill never finished")
    finally:
        with db.begin() as conn:
            conn.execute(text("DELETE FROM rollup_watermarks WHERE kind = :k"), {"k": key})
    assert marks[-1] <= start  # it went back past the first minute of the series
    with db.begin() as conn:
        assert rollups.fill_level_history(conn, "mesh", 300) is None  # done: no mark left

    def five_minute_rows() -> list[str]:
        with db.connect() as conn:
            return list(conn.execute(text(
                "SELECT (to_jsonb(r) - 'computed_at')::text FROM mesh_rollups r "
                "WHERE org_id = :o AND bucket_s = 300 ORDER BY bucket_start"),
                {"o": org_id}).scalars())

    filled = five_minute_rows()
    assert len(filled) == 24
    # The same rows as the worker's regular roll of those buckets.
    with db.begin() as conn:
        rollups.roll_up_coarse(conn, "mesh", 300,
                               _buckets(org_id, start, start + timedelta(hours=2), 300))
    assert five_minute_rows() == filled
    with db.connect() as conn:
        rows = conn.execute(text(
            "SELECT sample_count, failure_count, rtt_us_sketch FROM mesh_rollups "
            "WHERE org_id = :o AND bucket_s = 300 ORDER BY bucket_start"), {"o": org_id}).all()
    assert [r.sample_count for r in rows] == [300] * 24
    assert sum(r.failure_count for r in rows) == 7200 // 40
    kept = values[np.arange(values.size) % 40 != 39]
    merged = merge_sketches(decode(r.rtt_us_sketch) for r in rows)
    assert merged.count == kept.size
    for q in PCTS:
        exact = np.quantile(kept, q, method="lower")
        got = merged.quantile(q)
        assert got is not None and abs(got - exact) / exact <= 0.01, (q, got, exact)


def test_fractional_values_roll_up_to_the_same_bits_whatever_order_the_rows_come_in() -> None:
    # Throughput rates are fractional: float sums depend on the order of addition, and
    # PostgreSQL returns raw rows in no set order, so a rerun must not depend on it.
    rng = np.random.default_rng(5)
    v = rng.lognormal(np.log(4e8), 0.3, 5000)
    g = rng.integers(0, 7, v.size)
    late = rng.random(v.size) < 0.5
    minute = group_stats.stats_from_values(v, g, 7, late)
    rows = np.arange(7) % 2  # the seven groups' rows merged into two coarser ones
    merged = group_stats.merge_stat_rows(rows, 2, minute.count.astype(np.float64),
                                         minute.minimum, minute.maximum, minute.total,
                                         minute.total_sq, minute.sketches)
    for _ in range(3):
        p = rng.permutation(v.size)
        again = group_stats.stats_from_values(v[p], g[p], 7, late[p])
        assert again.total.tobytes() == minute.total.tobytes()
        assert again.total_sq.tobytes() == minute.total_sq.tobytes()
        assert again.sketches == minute.sketches
        q = rng.permutation(7)
        shuffled = group_stats.merge_stat_rows(
            rows[q], 2, minute.count[q].astype(np.float64), minute.minimum[q],
            minute.maximum[q], minute.total[q], minute.total_sq[q],
            [minute.sketches[i] for i in q])
        assert shuffled.total.tobytes() == merged.total.tobytes()
        assert shuffled.total_sq.tobytes() == merged.total_sq.tobytes()
