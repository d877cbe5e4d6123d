"""Rollups against a real PostgreSQL: idempotent, complete after late samples, and exact
to the sketch's 1% on heavy-tailed data."""

from __future__ import annotations

import uuid
from collections.abc import Callable
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
