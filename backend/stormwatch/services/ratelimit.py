"""Fixed-window rate limits kept in Redis so every API replica shares them."""

from __future__ import annotations

import logging
import time

import redis.asyncio as aioredis
from redis.exceptions import RedisError

log = logging.getLogger(__name__)


async def hit(redis: aioredis.Redis, key: str, limit: int, window_s: int = 60) -> int | None:
    """Counts one event; returns seconds to wait when over `limit`, else None.

    When Redis is unreachable the limit is not enforced: ingest must keep flowing.
    """
    now = time.time()
    window = int(now // window_s)
    rkey = f"stormwatch:rl:{key}:{window}"
    try:
        async with redis.pipeline(transaction=False) as pipe:
            pipe.incr(rkey)
            pipe.expire(rkey, window_s * 2)
            count, _ = await pipe.execute()
    except (RedisError, OSError) as exc:
        log.warning("rate limit not enforced, redis unavailable: %s", exc)
        return None
    if int(count) > limit:
        return max(1, int((window + 1) * window_s - now + 0.999))
    return None
