"""Rate limits and failed-credential throttles kept in Redis so every API replica shares them.

Redis rather than a PostgreSQL table: every API process already reaches it (ingest rate
limits, health), its counters are atomic (INCR, and a Lua script for the failure ledger),
and key expiry forgets old failures with no sweeper. A guessing flood then costs Redis
round trips instead of writes to the database that stores measurements.

When Redis is unreachable no limit is enforced (logged): ingest and logins keep working,
and the credentials themselves are still checked.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from dataclasses import dataclass

import redis.asyncio as aioredis
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

_PREFIX = "stormwatch:rl"


async def hit(redis: aioredis.Redis, key: str, limit: int, window_s: int = 60) -> int | None:
    """Counts one event; returns seconds to wait when over `limit`, else None.

    When Redis is unreachable the limit is not enforced: ingest must keep flowing.
    """
    now = time.time()
    window = int(now // window_s)
    rkey = f"{_PREFIX}:{key}:{window}"
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


@dataclass(frozen=True)
class FailurePolicy:
    """`free` failures cost nothing; each later one blocks for base * 2^(n - free - 1) s
    (at most lock_s); from the `lock_after`-th the block is lock_s. Failures are forgotten
    lock_s after the last one."""

    free: int
    lock_after: int
    backoff_base_s: float
    lock_s: float


# One round trip, atomic across replicas: count the failure, extend the block, keep the key
# alive for the longer of the block and the memory of failures.
_RECORD = """
local n = redis.call('HINCRBY', KEYS[1], 'n', 1)
local now = tonumber(ARGV[1])
local free = tonumber(ARGV[2])
local lock_after = tonumber(ARGV[3])
local base = tonumber(ARGV[4])
local lock_s = tonumber(ARGV[5])
local block = 0
if n >= lock_after then
  block = lock_s
elseif n > free then
  block = math.min(base * 2 ^ (n - free - 1), lock_s)
end
if block > 0 then
  local prev = tonumber(redis.call('HGET', KEYS[1], 'until') or '0')
  redis.call('HSET', KEYS[1], 'until', tostring(math.max(prev, now + block)))
end
redis.call('PEXPIRE', KEYS[1], math.ceil(math.max(block, lock_s) * 1000))
return n
"""


def failure_key(scope: str, subject: str) -> str:
    """The ledger's key; the subject is hashed so no email or address sits in Redis."""
    digest = hashlib.sha256(subject.encode()).hexdigest()[:32]
    return f"{_PREFIX}:fail:{scope}:{digest}"


async def blocked_for(redis: aioredis.Redis, key: str) -> int | None:
    """Whole seconds until `key` may try again (for Retry-After), or None if it may now."""
    try:
        until = await redis.hget(key, "until")
    except (RedisError, OSError) as exc:
        log.warning("credential throttle not enforced, redis unavailable: %s", exc)
        return None
    if until is None:
        return None
    wait = float(until) - time.time()
    return max(1, math.ceil(wait)) if wait > 0 else None


async def record_failure(redis: aioredis.Redis, key: str, policy: FailurePolicy) -> int | None:
    """Counts one failed attempt for `key`; returns how many it now has (None: no Redis)."""
    try:
        n = await redis.eval(_RECORD, 1, key, repr(time.time()), str(policy.free),  # type: ignore[misc]
                             str(policy.lock_after), repr(policy.backoff_base_s),
                             repr(policy.lock_s))
    except (RedisError, OSError) as exc:
        log.warning("credential failure not counted, redis unavailable: %s", exc)
        return None
    return int(n)


async def forget(redis: aioredis.Redis, key: str) -> bool:
    """Drops `key`'s failures and block; True if it had any."""
    try:
        return bool(await redis.delete(key))
    except (RedisError, OSError) as exc:
        log.warning("credential throttle not cleared, redis unavailable: %s", exc)
        return False
