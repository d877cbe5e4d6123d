"""Path traces the server asks for (services/paths/requests.py, triggers.py): each pass turns
the mesh alerts that fired lately, and the pairs whose RTT level shifted or whose loss rose,
into requests the tracing agents find in their config. Safe to run twice: an alert event asks
at most once per pair, a shift or loss episode once, and a pair has one pending request."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from stormwatch.services.paths import requests, triggers
from stormwatch.worker.app import celery_app
from stormwatch.worker.db import task_sessions


async def _request(until: datetime) -> int:
    async with task_sessions() as sessions, sessions() as session:
        n = await requests.request_for_firing_alerts(session, until)
        await session.commit()
        n += await triggers.request_for_changes(session, until)
        await session.commit()
        return n


@celery_app.task(name="stormwatch.request_path_traces")
def request_path_traces(until: str | None = None) -> int:
    """Asks a trace of each mesh pair whose alert fired in the last 10 minutes, whose RTT
    level shifted or whose loss rose."""
    return asyncio.run(_request(datetime.fromisoformat(until) if until else datetime.now(UTC)))
