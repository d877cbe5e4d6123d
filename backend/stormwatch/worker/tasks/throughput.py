"""Throughput experiments: plan them (within each org's budget) and analyse finished ones.
Both are safe to run twice: planning skips what a day already holds (and slots are unique),
analysis rewrites the same results."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from stormwatch.services.throughput import store
from stormwatch.worker.app import celery_app
from stormwatch.worker.db import task_sessions


async def _schedule(now: datetime) -> dict[str, int]:
    async with task_sessions() as sessions, sessions() as session:
        return await store.schedule_all(session, now)


async def _analyze(now: datetime) -> int:
    async with task_sessions() as sessions, sessions() as session:
        n = await store.analyse_finished(session, now)
        await session.commit()
        return n


@celery_app.task(name="stormwatch.schedule_throughput_experiments")
def schedule_throughput_experiments(now: str | None = None) -> dict[str, int]:
    """Plans today's rest and tomorrow for every org with throughput enabled."""
    t = datetime.fromisoformat(now) if now else datetime.now(UTC)
    return asyncio.run(_schedule(t))


@celery_app.task(name="stormwatch.analyze_throughput_experiments")
def analyze_throughput_experiments() -> int:
    """Stores per-direction statistics and transitions of experiments that ended."""
    return asyncio.run(_analyze(datetime.now(UTC)))
