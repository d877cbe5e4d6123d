"""OTLP pushes to the orgs' OpenTelemetry collectors. Safe to run twice or concurrently: each
org's push is claimed by compare-and-set on its last attempt, and what is pushed is
cumulative, so even a repeated push says nothing new."""

from __future__ import annotations

import asyncio
from typing import Any

from stormwatch.core.config import get_settings
from stormwatch.worker.app import celery_app
from stormwatch.worker.db import task_sessions


async def _push() -> dict[str, Any]:
    # Imported here, not when the worker loads its tasks: the export imports prometheus_client,
    # which picks its value class on first import, and must do so after worker_init has set
    # PROMETHEUS_MULTIPROC_DIR (observability/worker.py), or task metrics stay in each child.
    from stormwatch.services.export import otlp

    async with task_sessions() as sessions:
        return await otlp.push_due(sessions, get_settings().prometheus_export_max_series)


@celery_app.task(name="stormwatch.push_otlp_exports", ignore_result=True)
def push_otlp_exports() -> dict[str, Any]:
    return asyncio.run(_push())
