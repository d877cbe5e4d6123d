"""The Celery application (Redis broker). Start with `celery -A stormwatch.worker.app`."""

from celery import Celery

from stormwatch.core.config import get_settings
from stormwatch.core.logging import setup_logging
from stormwatch.observability import worker as _worker_metrics  # noqa: F401 - signal handlers
from stormwatch.worker import jobs as _jobs  # noqa: F401 - signal handlers
from stormwatch.worker.schedule import BEAT_SCHEDULE

settings = get_settings()
setup_logging(settings.log_level)

celery_app = Celery("stormwatch", broker=settings.redis_url, backend=settings.redis_url,
                    include=["stormwatch.worker.tasks.advisors",
                             "stormwatch.worker.tasks.alerts",
                             "stormwatch.worker.tasks.export",
                             "stormwatch.worker.tasks.maintenance",
                             "stormwatch.worker.tasks.notifications",
                             "stormwatch.worker.tasks.rollups",
                             "stormwatch.worker.tasks.paths",
                             "stormwatch.worker.tasks.throughput"])
celery_app.conf.update(
    timezone="UTC",
    enable_utc=True,
    task_acks_late=True,  # tasks are idempotent, so redelivery after a crash is safe
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    result_expires=3600,
    broker_connection_retry_on_startup=True,
    beat_schedule=BEAT_SCHEDULE,
)
app = celery_app
