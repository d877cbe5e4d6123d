"""OTLP pushes to the orgs' OpenTelemetry collectors. Safe to run twice or concurrently: each
org's push is claimed by compare-and-set on its last attempt, and what is pushed is
cumulative, so even a repeated push says nothing new."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from sqlalchemy.pool import NullPool

from stormwatch.core.config import get_settings
from stormwatch.worker.app import celery_app


async def _push() -> dict[str, Any]:
    # Imported here, not when the worker loads its tasks: the export imports prometheus_client,
    # which picks its value class on first import, and must do so after worker_init has set
    # PROMETHEUS_MULTIPROC_DIR (observability/worker.py), or task metrics stay in each child.
    from stormwatch.services.export import otlp

    settings = get_settings()
    # A fresh engine per run: each task runs its own event loop (as alert evaluation does).
    engine = create_async_engine(settings.database_url, poolclass=NullPool)
    try:
        return await otlp.push_due(async_sessionmaker(engine, expire_on_commit=False),
                                   settings.prometheus_export_max_series)
    finally:
        await engine.dispose()


@celery_app.task(name="stormwatch.push_otlp_exports", ignore_result=True)
def push_otlp_exports() -> dict[str, Any]:
    return asyncio.run(_push())
