"""Housekeeping tasks: heartbeat, partitions, retention. All safe to run twice."""

import time

import redis
from sqlalchemy import text

from stormwatch.core.config import get_settings
from stormwatch.core.db import get_sync_engine
from stormwatch.core.redis import BEAT_HEARTBEAT_KEY, WORKER_HEARTBEAT_KEY
from stormwatch.services import maintenance
from stormwatch.worker.app import celery_app


@celery_app.task(name="stormwatch.record_heartbeat")
def record_heartbeat() -> None:
    # Runs only when beat scheduled it and a worker picked it up: proof of life for both.
    r = redis.Redis.from_url(get_settings().redis_url)
    now = str(time.time())
    r.set(WORKER_HEARTBEAT_KEY, now, ex=3600)
    r.set(BEAT_HEARTBEAT_KEY, now, ex=3600)


@celery_app.task(name="stormwatch.ensure_partitions")
def ensure_partitions(days_ahead: int = 3) -> int:
    with get_sync_engine().begin() as conn:
        return maintenance.ensure_partitions(conn, days_ahead)


@celery_app.task(name="stormwatch.enforce_raw_retention")
def enforce_raw_retention() -> dict[str, int]:
    with get_sync_engine().begin() as conn:
        return maintenance.enforce_raw_retention(conn)


@celery_app.task(name="stormwatch.purge_expired_sessions")
def purge_expired_sessions() -> int:
    """Ended sessions (expired, idle or past the absolute timeout), abandoned single
    sign-ons, and mailed links a month past their expiry (until then a used or expired link
    is still refused by name, not as unknown)."""
    settings = get_settings()
    with get_sync_engine().begin() as conn:
        return sum(conn.execute(text(sql), params).rowcount for sql, params in (
            ("DELETE FROM user_sessions WHERE expires_at < now() "
             "OR created_at < now() - make_interval(hours => :absolute_h) "
             "OR last_seen_at < now() - make_interval(mins => :idle_min)",
             {"absolute_h": settings.session_absolute_timeout_h,
              "idle_min": settings.session_idle_timeout_min}),
            ("DELETE FROM oidc_logins WHERE expires_at < now()", {}),
            ("DELETE FROM account_links WHERE expires_at < now() - interval '30 days'", {})))


