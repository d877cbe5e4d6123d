"""The API's /metrics on a real uvicorn server: behind its bearer token, requests by route
template and status, and what ingest stored, refused and saw twice."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import ApiServer, Services
from tests.helpers import enroll, mesh_batch, post_batch, serving
from tests.observability.test_worker_metrics import samples

TOKEN = "metrics-token-for-tests-0123456789"


@pytest.fixture(scope="module")
def metered(services: Services) -> Iterator[ApiServer]:
    server = ApiServer(services, {"METRICS_TOKEN": TOKEN})
    server.start()
    yield server
    server.stop()


def scrape(client: httpx.Client) -> dict:
    r = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    return samples(r.text)


def value(got: dict, name: str, **labels: str) -> float:
    return got.get((name, tuple(sorted(labels.items()))), 0.0)


def test_scraping_needs_the_metrics_token_and_no_session(metered):
    with metered.client() as c:
        assert c.get("/metrics").status_code == 401
        assert c.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert c.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_metrics_are_off_without_a_token(api):
    assert api.get("/metrics").status_code == 404


def test_an_ingested_batch_moves_the_ingest_counter_by_its_sample_count(metered, make_org):
    org = make_org()
    with metered.client() as c:
        agents = [enroll(c, org.enrollment_token, f"m-{i}") for i in range(3)]
        before = scrape(c)
        batch = mesh_batch(agents[0], [a.agent_id for a in agents], rounds=37)
        r = post_batch(c, agents[0], batch)
        assert r.status_code == 202, r.text
        sent = len(batch["mesh"]["time_us"])
        assert r.json()["accepted"]["mesh"] == sent == 111
        after = scrape(c)
        delta = (value(after, "stormwatch_ingest_samples_total", kind="mesh")
                 - value(before, "stormwatch_ingest_samples_total", kind="mesh"))
        assert delta == sent
        # The same batch again is a duplicate: counted as such, no samples added.
        assert post_batch(c, agents[0], batch).status_code == 200
        bad = mesh_batch(agents[0], [a.agent_id for a in agents], rounds=2)
        bad["mesh"]["rtt_us"][0] = "300"
        assert post_batch(c, agents[0], bad).status_code == 422
        last = scrape(c)
    assert value(last, "stormwatch_ingest_samples_total", kind="mesh") == \
        value(after, "stormwatch_ingest_samples_total", kind="mesh")
    assert value(last, "stormwatch_ingest_duplicate_batches_total") - \
        value(after, "stormwatch_ingest_duplicate_batches_total") == 1
    assert value(last, "stormwatch_ingest_rejected_batches_total", reason="int_type") - \
        value(after, "stormwatch_ingest_rejected_batches_total", reason="int_type") == 1
    route = "/api/v1/ingest/batches"
    assert value(last, "http_requests_total", handler=route, method="POST", status="202") >= 1
    assert value(last, "http_requests_total", handler=route, method="POST", status="422") >= 1
    assert value(last, "http_request_duration_seconds_count", handler=route, method="POST",
                 status="202") >= 1


def test_with_several_api_processes_every_scrape_counts_every_process(services, make_org,
                                                                      tmp_path):
    import os
    import sys

    from stormwatch.devtools.services import free_port
    from tests.conftest import REPO

    port = free_port()
    env = {**os.environ, "DATABASE_URL": services.database_url,
           "REDIS_URL": services.redis_url, "PYTHONPATH": str(REPO / "backend"),
           "METRICS_TOKEN": TOKEN, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    with serving([sys.executable, "-m", "uvicorn", "stormwatch.main:app", "--host", "127.0.0.1",
                  "--port", str(port), "--workers", "2", "--log-level", "warning"],
                 env, REPO, services.tmp / "api-multiprocess.log", port):
        org = make_org()
        # A new connection per request, so the kernel spreads them over both processes.
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=30) as c:
            agents = [enroll(c, org.enrollment_token, f"mp-{i}") for i in range(2)]
        total = 0
        for _ in range(12):
            with httpx.Client(base_url=base, timeout=30) as c:
                batch = mesh_batch(agents[0], [a.agent_id for a in agents], rounds=5)
                assert post_batch(c, agents[0], batch).status_code == 202
                total += len(batch["mesh"]["time_us"])
        assert len({p.name.rsplit("_", 1)[-1] for p in tmp_path.glob("counter_*.db")}) == 2
        for _ in range(6):
            with httpx.Client(base_url=base, timeout=30) as c:
                got = scrape(c)
            assert value(got, "stormwatch_ingest_samples_total", kind="mesh") == total
