"""TimescaleDB: every path that touches raw rows works once their chunks are compressed.

Samples arrive through ingest, their chunks are compressed for real (compress_chunk), and then
raw analyses, late samples and the rollups that re-read them, per-org retention deletes,
chunk drops and re-enrolment are run against them. Plain PostgreSQL has no compression: the
module is skipped on that pass (the TimescaleDB pass of `make test` runs it)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import pytest
from sqlalchemy import Engine, text

from stormwatch.core.config import get_settings
from stormwatch.core.db import get_sync_engine
from stormwatch.devtools.services import requested_engine
from stormwatch.services import maintenance, rollups
from tests.conftest import ApiServer, Services
from tests.helpers import EnrolledAgent, enroll, post_batch

# The pass's engine (the session fixture asserts the schema is on it); decided before any
# fixture starts a server.
pytestmark = pytest.mark.skipif(requested_engine() != "timescaledb",
                                reason="compression is TimescaleDB's; a plain PostgreSQL pass")

HOUR, DAY = timedelta(hours=1), timedelta(days=1)
# The hypertables (mesh rows live in mesh_raw, keyed by series, since migration 0014) and
# the tables or views that show rows with their org.
RAW_TABLES = ("mesh_raw", "quorum_samples")
ORG_VIEWS = ("mesh_samples", "quorum_samples")


@dataclass
class Org:
    creds: Any
    a: EnrolledAgent
    b: EnrolledAgent

    @property
    def id(self) -> str:
        return str(self.creds.org_id)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.creds.api_key}"}


def _batch(src: EnrolledAgent, dst: str, times: datetime | list[datetime],
           rtt_us: list[int]) -> dict[str, Any]:
    stamps = times if isinstance(times, list) else [times] * len(rtt_us)
    t_us = [int(t.timestamp() * 1_000_000) for t in stamps]
    n = len(t_us)
    return {"batch_id": str(uuid.uuid4()), "agent_id": src.agent_id,
            "mesh": {"peers": [dst], "time_us": t_us, "peer_idx": [0] * n,
                     "round": list(range(n)), "payload_bytes": [1024] * n,
                     "rtt_us": rtt_us, "status": [0] * n},
            "quorum": {"groups": ["g"], "time_us": t_us, "group_idx": [0] * n,
                       "round": list(range(n)), "k": [1] * n, "n": [2] * n,
                       "latency_us": rtt_us, "status": [0] * n}}


def _post(client: httpx.Client, org: Org, times: list[datetime], rtt_us: list[int]) -> None:
    r = post_batch(client, org.a, _batch(org.a, org.b.agent_id, times, rtt_us))
    assert r.status_code == 202, r.text


def _compress_all(db: Engine) -> int:
    """Compresses every chunk of the raw tables that holds rows; returns how many are."""
    with db.begin() as conn:
        for table in RAW_TABLES:
            conn.execute(text(f"SELECT compress_chunk(c, if_not_compressed => true) "  # noqa: S608
                              f"FROM show_chunks('{table}') c"))
        return int(conn.execute(text(
            "SELECT count(*) FROM timescaledb_information.chunks WHERE is_compressed AND "
            "hypertable_name IN ('mesh_raw', 'quorum_samples')")).scalar_one())


def _compressed_rows(db: Engine, org_id: str) -> int:
    """The org's mesh rows that sit in compressed chunks (read through the chunk itself)."""
    with db.connect() as conn:
        chunks = conn.execute(text(
            "SELECT format('%I.%I', chunk_schema, chunk_name) FROM "
            "timescaledb_information.chunks WHERE hypertable_name = 'mesh_raw' "
            "AND is_compressed")).scalars().all()
        return sum(int(conn.execute(text(
            f"SELECT count(*) FROM {c} WHERE series_id IN "  # noqa: S608
            "(SELECT id FROM mesh_series WHERE org_id = :o)"), {"o": org_id}).scalar_one())
            for c in chunks)


def _summary(client: httpx.Client, org: Org, start: datetime, end: datetime) -> dict[str, Any]:
    r = client.get("/api/v1/analytics/mesh/summary", headers=org.headers, params={
        "start": start.isoformat(), "end": end.isoformat(), "src": org.a.agent_id,
        "dst": org.b.agent_id, "resolution": "raw"})
    assert r.status_code == 200, r.text
    (g,) = r.json()["groups"]
    return g


@pytest.fixture(scope="module")
def client(api_server: ApiServer) -> Iterator[httpx.Client]:
    with api_server.client() as c:
        yield c


@pytest.fixture(scope="module")
def worker_db(services: Services) -> Iterator[None]:
    get_settings.cache_clear()
    get_sync_engine.cache_clear()
    yield
    get_sync_engine().dispose()
    get_sync_engine.cache_clear()


def _org(client: httpx.Client, make_org: Callable, tag: str) -> Org:
    creds = make_org()
    return Org(creds, enroll(client, creds.enrollment_token, f"cz-{tag}-a"),
               enroll(client, creds.enrollment_token, f"cz-{tag}-b"))


def test_raw_analyses_read_compressed_chunks_exactly(
        client: httpx.Client, make_org: Callable, db: Engine) -> None:
    org = _org(client, make_org, "raw")
    rng = np.random.default_rng(19)
    start = datetime.now(UTC).replace(microsecond=0) - 5 * HOUR
    n = 3 * 3600 // 10  # a sample every 10 s over three hourly chunks
    times = [start + timedelta(seconds=10 * i) for i in range(n)]
    values = np.round(rng.lognormal(np.log(800), 0.3, n)).astype(np.int64)
    _post(client, org, times, values.tolist())
    assert _compress_all(db) >= 3
    assert _compressed_rows(db, org.id) == n

    g = _summary(client, org, start, start + 3 * HOUR)
    assert g["count"] == n
    assert g["mean"] == pytest.approx(values.mean())
    assert g["max"] == values.max() and g["min"] == values.min()
    assert g["percentiles"]["p50"] == float(np.quantile(values, 0.5, method="lower"))


