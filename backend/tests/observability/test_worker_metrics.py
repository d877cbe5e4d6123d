"""The worker's /metrics, from a real Celery worker (prefork children) on Redis and
PostgreSQL: rollup lag per kind and level, task durations, queue depth."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from types import SimpleNamespace

import httpx
import pytest
from celery import Celery
from prometheus_client.parser import text_string_to_metric_families

from stormwatch.core.config import get_settings
from stormwatch.devtools.services import free_port
from stormwatch.observability import worker as worker_metrics
from tests.conftest import REPO, Services
from tests.helpers import serving


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


@pytest.fixture(scope="module")
def worker(services: Services) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "DATABASE_URL": services.database_url, "REDIS_URL": services.redis_url,
           "PYTHONPATH": str(REPO / "backend"), "WORKER_METRICS_PORT": str(port)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    with serving([sys.executable, "-m", "celery", "-A", "stormwatch.worker.app", "worker",
                  "--loglevel", "WARNING", "--concurrency", "2", "--without-gossip",
                  "--without-mingle"], env, REPO, services.tmp / "worker-metrics.log", port):
        yield f"http://127.0.0.1:{port}/metrics"


def poll(url: str, ready, timeout_s: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        got = samples(httpx.get(url, timeout=10).text)
        if ready(got) or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def test_the_rollup_lag_of_every_kind_and_level_is_exposed_after_a_rollup_run(services, worker):
    client = Celery("test", broker=services.redis_url, backend=services.redis_url)
    result = client.send_task("stormwatch.roll_up_recent_samples")
    out = result.get(timeout=180)
    assert set(out) == {"mesh", "quorum", "storage", "throughput"}

    def ready(got: dict) -> bool:
        return any(name == "stormwatch_worker_task_duration_seconds_count"
                   and dict(labels).get("task") == "stormwatch.roll_up_recent_samples"
                   for name, labels in got)

    got = poll(worker, ready)
    lag = {(dict(labels)["kind"], dict(labels)["level_s"]): v for (name, labels), v in got.items()
           if name == "stormwatch_rollup_lag_seconds"}
    for kind in ("mesh", "quorum", "storage", "throughput"):
        # The pass just ran, but a database other tests filled may still be catching up (a
        # pass moves at most two hours), so the lag is a finite age, not a fixed bound.
        assert 0 <= lag.get((kind, "60"), -1) < math.inf, (lag, sorted(got)[:20])
        for level in ("300", "3600", "86400"):
            assert (kind, level) in lag, lag
    count = got[("stormwatch_worker_task_duration_seconds_count",
                 (("task", "stormwatch.roll_up_recent_samples"),))]
    assert count >= 1
    assert got[("stormwatch_worker_queue_depth", (("queue", "celery"),))] >= 0


def test_a_failing_task_is_counted_as_a_failure(services, worker):
    client = Celery("test", broker=services.redis_url, backend=services.redis_url)
    result = client.send_task("stormwatch.roll_up_window", args=["mesh", "2026-01-01T00:00:00",
                                                                 "2026-01-01T01:00:00"])
    with pytest.raises(ValueError, match="UTC offset"):
        result.get(timeout=120)
    key = ("stormwatch_worker_task_failures_total", (("task", "stormwatch.roll_up_window"),))
    got = poll(worker, lambda g: g.get(key, 0) >= 1)
    assert got[key] >= 1


def test_an_alert_evaluation_pass_is_timed_into_its_histogram(services, worker):
    """docs/operations.md: stormwatch_alert_evaluation_seconds is filled by alert evaluation."""
    key = ("stormwatch_alert_evaluation_seconds_count", ())
    before = samples(httpx.get(worker, timeout=10).text).get(key, 0)
    client = Celery("test", broker=services.redis_url, backend=services.redis_url)
    out = client.send_task("stormwatch.evaluate_alert_rules").get(timeout=180)
    assert "rules" in out, out
    got = poll(worker, lambda g: g.get(key, 0) >= before + 1)
    assert got.get(key, 0) >= before + 1, sorted(n for n, _ in got if "alert" in n)
    assert got[("stormwatch_alert_evaluation_seconds_sum", ())] > 0

def health_jobs(api: httpx.Client) -> dict:
    return api.get("/api/v1/health").json()["jobs"]


def wait_for_job(api: httpx.Client, ready, timeout_s: float = 60.0) -> tuple[dict, dict]:
    deadline = time.monotonic() + timeout_s
    while True:
        jobs = health_jobs(api)
        job = next((j for j in jobs["jobs"] if j["job"] == "roll-up-recent-samples"), None)
        if (job is not None and ready(job)) or time.monotonic() > deadline:
            assert job is not None, jobs
            return jobs, job
        time.sleep(0.2)


def test_a_job_that_fails_its_last_runs_turns_health_red_naming_it_then_green_once_fixed(
        services, worker, db, api):
    """A real fault (the rollup pass's bookmark table gone) fails the scheduled job in the
    worker; health names the job and the driver's reason, and the metrics count it."""
    from sqlalchemy import text

    client = Celery("test", broker=services.redis_url, backend=services.redis_url)

    def run_once() -> None:
        # The failure is what is under test: health reports it.
        with contextlib.suppress(Exception):
            client.send_task("stormwatch.roll_up_recent_samples").get(timeout=180)

    run_once()  # a success first: the job's row exists and is green
    assert wait_for_job(api, lambda j: j["last_success"] is not None)[1]["ok"] is True
    with db.begin() as c:
        c.execute(text("ALTER TABLE rollup_watermarks RENAME TO rollup_watermarks_gone"))
    try:
        for _ in range(3):
            run_once()
        # Celery stores a failed result before it sends task_failure: wait for the record.
        jobs, job = wait_for_job(api, lambda j: j["failures_in_a_row"] >= 3)
        assert jobs["ok"] is False and job["ok"] is False, jobs
        assert job["failures_in_a_row"] == 3
        assert "UndefinedTable" in job["last_error"] and "rollup_watermarks" in job["last_error"]
        assert "roll-up-recent-samples: failed its last 3 runs" in jobs["detail"]
        r = api.get("/api/v1/health")
        assert r.status_code == 503 and r.json()["ok"] is False
        key = ("stormwatch_job_failures_in_a_row", (("job", "roll-up-recent-samples"),))
        assert poll(worker, lambda g: g.get(key, 0) >= 3)[key] == 3
    finally:
        with db.begin() as c:
            c.execute(text("ALTER TABLE rollup_watermarks_gone RENAME TO rollup_watermarks"))
    run_once()
    _, job = wait_for_job(api, lambda j: j["failures_in_a_row"] == 0)
    assert job["ok"] is True
    key = ("stormwatch_job_last_success_timestamp_seconds", (("job", "roll-up-recent-samples"),))
    assert poll(worker, lambda g: key in g)[key] == pytest.approx(
        datetime.fromisoformat(job["last_success"]).timestamp())


@pytest.fixture
def metrics_on(services: Services, monkeypatch: pytest.MonkeyPatch
               ) -> Iterator[Callable[[int, str], None]]:
    """Runs the worker-ready handler in this process, as a worker's main process does."""
    monkeypatch.setenv("DATABASE_URL", services.database_url)
    monkeypatch.setenv("REDIS_URL", services.redis_url)
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)

    def serve(port: int, name: str) -> None:
        monkeypatch.setenv("WORKER_METRICS_PORT", str(port))
        get_settings.cache_clear()
        worker_metrics._serve(sender=SimpleNamespace(hostname=name))

    yield serve
    worker_metrics._stop()
    get_settings.cache_clear()


