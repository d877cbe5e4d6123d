"""Behaviour when the database goes away and comes back, and under rate limits."""

import os

import pytest
from sqlalchemy import text

from tests.conftest import ApiServer
from tests.helpers import enroll, mesh_batch, post_batch


def test_ingest_answers_503_with_retry_after_while_postgres_is_down_then_recovers(
        api, db, services, make_org):
    org = make_org()
    agents = [enroll(api, org.enrollment_token, f"n{i}") for i in range(2)]
    peers = [a.agent_id for a in agents]
    services.pg.stop("fast")
    try:
        batch = mesh_batch(agents[0], peers, rounds=10)
        r = post_batch(api, agents[0], batch)
        assert r.status_code == 503, r.text
        assert int(r.headers["retry-after"]) > 0
        health = api.get("/api/v1/health")
        assert health.status_code == 503 and health.json()["database"]["ok"] is False
    finally:
        services.pg.start()
    r = post_batch(api, agents[0], batch)
    assert r.status_code == 202, r.text
    with db.connect() as c:
        assert c.execute(text("SELECT count(*) FROM mesh_samples WHERE org_id = :o"),
                         {"o": org.org_id}).scalar() == 20


@pytest.fixture(scope="module")
def strict_api(services):
    server = ApiServer(services, {"INGEST_RATE_BATCHES_PER_MIN": "3"})
    server.start()
    yield server
    server.stop()


def test_an_agent_over_its_rate_gets_429_with_retry_after_and_nothing_is_written(
        strict_api, db, make_org):
    org = make_org()

    def stored() -> tuple[int, list[str]]:
        with db.connect() as c:
            rows = c.execute(text("SELECT count(*) FROM mesh_samples WHERE org_id = :o"),
                             {"o": org.org_id}).scalar()
            ids = c.execute(text("SELECT batch_id::text FROM ingest_batches WHERE org_id = :o"),
                            {"o": org.org_id}).scalars().all()
        return rows, sorted(ids)

    with strict_api.client() as api:
        a = enroll(api, org.enrollment_token, "chatty")
        batches = [mesh_batch(a, [a.agent_id], rounds=2) for _ in range(4)]
        assert [post_batch(api, a, b).status_code for b in batches[:3]] == [202, 202, 202]
        before = stored()
        over = post_batch(api, a, batches[3])
        after = stored()
    assert over.status_code == 429, over.text
    assert 1 <= int(over.headers["retry-after"]) <= 60
    assert before == after == (6, sorted(b["batch_id"] for b in batches[:3]))


def test_health_reports_database_and_redis(api):
    body = api.get("/api/v1/health").json()
    assert body["database"]["ok"] is True
    assert body["redis"]["ok"] is True
    assert "worker" in body and "beat" in body


def test_unknown_env_does_not_leak_into_test_process():
    assert "INGEST_RATE_BATCHES_PER_MIN" not in os.environ
