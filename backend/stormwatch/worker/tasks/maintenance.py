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
    """Expired sessions, abandoned single sign-ons, and mailed links a month past their
    expiry (until then a used or expired link is still refused by name, not as unknown)."""
    with get_sync_engine().begin() as conn:
        return sum(conn.execute(text(sql)).rowcount for sql in (
            "DELETE FROM user_sessions WHERE expires_at < now()",
            "DELETE FROM oidc_logins WHERE expires_at < now()",
            "DELETE FROM account_links WHERE expires_at < now() - interval '30 days'"))


