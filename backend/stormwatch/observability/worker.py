"""The worker's metrics, served by the worker's main process on its own port
(WORKER_METRICS_HOST:WORKER_METRICS_PORT, off the API's public port).

Task durations and failures are counted where tasks run, in Celery's prefork children, and
merged through PROMETHEUS_MULTIPROC_DIR (a fresh directory made at worker start unless the
operator sets one). Rollup lag and queue depth are read at scrape time from PostgreSQL and
Redis, so they are true even when no task has run for a while.

Whether the endpoint is served, and where (WORKER_METRICS_PORT=0 takes any free port), is
recorded in Redis under the worker's name, so /api/v1/health shows it and a port already
taken is a failure there rather than a traceback in the worker's log.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

from celery import signals

from stormwatch.core.config import Settings, get_settings
from stormwatch.core.redis import WORKER_METRICS_KEY

log = logging.getLogger("stormwatch.worker.metrics")

# The queue Celery's default routing puts every task on (worker/app.py routes nothing else).
QUEUES = ("celery",)
_started: dict[str, Any] = {}


@lru_cache
def _metrics() -> dict[str, Any]:
    """Created on first use, after worker_init has pointed prometheus_client at the shared
    directory (its value class is chosen when the module is first imported)."""
    from prometheus_client import Counter, Histogram

    return {
        "duration": Histogram(
            "stormwatch_worker_task_duration_seconds", "Wall time of each task run, by task",
            ["task"], buckets=(0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900)),
        "failures": Counter("stormwatch_worker_task_failures_total",
                            "Task runs that raised, by task", ["task"]),
        "job_failures": Counter("stormwatch_job_failures_total",
                                "Failed runs of each scheduled job, by job", ["job"]),
        # Filled by worker/tasks/alerts.py through time_alert_evaluation().
        "alert_evaluation": Histogram(
            "stormwatch_alert_evaluation_seconds", "Wall time of one alert evaluation pass",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)),
    }


def count_job_failure(job: str) -> None:
    _metrics()["job_failures"].labels(job).inc()


@contextmanager
def time_alert_evaluation() -> Iterator[None]:
    """Times one alert evaluation pass into stormwatch_alert_evaluation_seconds."""
    start = time.perf_counter()
    try:
        yield
    finally:
        _metrics()["alert_evaluation"].observe(time.perf_counter() - start)


class StateCollector:
    """Rollup lag per kind and level, scheduled jobs' last success and failures in a row,
    and queue depth, read when scraped."""

    def __init__(self) -> None:
        from sqlalchemy import create_engine
        from sqlalchemy.pool import NullPool

        settings = get_settings()
        # Its own connection per scrape: the main process forks pool children, which must
        # not inherit a pooled connection.
        self._engine = create_engine(settings.sync_database_url, poolclass=NullPool)
        self._redis_url = settings.redis_url

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        import redis
        from prometheus_client.core import GaugeMetricFamily
        from sqlalchemy import text

        lag = GaugeMetricFamily(
            "stormwatch_rollup_lag_seconds",
            "How far each rollup level is behind now: now minus its watermark",
            labels=["kind", "level_s"])
        try:
            # Only `<kind>:<level_s>` rows: the table also holds fill and claim bookmarks.
            with self._engine.connect() as conn:
                rows = conn.execute(text(
                    "SELECT kind, extract(epoch FROM now() - rolled_until) FROM "
                    "rollup_watermarks WHERE kind ~ :level"), {"level": r"^[a-z_]+:[0-9]+$"}).all()
            for key, seconds in rows:
                kind, _, level = str(key).partition(":")
                lag.add_metric([kind, level], float(seconds))
        except Exception as exc:  # a scrape must still answer while the database is down
            log.warning("rollup lag unavailable: %s", type(exc).__name__)
        yield lag
        yield from self._jobs()
        depth = GaugeMetricFamily("stormwatch_worker_queue_depth",
                                  "Tasks waiting in the broker queue", labels=["queue"])
        try:
            client = redis.Redis.from_url(self._redis_url, socket_timeout=2,
                                          socket_connect_timeout=2)
            try:
                for queue in QUEUES:
                    depth.add_metric([queue], float(client.llen(queue)))
            finally:
                client.close()
        except Exception as exc:
            log.warning("queue depth unavailable: %s", type(exc).__name__)
        yield depth

    def _jobs(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily
        from sqlalchemy import text

        from stormwatch.services.jobs import JOB_ROWS_SQL

        success = GaugeMetricFamily(
            "stormwatch_job_last_success_timestamp_seconds",
            "When each scheduled job last succeeded (Unix time)", labels=["job"])
        in_a_row = GaugeMetricFamily(
            "stormwatch_job_failures_in_a_row", "Each scheduled job's failed runs since its "
            "last success", labels=["job"])
        try:
            with self._engine.connect() as conn:
                for r in conn.execute(text(JOB_ROWS_SQL)).all():
                    if r.last_success is not None:
                        success.add_metric([r.job], r.last_success.timestamp())
                    in_a_row.add_metric([r.job], float(r.failures_in_a_row))
        except Exception as exc:
            log.warning("job runs unavailable: %s", type(exc).__name__)
        yield success
        yield in_a_row


@signals.worker_init.connect
def _prepare(**_: Any) -> None:
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        path = tempfile.mkdtemp(prefix="stormwatch-worker-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = path
        _started["own_dir"] = path


def _record(settings: Settings, name: str, status: dict[str, Any] | None) -> None:
    """Writes (or, with None, removes) this worker's metrics status for /api/v1/health."""
    import redis

    try:
        client = redis.Redis.from_url(settings.redis_url, socket_timeout=2,
                                      socket_connect_timeout=2)
        try:
            if status is None:
                client.hdel(WORKER_METRICS_KEY, name)
            else:
                client.hset(WORKER_METRICS_KEY, name, json.dumps(status))
        finally:
            client.close()
    except Exception as exc:  # the worker runs on; health then lacks this worker's entry
        log.warning("worker metrics status not recorded in Redis: %s", type(exc).__name__)


