"""Shared async Redis client (rate limits, health, worker heartbeats)."""

from functools import lru_cache

import redis.asyncio as aioredis

from stormwatch.core.config import get_settings


@lru_cache
def get_redis() -> aioredis.Redis:
    return aioredis.from_url(get_settings().redis_url, socket_timeout=2,
                             socket_connect_timeout=2, health_check_interval=30)


WORKER_HEARTBEAT_KEY = "stormwatch:heartbeat:worker"
BEAT_HEARTBEAT_KEY = "stormwatch:heartbeat:beat"
BEAT_STARTED_KEY = "stormwatch:beat:started"
# Hash: worker name -> JSON of its metrics endpoint ({"ok", "url", "detail"}), for /health.
WORKER_METRICS_KEY = "stormwatch:worker:metrics"
