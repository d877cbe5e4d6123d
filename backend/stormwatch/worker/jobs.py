"""Records every scheduled job's runs (services/jobs.py) from Celery's task signals, in the
process that ran the task, and when beat started (health counts staleness from then)."""

from __future__ import annotations

import logging
import os
import time
from datetime import UTC, datetime
from typing import Any

import redis
from celery import signals
from sqlalchemy import Engine, create_engine
from sqlalchemy.pool import NullPool

from stormwatch.core.config import get_settings
from stormwatch.core.redis import BEAT_STARTED_KEY
from stormwatch.services import jobs
from stormwatch.worker.schedule import BEAT_SCHEDULE

log = logging.getLogger("stormwatch.worker.jobs")

# task name -> (job name, cadence in seconds), for the tasks beat schedules.
SCHEDULED: dict[str, tuple[str, int]] = {
    e["task"]: (name, int(e["schedule"].total_seconds())) for name, e in BEAT_SCHEDULE.items()}
_engine: dict[int, Engine] = {}


def _conn_engine() -> Engine:
    # One per process: prefork children must not share the parent's connections.
    pid = os.getpid()
    if pid not in _engine:
        _engine[pid] = create_engine(get_settings().sync_database_url, poolclass=NullPool)
    return _engine[pid]


def _record(what: str, sender: Any, **kw: Any) -> None:
    job = SCHEDULED.get(getattr(sender, "name", ""))
    if job is None:
        return
    now = datetime.now(UTC)
    try:
        with _conn_engine().begin() as conn:
            if what == "start":
                jobs.record_start(conn, job[0], job[1], now)
            elif what == "success":
                jobs.record_success(conn, job[0], now)
            else:
                jobs.record_failure(conn, job[0], now, kw["reason"])
    except Exception as exc:  # the record must never fail the task; health sees staleness
        log.warning("could not record %s of job %s: %s", what, job[0], type(exc).__name__)
    if what == "failure":
        from stormwatch.observability.worker import count_job_failure

        count_job_failure(job[0])


@signals.task_prerun.connect
def _started(sender: Any = None, **_: Any) -> None:
    _record("start", sender)


@signals.task_success.connect
def _succeeded(sender: Any = None, **_: Any) -> None:
    _record("success", sender)


@signals.task_failure.connect
def _failed(sender: Any = None, exception: BaseException | None = None, **_: Any) -> None:
    reason = jobs.reason_of(exception) if exception is not None else "unknown error"
    log.error("job %s failed: %s", SCHEDULED.get(getattr(sender, "name", ""), ("?",))[0],
              reason)
    _record("failure", sender, reason=reason)


@signals.beat_init.connect
def _beat_started(**_: Any) -> None:
    try:
        redis.Redis.from_url(get_settings().redis_url, socket_timeout=5).set(
            BEAT_STARTED_KEY, str(time.time()))
    except Exception as exc:  # health then counts from each job's own first start
        log.warning("could not record beat's start: %s", type(exc).__name__)