def serve_metrics(settings: Settings) -> dict[str, Any]:
    """Starts the metrics endpoint; returns its status: {"ok", "url", "detail"}."""
    if not settings.worker_metrics_enabled:
        return {"ok": True, "url": None, "detail": "off (WORKER_METRICS_ENABLED=false)"}
    from prometheus_client import CollectorRegistry, multiprocess, start_http_server

    host, port = settings.worker_metrics_host, settings.worker_metrics_port
    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    registry.register(StateCollector())  # type: ignore[arg-type]
    try:
        server, _thread = start_http_server(port, host, registry=registry)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        detail = (f"not served: cannot listen on {host}:{port} (WORKER_METRICS_HOST={host}, "
                  f"WORKER_METRICS_PORT={port}): {reason}; set WORKER_METRICS_PORT to a free "
                  "port, or 0 for any free port")
        return {"ok": False, "url": None, "detail": detail}
    _started["server"] = server
    chosen = server.server_address[1]
    url = f"http://{host}:{chosen}/metrics"
    return {"ok": True, "url": url, "detail": url + (" (any free port)" if port == 0 else "")}


@signals.worker_ready.connect
def _serve(sender: Any = None, **_: Any) -> None:
    settings = get_settings()
    name = str(getattr(sender, "hostname", None) or socket.gethostname())
    status = serve_metrics(settings)
    if status["ok"]:
        log.info("worker metrics: %s", status["detail"])
    else:
        log.error("worker metrics %s", status["detail"])
    _started["name"] = name
    _record(settings, name, status)


@signals.worker_shutdown.connect
def _stop(**_: Any) -> None:
    server = _started.pop("server", None)
    if server is not None:
        server.shutdown()
        server.server_close()
    name = _started.pop("name", None)
    if name is not None:
        _record(get_settings(), name, None)
    own = _started.pop("own_dir", None)
    if own:
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR") == own:
            del os.environ["PROMETHEUS_MULTIPROC_DIR"]
        shutil.rmtree(own, ignore_errors=True)


_running: dict[str, float] = {}


@signals.task_prerun.connect
def _task_start(task_id: str | None = None, **_: Any) -> None:
    if task_id:
        _running[task_id] = time.perf_counter()


@signals.task_postrun.connect
def _task_end(task_id: str | None = None, task: Any = None, **_: Any) -> None:
    start = _running.pop(task_id or "", None)
    if start is not None and task is not None:
        _metrics()["duration"].labels(task.name).observe(time.perf_counter() - start)


@signals.task_failure.connect
def _task_failed(sender: Any = None, **_: Any) -> None:
    if sender is not None:
        _metrics()["failures"].labels(sender.name).inc()