def test_a_taken_metrics_port_is_reported_by_health_and_one_log_line(
        api, metrics_on, caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with caplog.at_level(logging.INFO, logger="stormwatch.worker.metrics"):
            metrics_on(port, "taken@test")
    health = api.get("/api/v1/health")
    assert health.status_code == 503, health.text
    body = health.json()
    assert body["ok"] is False
    metrics = body["worker_metrics"]
    assert metrics["ok"] is False, metrics
    assert f"WORKER_METRICS_PORT={port}" in metrics["detail"], metrics
    assert "address already in use" in metrics["detail"].lower(), metrics
    mine = [w for w in metrics["workers"] if w["worker"] == "taken@test"]
    assert len(mine) == 1 and mine[0]["ok"] is False and mine[0]["url"] is None, metrics
    errors = [r for r in caplog.records if r.name == "stormwatch.worker.metrics"
              and r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is None, caplog.text
    assert str(port) in errors[0].getMessage() and "WORKER_METRICS_PORT" in errors[0].getMessage()


def test_port_zero_serves_on_a_free_port_that_health_names(api, metrics_on) -> None:
    metrics_on(0, "anyport@test")
    metrics = api.get("/api/v1/health").json()["worker_metrics"]
    mine = [w for w in metrics["workers"] if w["worker"] == "anyport@test"]
    assert len(mine) == 1 and mine[0]["ok"] is True, metrics
    url = mine[0]["url"]
    assert url.startswith("http://127.0.0.1:") and not url.startswith("http://127.0.0.1:0/")
    assert url in metrics["detail"], metrics
    r = httpx.get(url, timeout=10)
    assert r.status_code == 200
    assert "stormwatch_worker_queue_depth" in r.text


def test_loading_the_worker_s_tasks_leaves_prometheus_client_unimported() -> None:
    """prometheus_client picks its value class when first imported: a task module importing
    it at load time, before worker_init sets PROMETHEUS_MULTIPROC_DIR, keeps every task
    metric inside the prefork child that counted it (the scrape then shows none)."""
    import subprocess

    code = ("import sys, stormwatch.worker.app as a; a.celery_app.loader.import_default_modules();"
            " print(sorted(m for m in sys.modules if m.startswith('prometheus_client')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO / "backend")}, check=True)
    assert out.stdout.strip() == "[]", out.stdout
