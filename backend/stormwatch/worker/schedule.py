"""Every periodic task, with why it runs when it does."""

from datetime import timedelta
from typing import Any

BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    # Health reports worker and beat as down after 45 s without one; 10 s leaves slack.
    "record-heartbeat": {
        "task": "stormwatch.record_heartbeat",
        "schedule": timedelta(seconds=10),
        "options": {"expires": 10},
    },
    # Ingest creates a missing day partition on demand, but doing it ahead keeps that
    # DDL off the ingest path at midnight UTC; hourly is plenty for daily partitions.
    "ensure-partitions": {
        "task": "stormwatch.ensure_partitions",
        "schedule": timedelta(hours=1),
    },
    # Raw data past retention goes by dropping whole day partitions; hourly keeps the
    # overshoot under an hour without churning.
    "enforce-raw-retention": {
        "task": "stormwatch.enforce_raw_retention",
        "schedule": timedelta(hours=1),
    },
    # Expired login sessions are useless rows; daily is enough.
    "purge-expired-sessions": {
        "task": "stormwatch.purge_expired_sessions",
        "schedule": timedelta(days=1),
    },
}
