"""Throughput experiments: plan them (within each org's budget) and analyse finished ones.
Both are safe to run twice: planning skips what a day already holds (and slots are unique),
analysis rewrites the same results."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.pool import NullPool

from stormwatch.core.config import get_settings
from stormwatch.services.throughput import store
from stormwatch.worker.app import celery_app


async def _schedule(now: datetime) -> dict[str, int]:
    # A pooled asyncpg connection cannot outlive the event loop asyncio.run makes per task.
    engine = create_async_engine(get_settings().database_url, poolclass=NullPool)
    try:
        async with AsyncSession(engine, expire_on_commit=False) as session:
            return await store.schedule_all(session, now)
    finally:
        await engine.dispose()


async def _analyze(now: datetime) -> int:
    engine = create_async_engine(get_settings().database_url, poolclass=NullPool)
    try:
        async with AsyncSession(engine, expire_on_commit=False) as session:
            n = await store.analyse_finished(session, now)
            await session.commit()
            return n
    finally:
        await engine.dispose()


@celery_app.task(name="stormwatch.schedule_throughput_experiments")
def schedule_throughput_experiments(now: str | None = None) -> dict[str, int]:
    """Plans today's rest and tomorrow for every org with throughput enabled."""
    t = datetime.fromisoformat(now) if now else datetime.now(UTC)
    return asyncio.run(_schedule(t))


@celery_app.task(name="stormwatch.analyze_throughput_experiments")
def analyze_throughput_experiments() -> int:
    """Stores per-direction statistics and transitions of experiments that ended."""
    return asyncio.run(_analyze(datetime.now(UTC)))
