"""The rollup worker task on a fresh stack (its own database, migrations, API and org): every
sample accepted through the ingest API reaches the 1m, 5m, 1h and 1d rollups whenever it
arrives (before the first pass, after the worker was stopped for hours, as a backfill of days
older than the sweep's lookback), a bounded span per pass, and `/api/v1/health` reports the
backlog until it is drained."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import psycopg
import pytest
from sqlalchemy import Engine, create_engine, text

from stormwatch.core.config import get_settings
from stormwatch.core.db import get_sync_engine
from stormwatch.devtools.bootstrap import OrgCredentials, create_org_sync
from stormwatch.devtools.services import run_migrations
from stormwatch.services import rollups
from tests.conftest import ApiServer, Services
from tests.helpers import EnrolledAgent, enroll, post_batch

KINDS = ("mesh", "quorum")
LEVELS = (60, 300, 3600, 86400)
LEVEL_NAMES = {60: "1m", 300: "5m", 3600: "1h"}
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class Stack:
    api: httpx.Client
    db: Engine
    org: OrgCredentials
    agents: list[EnrolledAgent]
    # The worker's task, its engine on this stack's database.
    roll_up_recent_samples: Callable[[], dict[str, dict[str, int]]]

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.org.api_key}"}

    def health(self) -> dict[str, Any]:
        r = self.api.get("/api/v1/health")
        assert r.status_code in (200, 503), r.text
        return r.json()["rollups"]


@pytest.fixture(scope="module")
def template_db(services: Services) -> Iterator[str]:
    """A database migrated from scratch once, copied for each test (faster than migrating)."""
    name = f"fresh_template_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(_admin(services), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    run_migrations(services.database_url.rsplit("/", 1)[0] + f"/{name}")
    with psycopg.connect(_admin(services), autocommit=True) as conn:
        # A template must have no one connected, and TimescaleDB's background workers connect
        # to every database with the extension: closed to connections, as template0 is.
        conn.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                     "WHERE datname = %s", (name,))
    yield name
    with psycopg.connect(_admin(services), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _admin(services: Services) -> str:
    return f"host=127.0.0.1 port={services.pg.port} user={services.pg.user} dbname=postgres"


@pytest.fixture
def stack(services: Services, template_db: str) -> Iterator[Stack]:
    """A database of its own (the rollup watermarks are global), fresh from the migrations,
    with an API server on it; the worker task module reads it through DATABASE_URL."""
    name = f"fresh_{uuid.uuid4().hex[:12]}"
    admin = _admin(services)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    url = services.database_url.rsplit("/", 1)[0] + f"/{name}"
    server = ApiServer(services, extra_env={"DATABASE_URL": url})
    server.start()
    previous = os.environ["DATABASE_URL"]
    os.environ["DATABASE_URL"] = url
    get_settings.cache_clear()
    get_sync_engine.cache_clear()
    db = create_engine(url.replace("+asyncpg", "+psycopg"))
    try:
        from stormwatch.worker.tasks.rollups import roll_up_recent_samples

        org = create_org_sync(url, "Fresh", f"fresh-{name}@example.test",
                              password="correct horse battery staple")
        with server.client() as api:
            agents = [enroll(api, org.enrollment_token, f"{name}-{i}") for i in range(3)]
            yield Stack(api, db, org, agents, roll_up_recent_samples)
    finally:
        db.dispose()
        get_sync_engine().dispose()
        os.environ["DATABASE_URL"] = previous
        get_settings.cache_clear()
        get_sync_engine.cache_clear()
        server.stop()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _us(t: datetime) -> int:
    return (t - EPOCH) // timedelta(microseconds=1)


def post_span(stack: Stack, start: datetime, end: datetime, step_s: float,
              agents: list[EnrolledAgent] | None = None, batch_s: float = 3600) -> int:
    """Posts, through the ingest API, a mesh round to every other agent and a quorum sample
    every `step_s` from each agent over [start, end), a batch per agent per `batch_s`, with
    RTTs that drift, swing and spike and a failure every 37th sample. Returns the sample count
    per kind."""
    agents = agents or stack.agents
    rng = np.random.default_rng(int(start.timestamp()))
    t = np.arange(_us(start), _us(end), int(step_s * 1e6), dtype=np.int64)
    # Jitter within the step: samples fall anywhere in their minute, not on its edges.
    t = t + rng.integers(0, int(step_s * 1e6), t.size)
    per = int(batch_s / step_s)
    posted = 0
    for a in agents:
        peers = [b.agent_id for b in stack.agents if b is not a]
        for i in range(0, t.size, per):
            ts = t[i:i + per]
            n = ts.size
            base = 400 + 50 * np.sin(ts / 3.6e9) + (ts - ts[0]) / 1e8
            rtt = np.round(base * rng.lognormal(0, 0.3, n) * np.where(
                rng.random(n) < 0.001, 100, 1)).astype(int)
            failed = (np.arange(i, i + n) % 37) == 36
            m_t = np.repeat(ts, len(peers))
            m_fail = np.repeat(failed, len(peers))
            m_rtt = np.repeat(rtt, len(peers))
            batch = {
                "batch_id": str(uuid.uuid4()), "agent_id": a.agent_id,
                "mesh": {"peers": peers, "time_us": m_t.tolist(),
                         "peer_idx": np.tile(np.arange(len(peers)), n).tolist(),
                         "round": np.repeat(np.arange(i, i + n), len(peers)).tolist(),
                         "payload_bytes": [1024] * m_t.size,
                         "rtt_us": [None if f else int(v)
                                    for f, v in zip(m_fail, m_rtt, strict=True)],
                         "status": np.where(m_fail, 1, 0).tolist()},
                "quorum": {"groups": ["q"], "time_us": ts.tolist(), "group_idx": [0] * n,
                           "round": list(range(i, i + n)), "k": [2] * n, "n": [3] * n,
                           "latency_us": [None if f else int(v) * 2
                                          for f, v in zip(failed, rtt, strict=True)],
                           "status": np.where(failed, 3, 0).tolist()},
            }
            r = post_batch(stack.api, a, batch)
            assert r.status_code == 202, r.text
            posted += n
    return posted


def counts(stack: Stack, kind: str) -> dict[str, tuple[int, int]]:
    """(samples, failures) of the org: raw, and summed at every rollup level."""
    k = rollups.KINDS[kind]
    with stack.db.connect() as conn:
        raw = conn.execute(text(
            f"SELECT count(*), count(*) FILTER (WHERE {k.failure_sql}) FROM {k.raw_table} "
            "WHERE org_id = :o"), {"o": stack.org.org_id}).one()
        rolled = {r[0]: (int(r[1]), int(r[2])) for r in conn.execute(text(
            f"SELECT bucket_s, sum(sample_count), sum(failure_count) FROM {k.table} "
            "WHERE org_id = :o GROUP BY 1"), {"o": stack.org.org_id})}
    out = {"raw": (int(raw[0]), int(raw[1]))}
    out.update({str(level): rolled.get(level, (0, 0)) for level in LEVELS})
    return out


def assert_every_level_holds_every_sample(stack: Stack) -> None:
    for kind in KINDS:
        got = counts(stack, kind)
        print(kind, got)  # shown with -s: the figures behind the assertion
        assert got["raw"][0] > 0
        assert {lv: got[str(lv)] for lv in LEVELS} == {lv: got["raw"] for lv in LEVELS}, \
            (kind, got)


def summary_samples(stack: Stack, kind: str, start: datetime, end: datetime,
                    resolution: str) -> int:
    r = stack.api.get(f"/api/v1/analytics/{kind}/summary", headers=stack.headers, params={
        "start": start.isoformat(), "end": end.isoformat(), "resolution": resolution})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["source"]["resolution"] == resolution
    return sum(g["samples"] for g in body["groups"])


def assert_raw_and_rollup_answers_agree(stack: Stack, start: datetime, end: datetime) -> None:
    """The analysis API's sample counts over whole hours: raw and every level the same."""
    for kind in KINDS:
        raw = summary_samples(stack, kind, start, end, "raw")
        assert raw > 0
        for level in LEVEL_NAMES.values():
            assert summary_samples(stack, kind, start, end, level) == raw, (kind, level)


