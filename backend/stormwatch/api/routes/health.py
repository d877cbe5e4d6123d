"""Liveness of the parts Stormwatch needs: database, Redis, Celery worker and beat."""

import time

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy import text

from stormwatch.core.db import get_engine
from stormwatch.core.redis import BEAT_HEARTBEAT_KEY, WORKER_HEARTBEAT_KEY, get_redis

router = APIRouter(tags=["health"])

HEARTBEAT_MAX_AGE_S = 45  # beat sends one every 10 s; three missed means it is down


class Component(BaseModel):
    ok: bool
    detail: str


class Health(BaseModel):
    ok: bool
    database: Component
    redis: Component
    worker: Component
    beat: Component


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
    result = Health(ok=all(c.ok for c in (database, redis_c, worker, beat)), database=database,
                    redis=redis_c, worker=worker, beat=beat)
    return JSONResponse(result.model_dump(), status_code=200 if result.ok else 503)
