"""The registry an exposition reads: one process's own, or every process's under
PROMETHEUS_MULTIPROC_DIR (several uvicorn workers, Celery's prefork children)."""

from __future__ import annotations

import os

from prometheus_client import REGISTRY, CollectorRegistry, multiprocess


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def exposition_registry() -> CollectorRegistry:
    """Each process writes its samples to files in the shared directory; an exposition then
    merges them, so a scrape sees every process whichever one answers it."""
    if multiprocess_dir() is None:
        return REGISTRY
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    return registry
