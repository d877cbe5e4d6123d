"""Retention on plain PostgreSQL, end to end: an org's raw and rollup retention are set
through the settings API, samples arrive through ingest, and the Celery retention tasks
remove exactly what is older than each org's own setting, leaving other orgs alone."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, text

from stormwatch.core.config import get_settings
from stormwatch.core.db import get_sync_engine
from stormwatch.services import maintenance
from tests.conftest import Services
from tests.helpers import EnrolledAgent, enroll, post_batch


@pytest.fixture
def tasks(services: Services) -> Iterator[Any]:
    """The worker's task module, its engine pointed at the test database."""
    get_settings.cache_clear()
    get_sync_engine.cache_clear()
    assert get_settings().database_url == services.database_url
    from stormwatch.worker.tasks import maintenance as maintenance_tasks
    from stormwatch.worker.tasks import rollups as rollup_tasks

    yield {"raw": maintenance_tasks.enforce_raw_retention,
           "rollups": rollup_tasks.apply_rollup_retention}
    get_sync_engine().dispose()
    get_sync_engine.cache_clear()


def _headers(org: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {org.api_key}"}


def _set_org(api: httpx.Client, org: Any, **body: int) -> dict[str, Any]:
    r = api.patch("/api/v1/org", json=body, headers=_headers(org))
    assert r.status_code == 200, r.text
    return r.json()


def _post_aged(api: httpx.Client, src: EnrolledAgent, dst: str,
               ages: list[timedelta]) -> None:
    now_us = int(datetime.now(UTC).timestamp() * 1_000_000)
    times = [now_us - int(a.total_seconds() * 1_000_000) for a in ages]
    n = len(times)
    batch = {"batch_id": str(uuid.uuid4()), "agent_id": src.agent_id,
             "mesh": {"peers": [dst], "time_us": times, "peer_idx": [0] * n,
                      "round": list(range(n)), "payload_bytes": [1024] * n,
                      "rtt_us": [500] * n, "status": [0] * n},
             "quorum": {"groups": ["g"], "time_us": times, "group_idx": [0] * n,
                        "round": list(range(n)), "k": [1] * n, "n": [2] * n,
                        "latency_us": [700] * n, "status": [0] * n}}
    r = post_batch(api, src, batch)
    assert r.status_code == 202, r.text


def _ages(db: Engine, table: str, org_id: str) -> list[float]:
    """Ages in days of an org's raw rows, oldest first."""
    with db.connect() as conn:
        return [round(a, 2) for a in conn.execute(text(
            f"SELECT extract(epoch FROM now() - time) / 86400 FROM {table} WHERE org_id = :o "
            "ORDER BY time"), {"o": org_id}).scalars()]


def test_raw_rows_older_than_the_org_s_setting_go_and_the_rest_stay(
        api: httpx.Client, make_org: Callable, db: Engine, tasks: Any) -> None:
    short, default = make_org(), make_org()
    agents = {}
    for key, org in (("short", short), ("default", default)):
        a = enroll(api, org.enrollment_token, f"ret-{key}-a")
        b = enroll(api, org.enrollment_token, f"ret-{key}-b")
        agents[key] = (a, b)
    hour, day = timedelta(hours=1), timedelta(days=1)
    _post_aged(api, agents["short"][0], agents["short"][1].agent_id,
               [6 * day, 4 * day, 2 * day, hour])
    _post_aged(api, agents["default"][0], agents["default"][1].agent_id,
               [13 * day, 10 * day, 6 * day, hour])
    # Past the longest retention an org may set: a whole partition for the drop to take.
    old = datetime.now(UTC) - timedelta(days=maintenance.MAX_RAW_RETENTION_DAYS + 10)
    with db.begin() as conn:
        conn.execute(text("SELECT sw_ensure_partitions('mesh_raw', :t, :t)"), {"t": old})
        conn.execute(text(
            "INSERT INTO mesh_samples (time, org_id, src_agent_id, dst_agent_id, round, "
            "payload_bytes, rtt_us, status) VALUES (:t, :o, :a, :a, 0, 1024, 500, 0)"),
            {"t": old, "o": default.org_id, "a": agents["default"][0].agent_id})
    old_part = f"mesh_raw_p{old:%Y%m%d}"

    assert _set_org(api, short, raw_retention_days=3)["raw_retention_days"] == 3
    assert _set_org(api, default)["raw_retention_days"] == 14  # the default

    removed = tasks["raw"].apply().get()
    assert removed["mesh_raw"] >= 3 and removed["quorum_samples"] >= 2
    for table in ("mesh_samples", "quorum_samples"):
        ages = _ages(db, table, short.org_id)
        assert len(ages) == 2 and all(a < 3 for a in ages), (table, ages)
    # The other org keeps everything inside its 14 days; the partition past 100 days is gone.
    assert [round(a) for a in _ages(db, "mesh_samples", default.org_id)] == [13, 10, 6, 0]
    assert [round(a) for a in _ages(db, "quorum_samples", default.org_id)] == [13, 10, 6, 0]
    with db.connect() as conn:
        assert conn.execute(text("SELECT to_regclass(:p)"), {"p": old_part}).scalar() is None

    # Idempotent: nothing left to remove.
    assert set(tasks["raw"].apply().get().values()) == {0}

    # Shortening the other org's retention takes its older rows on the next run.
    assert _set_org(api, default, raw_retention_days=5)["raw_retention_days"] == 5
    tasks["raw"].apply().get()
    assert [round(a) for a in _ages(db, "mesh_samples", default.org_id)] == [0]
    assert len(_ages(db, "mesh_samples", short.org_id)) == 2


def test_the_settings_api_bounds_raw_retention_by_what_storage_keeps(
        api: httpx.Client, make_org: Callable) -> None:
    org = make_org()
    top = maintenance.MAX_RAW_RETENTION_DAYS
    assert _set_org(api, org, raw_retention_days=top)["raw_retention_days"] == top
    r = api.patch("/api/v1/org", json={"raw_retention_days": top + 1}, headers=_headers(org))
    assert r.status_code == 422 and r.json()["detail"][0]["loc"][-1] == "raw_retention_days"
    _set_org(api, org, raw_retention_days=14)  # the longest setting decides what is dropped


def _rollup_row(conn: Any, table: str, org_id: str, age: timedelta, tag: uuid.UUID,
                bucket_s: int = 86400) -> None:
    start = datetime.now(UTC) - age
    if table == "mesh_rollups":
        cols, keys = "src_agent_id, dst_agent_id, payload_bytes", ":k, :k, 1024"
        prefix = "rtt_us"
    else:
        cols, keys = "agent_id, group_name, k, n", ":k, 'g', 1, 2"
        prefix = "latency_us"
    conn.execute(text(
        f"INSERT INTO {table} (org_id, bucket_s, bucket_start, {cols}, sample_count, "
        f"failure_count, {prefix}_count, {prefix}_sum, {prefix}_sum_sq, {prefix}_sketch) "
        f"VALUES (:o, :bs, :b, {keys}, 1, 0, 1, 1, 1, '\\x'::bytea)"),
        {"o": org_id, "bs": bucket_s, "b": start, "k": tag})


def _rollup_ages(db: Engine, table: str, org_id: str) -> list[int]:
    with db.connect() as conn:
        return [round(a) for a in conn.execute(text(
            f"SELECT extract(epoch FROM now() - bucket_start) / 86400 FROM {table} "
            "WHERE org_id = :o ORDER BY bucket_start"), {"o": org_id}).scalars()]


def test_rollups_older_than_the_org_s_setting_go_and_the_rest_stay(
        api: httpx.Client, make_org: Callable, db: Engine, tasks: Any) -> None:
    short, default = make_org(), make_org()
    day = timedelta(days=1)
    with db.begin() as conn:
        for table in ("mesh_rollups", "quorum_rollups"):
            for age in (40, 10):
                _rollup_row(conn, table, short.org_id, age * day, uuid.uuid4())
            for age in (410, 390, 40):
                _rollup_row(conn, table, default.org_id, age * day, uuid.uuid4())
    assert _set_org(api, short, rollup_retention_days=30)["rollup_retention_days"] == 30
    assert _set_org(api, default)["rollup_retention_days"] == 400  # the default

    removed = tasks["rollups"].apply().get()
    assert removed["mesh_rollups"] >= 2 and removed["quorum_rollups"] >= 2
    for table in ("mesh_rollups", "quorum_rollups"):
        assert _rollup_ages(db, table, short.org_id) == [10]
        assert _rollup_ages(db, table, default.org_id) == [390, 40]
    assert set(tasks["rollups"].apply().get().values()) == {0}


def test_every_rollup_level_follows_the_org_s_rollup_retention(
        api: httpx.Client, make_org: Callable, db: Engine, tasks: Any) -> None:
    org = make_org()
    day = timedelta(days=1)
    with db.begin() as conn:
        for table in ("mesh_rollups", "quorum_rollups"):
            for bucket_s in (60, 300, 3600):
                for age in (40, 10):
                    _rollup_row(conn, table, org.org_id, age * day, uuid.uuid4(), bucket_s)
    assert _set_org(api, org, rollup_retention_days=30)["rollup_retention_days"] == 30
    tasks["rollups"].apply().get()
    with db.connect() as conn:
        left = conn.execute(text(
            "SELECT bucket_s, round(extract(epoch FROM now() - bucket_start) / 86400) "
            "FROM mesh_rollups WHERE org_id = :o UNION ALL SELECT bucket_s, "
            "round(extract(epoch FROM now() - bucket_start) / 86400) FROM quorum_rollups "
            "WHERE org_id = :o ORDER BY 1"), {"o": org.org_id}).all()
    assert [(b, int(a)) for b, a in left] == [(60, 10), (60, 10), (300, 10), (300, 10),
                                             (3600, 10), (3600, 10)]