def drain(stack: Stack, max_passes: int) -> list[dict[str, Any]]:
    """Runs the worker's pass until health reports no backlog for any kind; returns the
    backlog seen after each pass."""
    seen = []
    for _ in range(max_passes):
        stack.roll_up_recent_samples()
        backlog = stack.health()
        seen.append(backlog)
        if all(b["dirty_minutes"] == 0 and b["oldest_unrolled_at"] is None
               for b in backlog["kinds"].values()):
            return seen
    raise AssertionError(f"backlog left after {max_passes} passes: {seen[-1]}")


def _t(s: str | None) -> datetime | None:
    return None if s is None else datetime.fromisoformat(s)


def assert_bounded(seen: list[dict[str, Any]], before: datetime) -> None:
    """The minute watermark moves at most MAX_MINUTES_PER_PASS a pass, oldest first."""
    for kind in KINDS:
        marks = [before] + [_t(b["kinds"][kind]["rolled_until"]) for b in seen]
        steps = [b - a for a, b in zip(marks, marks[1:], strict=False)
                 if a is not None and b is not None]
        assert all(s <= timedelta(minutes=rollups.MAX_MINUTES_PER_PASS) for s in steps), steps


def test_samples_posted_before_the_first_pass_reach_every_level_within_a_few_passes(
        stack: Stack) -> None:
    now = datetime.now(UTC)
    # Six hours of whole minutes, the last one closed before the worker's settle margin.
    end = rollups.floor_time(now, 60) - timedelta(minutes=1)
    start = end - timedelta(hours=6)
    posted = post_span(stack, start, end, step_s=10.0)
    assert posted == 3 * 2160
    backlog = stack.health()
    assert backlog["ok"] is True
    for kind in KINDS:
        b = backlog["kinds"][kind]
        # No pass yet: no watermark, nothing marked, every sample waiting from the first.
        assert b["rolled_until"] is None and b["dirty_minutes"] == 0
        assert start <= _t(b["oldest_unrolled_at"]) < start + timedelta(seconds=10)
    seen = drain(stack, max_passes=6)
    # 6 h at two hours a pass: three passes and the one that finds nothing left.
    assert counts(stack, "mesh")["raw"] == (2 * posted, 2 * (posted // 3 // 37) * 3)
    assert counts(stack, "quorum")["raw"][0] == posted
    assert_every_level_holds_every_sample(stack)
    assert len(seen) <= 4, len(seen)
    assert_bounded(seen, rollups.floor_time(start, 60))
    hours = (rollups.floor_time(start, 3600) + timedelta(hours=1), rollups.floor_time(end, 3600))
    assert_raw_and_rollup_answers_agree(stack, *hours)


def test_a_worker_stopped_for_four_hours_catches_up_on_every_sample(stack: Stack) -> None:
    real_now = datetime.now(UTC)
    stopped = rollups.floor_time(real_now, 60) - timedelta(hours=4)
    # Before the outage: four hours of samples, rolled by passes as of that time.
    post_span(stack, stopped - timedelta(hours=4), stopped, step_s=20.0)
    engine = get_sync_engine()
    for _ in range(4):
        for kind in rollups.KINDS:
            rollups.run_minute_pass(engine, kind, now=stopped + timedelta(seconds=45))
    before = stack.health()["kinds"]
    for kind in KINDS:
        assert _t(before[kind]["rolled_until"]) == stopped
        assert before[kind]["oldest_unrolled_at"] is None
    # The outage: four hours of samples arrive as they are measured while no pass runs, and
    # one agent's spool from two hours before the outage arrives late.
    end = rollups.floor_time(datetime.now(UTC), 60) - timedelta(minutes=1)
    post_span(stack, stopped, end, step_s=20.0, batch_s=600)
    spool_start = stopped - timedelta(hours=2)
    post_span(stack, spool_start, spool_start + timedelta(hours=1), step_s=20.0,
              agents=stack.agents[:1])
    during = stack.health()["kinds"]
    for kind in KINDS:
        # The spool landed below the claim: marked, and the oldest unrolled sample.
        assert during[kind]["dirty_minutes"] == 60
        assert _t(during[kind]["oldest_unrolled_at"]) == spool_start
        assert _t(during[kind]["rolled_until"]) == stopped
    seen = drain(stack, max_passes=6)
    assert_every_level_holds_every_sample(stack)
    assert len(seen) <= 4, len(seen)
    assert_bounded(seen, stopped)
    assert_raw_and_rollup_answers_agree(stack, rollups.floor_time(stopped, 3600) -
                                        timedelta(hours=3), rollups.floor_time(end, 3600))


def test_a_backfill_of_days_older_than_the_sweep_lookback_reaches_every_level(
        stack: Stack) -> None:
    drain(stack, max_passes=2)  # the worker has run: watermarks are current
    now = datetime.now(UTC)
    start = rollups.floor_time(now, 86400) - timedelta(days=3)
    end = start + timedelta(days=2)
    posted = post_span(stack, start, end, step_s=60.0, batch_s=6 * 3600)
    assert posted == 3 * 2880
    backlog = stack.health()["kinds"]
    for kind in KINDS:
        assert backlog[kind]["dirty_minutes"] == 2880
        assert start <= _t(backlog[kind]["oldest_unrolled_at"]) < start + timedelta(minutes=1)
    seen = drain(stack, max_passes=5)
    # At most MAX_DIRTY_MINUTES_PER_PASS marked minutes a pass, oldest first.
    left = [s["kinds"]["mesh"]["dirty_minutes"] for s in seen]
    assert left[0] >= 2880 - rollups.MAX_DIRTY_MINUTES_PER_PASS and len(seen) <= 3, left
    oldest_after_first = _t(seen[0]["kinds"]["mesh"]["oldest_unrolled_at"])
    assert oldest_after_first is None or oldest_after_first >= start + timedelta(
        minutes=2880 - left[0])
    assert_every_level_holds_every_sample(stack)
    assert counts(stack, "quorum")["86400"][0] == posted
    assert_raw_and_rollup_answers_agree(stack, start, end)


def _waiting_on_a_lock(db: Engine, marker: str) -> bool:
    with db.connect() as conn:
        return bool(conn.execute(text(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND query LIKE :q"), {"q": f"%{marker}%"}).scalar())


def _until(cond: Callable[[], bool], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


async def test_a_batch_committing_while_a_pass_claims_is_read_by_it_or_marked_for_it(
        stack: Stack, services: Services) -> None:
    """Both orders of a batch's commit and a pass's claim, held open on purpose: the claim
    waits for a batch that read the old claim, and a batch that reads the new one marks."""
    import asyncpg

    drain(stack, max_passes=2)
    engine = get_sync_engine()
    src, dst = stack.agents[0].agent_id, stack.agents[1].agent_id
    org = uuid.UUID(stack.org.org_id)
    dsn = services.database_url.replace("postgresql+asyncpg", "postgresql").rsplit("/", 1)[0]
    conn = await asyncpg.connect(f"{dsn}/{stack.db.url.database}")

    def rolled_at(minute: datetime) -> int:
        with stack.db.connect() as c:
            return int(c.execute(text(
                "SELECT coalesce(sum(sample_count), 0) FROM mesh_rollups WHERE org_id = :o "
                "AND bucket_s = 60 AND bucket_start = :m"), {"o": org, "m": minute}).scalar())

    def mesh_claim() -> datetime:
        with stack.db.connect() as c:
            return c.execute(text("SELECT rolled_until FROM rollup_watermarks WHERE kind = "
                                  "'mesh:60:claim'")).scalar_one()

    async def open_batch(t: datetime) -> Any:
        """An ingest transaction, left open, that has stored one sample at t."""
        tx = conn.transaction()
        await tx.start()
        await conn.execute(
            "INSERT INTO mesh_samples (time, org_id, src_agent_id, dst_agent_id, round, "
            "payload_bytes, rtt_us, status) VALUES ($1, $2, $3, $4, 0, 1024, 500, 0)",
            t, org, uuid.UUID(src), uuid.UUID(dst))
        return tx

    try:
        claim = mesh_claim()
        # 1. The batch reads the claim first (its minute is not below it: no mark) and holds
        # it; the pass's claim waits for the batch's commit, so its read sees the sample.
        t1 = claim + timedelta(seconds=1)
        tx = await open_batch(t1)
        await rollups.mark_minutes(conn, "mesh", org, [rollups.floor_time(t1, 60)])
        result: dict[str, Any] = {}
        later = claim + timedelta(minutes=3)
        worker = threading.Thread(target=lambda: result.update(
            rollups.run_minute_pass(engine, "mesh", now=later)))
        worker.start()
        _until(lambda: _waiting_on_a_lock(stack.db, "greatest(rollup_watermarks.rolled_until"))
        assert worker.is_alive()
        await tx.commit()
        worker.join(60)
        assert not worker.is_alive() and result["minutes"] >= 1
        assert rolled_at(rollups.floor_time(t1, 60)) == 1
        # 2. The pass claims first; the batch, still open, then reads the new claim and
        # marks its minute; the pass's read misses it, the next pass re-rolls it.
        claim = mesh_claim()
        t2 = claim + timedelta(seconds=2)
        tx = await open_batch(t2)
        later = claim + timedelta(minutes=3)
        with engine.begin() as c:
            rollups.claim_minutes(c, "mesh", now=later)
        await rollups.mark_minutes(conn, "mesh", org, [rollups.floor_time(t2, 60)])
        with engine.begin() as c:
            rollups.roll_up_recent(c, "mesh", now=later)
        assert rolled_at(rollups.floor_time(t2, 60)) == 0
        await tx.commit()
        with stack.db.connect() as c:
            assert c.execute(text("SELECT count(*) FROM rollup_dirty_minutes WHERE "
                                  "kind = 'mesh'")).scalar() == 1
        rollups.run_minute_pass(engine, "mesh", now=later)
        assert rolled_at(rollups.floor_time(t2, 60)) == 1
    finally:
        await conn.close()
