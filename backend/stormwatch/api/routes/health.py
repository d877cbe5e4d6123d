"""Liveness of the parts Stormwatch needs: database, Redis, Celery worker and beat, the
workers' metrics endpoints, every scheduled job (services/jobs.py: failing, or not
succeeding on time, names the job and why), alert rules whose evaluation keeps failing
(named with the reason); and the rollup backlog per sample kind."""

import json
import time
import uuid
from datetime import UTC, datetime

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy import text

from stormwatch.core.db import get_engine
from stormwatch.core.redis import (
    BEAT_HEARTBEAT_KEY,
    BEAT_STARTED_KEY,
    WORKER_HEARTBEAT_KEY,
    WORKER_METRICS_KEY,
    get_redis,
)
from stormwatch.services import jobs
from stormwatch.services.alerts.evaluate import FAILING_AFTER, FAILING_RULES_SQL
from stormwatch.services.rollups import BACKLOG_SQL, backlog_from_rows

router = APIRouter(tags=["health"])

HEARTBEAT_MAX_AGE_S = 45  # beat sends one every 10 s; three missed means it is down


class Component(BaseModel):
    ok: bool
    detail: str


class KindBacklog(BaseModel):
    dirty_minutes: int = Field(description="Minutes marked for a re-roll (late samples)")
    oldest_unrolled_at: datetime | None = Field(
        description="The oldest sample not yet in the minute rollups (a marked minute counts "
                    "from its start); null when every sample is rolled up")
    rolled_until: datetime | None = Field(
        description="The minute pass's watermark; null before its first pass")


class Rollups(BaseModel):
    ok: bool = Field(description="Whether the backlog could be read (a backlog is not a "
                                 "failure: the worker drains it a bounded amount per pass)")
    detail: str
    kinds: dict[str, KindBacklog]


class Jobs(BaseModel):
    ok: bool = Field(description="False when a job failed its last runs or has not "
                                 "succeeded within three of its cadences")
    detail: str
    jobs: list[jobs.JobState]


class FailingRule(BaseModel):
    rule_id: uuid.UUID
    org_id: uuid.UUID
    failures_in_a_row: int
    last_error: str | None = Field(description="Why its last evaluation failed")
    last_failure: datetime | None


class AlertEvaluation(BaseModel):
    ok: bool = Field(description=f"False when an enabled rule failed its last {FAILING_AFTER} "
                                 "evaluations in a row (the other rules are still evaluated)")
    detail: str
    failing: list[FailingRule]


class WorkerMetricsEndpoint(BaseModel):
    worker: str = Field(description="The Celery worker's name")
    ok: bool
    url: str | None = Field(description="Where it serves /metrics; null when it does not")
    detail: str


class WorkerMetrics(BaseModel):
    ok: bool = Field(description="False when a worker could not serve its metrics")
    detail: str
    workers: list[WorkerMetricsEndpoint]


class Health(BaseModel):
    ok: bool
    database: Component
    redis: Component
    worker: Component
    beat: Component
    jobs: Jobs
    alerts: AlertEvaluation
    worker_metrics: WorkerMetrics
    rollups: Rollups


async def _jobs() -> Jobs:
    try:
        async with get_engine().connect() as conn:
            rows = (await conn.execute(text(jobs.JOB_ROWS_SQL))).all()
    except Exception as exc:  # reported, not raised, like the other components
        return Jobs(ok=False, detail=f"unknown: {type(exc).__name__}", jobs=[])
    beat_started = None
    try:
        raw = await get_redis().get(BEAT_STARTED_KEY)
        if raw is not None:
            beat_started = datetime.fromtimestamp(float(raw), UTC)
    except Exception:  # Redis down is its own red component; count from the jobs' own runs
        pass
    now = datetime.now(UTC)
    states = [jobs.judge(r, now, beat_started) for r in rows]
    failing = [s for s in states if not s.ok]
    detail = ("; ".join(f"{s.job}: {s.detail}" for s in failing) if failing
              else f"{len(states)} jobs ok" if states else "no job has run yet")
    return Jobs(ok=not failing, detail=detail, jobs=states)


async def _alerts() -> AlertEvaluation:
    try:
        async with get_engine().connect() as conn:
            rows = (await conn.execute(text(FAILING_RULES_SQL), {"n": FAILING_AFTER})).all()
    except Exception as exc:  # reported, not raised, like the other components
        return AlertEvaluation(ok=False, detail=f"unknown: {type(exc).__name__}", failing=[])
    failing = [FailingRule(rule_id=r.id, org_id=r.org_id,
                           failures_in_a_row=r.eval_failures_in_a_row,
                           last_error=r.eval_last_error, last_failure=r.eval_last_failure)
               for r in rows]
    detail = ("; ".join(f"rule {f.rule_id} failed {f.failures_in_a_row} evaluations in a row: "
                        f"{f.last_error}" for f in failing) if failing
              else "every rule evaluates")
    return AlertEvaluation(ok=not failing, detail=detail, failing=failing)