def test_late_samples_land_in_compressed_chunks_and_the_rollups_count_them(
        client: httpx.Client, make_org: Callable, db: Engine) -> None:
    org = _org(client, make_org, "late")
    minute = datetime.now(UTC).replace(second=0, microsecond=0) - 4 * HOUR
    on_time = [minute + timedelta(seconds=s) for s in range(0, 60, 2)]  # 30 samples
    _post(client, org, on_time, [500] * len(on_time))
    _compress_all(db)
    assert _compressed_rows(db, org.id) == 30
    with db.begin() as conn:
        rollups.roll_up_minutes(conn, "mesh", minute, minute + timedelta(minutes=1),
                                uuid.UUID(org.id))

    # A late batch for the same minute (an agent that was cut off, then caught up).
    late = [minute + timedelta(seconds=s) for s in range(1, 60, 6)]  # 10 samples
    _post(client, org, late, [9_000] * len(late))
    with db.begin() as conn:
        rollups.roll_up_minutes(conn, "mesh", minute, minute + timedelta(minutes=1),
                                uuid.UUID(org.id))
        row = conn.execute(text(
            "SELECT sample_count, rtt_us_count, rtt_us_max FROM mesh_rollups WHERE org_id = :o "
            "AND bucket_s = 60 AND bucket_start = :m"), {"o": org.id, "m": minute}).one()
    assert tuple(row) == (40, 40, 9_000)
    g = _summary(client, org, minute, minute + timedelta(minutes=1))
    assert g["count"] == 40 and g["max"] == 9_000
    # Compressed again (as the policy would), the chunk still answers the same.
    _compress_all(db)
    assert _compressed_rows(db, org.id) == 40
    assert _summary(client, org, minute, minute + timedelta(minutes=1))["count"] == 40


def test_per_org_retention_deletes_from_compressed_chunks_and_drops_old_ones(
        client: httpx.Client, make_org: Callable, db: Engine, worker_db: None) -> None:
    short, other = _org(client, make_org, "short"), _org(client, make_org, "other")
    now = datetime.now(UTC)
    for org in (short, other):
        _post(client, org, [now - 5 * DAY, now - 4 * DAY, now - 2 * DAY, now - HOUR],
              [400, 410, 420, 430])
    # Past the longest retention any org may set: a whole chunk for the drop to take.
    old = now - timedelta(days=maintenance.MAX_RAW_RETENTION_DAYS + 5)
    with db.begin() as conn:
        conn.execute(text(
            "INSERT INTO mesh_samples (time, org_id, src_agent_id, dst_agent_id, round, "
            "payload_bytes, rtt_us, status) VALUES (:t, :o, :a, :a, 0, 1024, 500, 0)"),
            {"t": old, "o": other.id, "a": other.a.agent_id})
        old_chunk = conn.execute(text(
            "SELECT c FROM show_chunks('mesh_raw', older_than => CAST(:t AS timestamptz)) c"),
            {"t": old + HOUR}).scalar_one()
    _compress_all(db)
    assert _compressed_rows(db, short.id) == 4 and _compressed_rows(db, other.id) == 5

    r = client.patch("/api/v1/org", json={"raw_retention_days": 3}, headers=short.headers)
    assert r.status_code == 200, r.text
    from stormwatch.worker.tasks import maintenance as maintenance_tasks

    removed = maintenance_tasks.enforce_raw_retention.apply().get()
    assert removed["mesh_raw"] >= 3 and removed["quorum_samples"] >= 2

    def ages(table: str, org: Org) -> list[int]:
        with db.connect() as conn:
            return [round(a) for a in conn.execute(text(
                f"SELECT extract(epoch FROM :n - time) / 86400 FROM {table} "  # noqa: S608
                "WHERE org_id = :o ORDER BY time"), {"o": org.id, "n": now}).scalars()]

    for table in ORG_VIEWS:
        assert ages(table, short) == [2, 0], table
        assert ages(table, other) == [5, 4, 2, 0], table
    with db.connect() as conn:
        assert conn.execute(text("SELECT to_regclass(:c)"), {"c": old_chunk}).scalar() is None
    assert set(maintenance_tasks.enforce_raw_retention.apply().get().values()) == {0}


def test_a_re_enrolled_agent_keeps_its_compressed_history(
        client: httpx.Client, make_org: Callable, db: Engine) -> None:
    org = _org(client, make_org, "reenrol")
    start = datetime.now(UTC).replace(microsecond=0) - 3 * HOUR
    _post(client, org, [start + timedelta(seconds=i) for i in range(20)], [700] * 20)
    _compress_all(db)
    assert _compressed_rows(db, org.id) == 20

    # The reinstalled VM enrols under the same name: same agent, a new token.
    again = enroll(client, org.creds.enrollment_token, org.a.name)
    assert again.agent_id == org.a.agent_id and again.token != org.a.token
    org.a = again
    _post(client, org, [start + timedelta(seconds=30 + i) for i in range(5)], [900] * 5)
    g = _summary(client, org, start, start + HOUR)
    assert g["count"] == 25 and g["max"] == 900 and g["min"] == 700
