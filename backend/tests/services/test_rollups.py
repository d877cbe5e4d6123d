"""Rollups against a real PostgreSQL: idempotent, complete after late samples, and exact
to the sketch's 1% on heavy-tailed data."""

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


def _roll_all(db: Engine, org: str, start: datetime, end: datetime) -> None:
    with db.begin() as conn:
        rollups.roll_up_minutes(conn, "mesh", start, end, uuid.UUID(org))
        hours = [(uuid.UUID(org), start + timedelta(hours=h))
                 for h in range(int((end - start).total_seconds() // 3600) + 1)]
        rollups.roll_up_coarse(conn, "mesh", 3600, hours)
        rollups.roll_up_coarse(conn, "mesh", 86400, [(uuid.UUID(org), start)])


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
        days = conn.execute(text(
            "SELECT rtt_us_sketch FROM mesh_rollups WHERE org_id = :o AND bucket_s = 86400"),
            {"o": org_id}).scalars().all()

    one_minute = ab[17 * 300 : 18 * 300]
    assert minute.rtt_us_count == one_minute.size
    cases = [
        (decode(minute.rtt_us_sketch), one_minute),  # a single bucket
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


def test_late_samples_are_rolled_in_without_duplicates(db: Engine, org_id: str) -> None:
    rng = np.random.default_rng(2)
    now = datetime.now(UTC)
    start = rollups.floor_time(now - timedelta(minutes=50), 60)
    a, b = uuid.uuid4(), uuid.uuid4()
    _insert_mesh(db, org_id, a, b, start, _heavy_tailed(rng, 1200), 1.0)
    with db.begin() as conn:
        rollups.roll_up_minutes(conn, "mesh", start, start + timedelta(minutes=20))
        conn.execute(text("INSERT INTO rollup_watermarks (kind, rolled_until) VALUES "
                          "('mesh:60', :t) ON CONFLICT (kind) DO UPDATE SET rolled_until = :t"),
                     {"t": start + timedelta(minutes=20)})
    # Late samples for minute 5, which is already rolled: one batch marks it through the
    # ingest hook, another arrives silently and is found by the count sweep.
    late_marked = _heavy_tailed(rng, 30) * 2
    late_silent = _heavy_tailed(rng, 10) * 3
    t5 = start + timedelta(minutes=5, seconds=0.5)
    _insert_mesh(db, org_id, a, b, t5, late_marked, 1.0)
    _insert_mesh(db, org_id, a, b, start + timedelta(minutes=9, seconds=0.25), late_silent, 1.0)
    with db.begin() as conn:
        assert rollups.mark_late_minutes(conn, "mesh", uuid.UUID(org_id), [t5]) == 1
        assert rollups.sweep_late_minutes(conn, "mesh", timedelta(hours=1)) >= 1
        rollups.roll_up_dirty_minutes(conn, "mesh")
        hours = {(uuid.UUID(org_id), start), (uuid.UUID(org_id), start + timedelta(hours=1))}
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
        rolled_minutes = conn.execute(text(
            "SELECT sum(sample_count) FROM mesh_rollups WHERE org_id = :o AND bucket_s = 60 "
            "AND bucket_start < :e"), {"o": org_id, "e": start + timedelta(minutes=20)}).scalar()
        dirty_left = conn.execute(text("SELECT count(*) FROM rollup_dirty_minutes "
                                       "WHERE org_id = :o"), {"o": org_id}).scalar()
    assert m5 == (1, 60 + 30)
    assert m9 == 60 + 10
    assert rolled_minutes == 20 * 60 + 40
    assert total_hours == rolled_minutes  # hours hold exactly the rolled minutes, once
    assert dirty_left == 0


def test_the_recent_pass_keeps_up_and_is_idempotent(db: Engine, org_id: str) -> None:
    rng = np.random.default_rng(3)
    now = datetime.now(UTC)
    start = rollups.floor_time(now - timedelta(minutes=30), 60)
    a, b = uuid.uuid4(), uuid.uuid4()
    _insert_mesh(db, org_id, a, b, start, _heavy_tailed(rng, 600), 1.0)
    with db.begin() as conn:
        conn.execute(text("DELETE FROM rollup_watermarks WHERE kind LIKE 'mesh:%'"))
        conn.execute(text("INSERT INTO rollup_watermarks (kind, rolled_until) VALUES "
                          "('mesh:60', :t)"), {"t": start})
    for _ in range(2):
        with db.begin() as conn:
            rollups.roll_up_recent(conn, "mesh", now)
    with db.connect() as conn:
        per_level = dict(conn.execute(text(
            "SELECT bucket_s, sum(sample_count) FROM mesh_rollups WHERE org_id = :o "
            "GROUP BY 1"), {"o": org_id}).all())
    assert per_level == {60: 600, 3600: 600, 86400: 600}


async def test_ingest_can_mark_late_minutes_in_its_own_transaction(services: Any, db: Engine,
                                                                   org_id: str) -> None:
    import asyncpg

    now = datetime.now(UTC)
    rolled_until = rollups.floor_time(now - timedelta(minutes=10), 60)
    with db.begin() as conn:
        conn.execute(text("INSERT INTO rollup_watermarks (kind, rolled_until) VALUES "
                          "('quorum:60', :t) ON CONFLICT (kind) DO UPDATE SET rolled_until = :t"),
                     {"t": rolled_until})
    dsn = services.database_url.replace("postgresql+asyncpg", "postgresql")
    conn = await asyncpg.connect(dsn)
    try:
        async with conn.transaction():
            await rollups.mark_late_range(conn, "quorum", uuid.UUID(org_id),
                                          rolled_until - timedelta(minutes=5, seconds=30),
                                          now)
    finally:
        await conn.close()
    with db.connect() as c:
        minutes = c.execute(text(
            "SELECT minute FROM rollup_dirty_minutes WHERE kind = 'quorum' AND org_id = :o "
            "ORDER BY minute"), {"o": org_id}).scalars().all()
    # minutes -6 .. -3 before the watermark: older than the 2-minute re-roll overlap
    assert [rolled_until - m for m in minutes] == [timedelta(minutes=k) for k in (6, 5, 4, 3)]


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
        hours = [(o, start + timedelta(hours=h))
                 for h in range(int((end - start).total_seconds() // 3600) + 1)]
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
            days = conn.execute(text(
                f"SELECT {prefix}_sketch FROM {table} WHERE org_id = :o AND bucket_s = 86400"),
                {"o": org_id}).scalars().all()
            one = _values_of(case, rows[0], prefix)
            in_minute = _values_of(case, [r for r in rows[0] if start + timedelta(minutes=17)
                                          <= r["t"] < start + timedelta(minutes=18)], prefix)
            cases = [(decode(minute), in_minute),
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
    assert counts == {60: 28_800, 3600: 28_800, 86400: 28_800}
    assert failures == (0 if kind == "throughput" else 2 * (14_400 // 97))


@pytest.mark.parametrize("kind", list(KIND_CASES))
def test_late_samples_of_other_kinds_are_rolled_in_once(db: Engine, org_id: str,
                                                        kind: str) -> None:
    case = KIND_CASES[kind]
    rng = np.random.default_rng(12)
    start = rollups.floor_time(datetime.now(UTC) - timedelta(minutes=50), 60)
    (s,) = _series(kind, 1)
    on_time = case.rows(org_id, s, start, _heavy_tailed(rng, 1200) * 25, 1.0)
    _insert(db, case, on_time)
    with db.begin() as conn:
        rollups.roll_up_minutes(conn, kind, start, start + timedelta(minutes=20))
        conn.execute(text("INSERT INTO rollup_watermarks (kind, rolled_until) VALUES "
                          "(:k, :t) ON CONFLICT (kind) DO UPDATE SET rolled_until = :t"),
                     {"k": f"{kind}:60", "t": start + timedelta(minutes=20)})
        rollups.roll_up_coarse(conn, kind, 3600, [(uuid.UUID(org_id), start)])
    late = case.rows(org_id, s, start + timedelta(minutes=5, seconds=0.5),
                     _heavy_tailed(rng, 30) * 50, 1.0)
    silent = case.rows(org_id, s, start + timedelta(minutes=9, seconds=0.25),
                       _heavy_tailed(rng, 10) * 75, 1.0)
    _insert(db, case, late + silent)
    o = uuid.UUID(org_id)
    with db.begin() as conn:
        assert rollups.mark_late_minutes(conn, kind, o, [late[0]["t"]]) == 1
        assert rollups.sweep_late_minutes(conn, kind, timedelta(hours=1)) >= 1
        rollups.roll_up_dirty_minutes(conn, kind)
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
        sketch = conn.execute(text(
            f"SELECT {case.prefixes[0]}_sketch FROM {table} WHERE org_id = :o AND "
            "bucket_s = 60 AND bucket_start = :t"),
            {"o": org_id, "t": start + timedelta(minutes=5)}).scalar_one()
    assert rows_m5 == 1
    assert per_minute[start + timedelta(minutes=5)] == 60 + 30
    assert per_minute[start + timedelta(minutes=9)] == 60 + 10
    assert sum(per_minute.values()) == 20 * 60 + 40
    assert hour_total == 20 * 60 + 40
    # The late samples are in the minute's sketch, not just its counts.
    m5 = start + timedelta(minutes=5)
    in_m5 = _values_of(case, [r for r in on_time if m5 <= r["t"] < m5 + timedelta(minutes=1)]
                       + late, case.prefixes[0])
    got = decode(sketch)
    assert got.count == in_m5.size == 90
    for q in (0.5, 0.9, 1.0):
        exact = np.quantile(in_m5, q, method="lower")
        assert abs((got.quantile(q) or 0) - exact) / exact <= 0.01