async def _database() -> Component:
    try:
        async with get_engine().connect() as conn:
            engine = (await conn.execute(text(
                "SELECT value FROM sw_meta WHERE key = 'storage_engine'"))).scalar()
        return Component(ok=True, detail=f"reachable, raw storage on {engine}")
    except Exception as exc:  # any failure here is "down", reported, not raised
        return Component(ok=False, detail=f"unreachable: {type(exc).__name__}")


async def _heartbeat(key: str, what: str) -> Component:
    try:
        value = await get_redis().get(key)
    except Exception as exc:
        return Component(ok=False, detail=f"unknown, redis unreachable: {type(exc).__name__}")
    if value is None:
        return Component(ok=False, detail=f"no {what} heartbeat yet")
    age = time.time() - float(value)
    ok = age <= HEARTBEAT_MAX_AGE_S
    return Component(ok=ok, detail=f"last heartbeat {age:.0f} s ago")


async def _worker_metrics() -> WorkerMetrics:
    try:
        raw = await get_redis().hgetall(WORKER_METRICS_KEY)
    except Exception as exc:
        return WorkerMetrics(ok=False, detail=f"unknown, redis unreachable: "
                             f"{type(exc).__name__}", workers=[])
    workers = sorted((WorkerMetricsEndpoint(
        worker=name if isinstance(name, str) else name.decode(), **json.loads(value))
        for name, value in raw.items()), key=lambda w: w.worker)
    if not workers:
        return WorkerMetrics(ok=True, detail="no worker has started yet", workers=[])
    failed = [w for w in workers if not w.ok]
    shown = failed or workers
    return WorkerMetrics(ok=not failed, workers=workers,
                         detail="; ".join(f"{w.worker}: {w.detail}" for w in shown))


async def _rollups() -> Rollups:
    try:
        async with get_engine().connect() as conn:
            rows = (await conn.execute(text(BACKLOG_SQL))).all()
    except Exception as exc:  # reported, not raised, like the other components
        return Rollups(ok=False, detail=f"backlog unknown: {type(exc).__name__}", kinds={})
    kinds = {k: KindBacklog(dirty_minutes=b.dirty_minutes, oldest_unrolled_at=b.oldest_unrolled_at,
                            rolled_until=b.rolled_until)
             for k, b in backlog_from_rows(rows).items()}
    oldest = min((b.oldest_unrolled_at for b in kinds.values() if b.oldest_unrolled_at),
                 default=None)
    if oldest is None:
        detail = "every sample rolled up"
    else:
        lag_s = (datetime.now(UTC) - oldest).total_seconds()
        detail = f"oldest unrolled sample {lag_s:.0f} s old"
    return Rollups(ok=True, detail=detail, kinds=kinds)


@router.get("/health", response_model=Health,
            responses={503: {"model": Health, "description": "Some part is down"}})
async def health() -> JSONResponse:
    database = await _database()
    try:
        await get_redis().ping()
        redis_c = Component(ok=True, detail="reachable")
    except Exception as exc:
        redis_c = Component(ok=False, detail=f"unreachable: {type(exc).__name__}")
    worker = await _heartbeat(WORKER_HEARTBEAT_KEY, "worker")
    beat = await _heartbeat(BEAT_HEARTBEAT_KEY, "beat")
    worker_metrics = await _worker_metrics()
    rollups = await _rollups() if database.ok else Rollups(
        ok=False, detail="backlog unknown: database unreachable", kinds={})
    job_states = await _jobs() if database.ok else Jobs(
        ok=False, detail="unknown: database unreachable", jobs=[])
    alert_states = await _alerts() if database.ok else AlertEvaluation(
        ok=False, detail="unknown: database unreachable", failing=[])
    # The rollup backlog is reported, not judged: a backfill legitimately takes passes.
    result = Health(ok=all(c.ok for c in (database, redis_c, worker, beat, worker_metrics,
                                           job_states, alert_states)),
                    database=database, redis=redis_c, worker=worker, beat=beat,
                    worker_metrics=worker_metrics, jobs=job_states, alerts=alert_states,
                    rollups=rollups)
    return JSONResponse(result.model_dump(mode="json"), status_code=200 if result.ok else 503)
