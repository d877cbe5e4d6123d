"""Alert evaluation. Safe to run twice or concurrently: each rule's cycle is applied by
compare-and-set on its eval_version, so only one evaluation acts on a transition."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from stormwatch.observability.worker import time_alert_evaluation
from stormwatch.services.alerts.evaluate import evaluate_cycle
from stormwatch.worker.app import celery_app
from stormwatch.worker.db import task_sessions

log = logging.getLogger("stormwatch.alerts")
DISPATCH_TASK = "stormwatch.dispatch_alert_events"


async def _cycle() -> dict[str, Any]:
    async with task_sessions() as sessions:
        res = await evaluate_cycle(sessions)
    return res.__dict__


@celery_app.task(name="stormwatch.evaluate_alert_rules")
def evaluate_alert_rules() -> dict[str, Any]:
    """One evaluation cycle of every enabled rule; starts delivery at once when it wrote
    events (notifications also poll for them on their own)."""
    with time_alert_evaluation():
        out = asyncio.run(_cycle())
    if out["events"]:
        celery_app.send_task(DISPATCH_TASK)
    if out["errors"]:
        log.warning("alert rules not evaluated: %s", out["errors"])
    return out
