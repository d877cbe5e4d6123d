"""Alert notification delivery: plan notifications from alert events, then work the outbox.
Safe to run twice or concurrently (SKIP LOCKED claims, compare-and-set marks)."""

import logging

from stormwatch.core.db import get_sync_engine
from stormwatch.services.notify import dispatch, repost
from stormwatch.worker.app import celery_app

log = logging.getLogger("stormwatch.notify")

# A retry due sooner than the beat backstop is scheduled as its own run.
MAX_COUNTDOWN_S = 60.0


@celery_app.task(name="stormwatch.dispatch_alert_events", ignore_result=True)
def dispatch_alert_events() -> dict[str, int]:
    engine = get_sync_engine()
    with engine.begin() as conn:
        made = dispatch.plan(conn)
    counts = dispatch.deliver_due(engine)
    due = dispatch.next_due_in_s(engine)
    if due is not None and due < MAX_COUNTDOWN_S:
        celery_app.send_task("stormwatch.dispatch_alert_events",
                             countdown=max(0.5, due + 0.2))
    return {"notifications": made, **counts}


@celery_app.task(name="stormwatch.repost_alertmanager_alerts", ignore_result=True)
def repost_alertmanager_alerts() -> dict[str, int]:
    return repost.repost(get_sync_engine())
