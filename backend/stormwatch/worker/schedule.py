"""Every periodic task, with why it runs when it does."""

from datetime import timedelta
from typing import Any

from stormwatch.notifications.alertmanager import REPOST_INTERVAL

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
    # Raw data past retention goes by dropping whole day partitions past the longest org
    # setting, then deleting each org's older rows; hourly keeps the overshoot under an hour.
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

# --- rollups (services/rollups.py, worker/tasks/rollups.py) ------------------------------
BEAT_SCHEDULE.update({
    # Minute buckets close every minute; running each minute keeps the newest rolled data
    # about a minute and a half old (30 s settle + the pass) and each pass small. The same
    # pass re-rolls the 5-minute buckets, hours and days whose minutes changed (the open
    # 5-minute bucket is 5 minute rows per series, cheap to redo each minute, and week-long
    # timelines read it), and fills a newly added level's history a few seconds at a time.
    "roll-up-recent-samples": {
        "task": "stormwatch.roll_up_recent_samples",
        "schedule": timedelta(minutes=1),
        "options": {"expires": 60},
    },
    # Late samples nobody marked show up as raw counts that differ from rolled counts;
    # counting 3 h of raw is a few seconds of database time, so every 10 minutes.
    "sweep-late-samples": {
        "task": "stormwatch.sweep_late_samples",
        "schedule": timedelta(minutes=10),
        "options": {"expires": 600},
    },
    # Rollups live 400 days by default (per org), audit entries AUDIT_RETENTION_DAYS; a
    # daily pass overshoots by under a day.
    "apply-rollup-retention": {
        "task": "stormwatch.apply_rollup_retention",
        "schedule": timedelta(days=1),
    },
})

# --- advisors (services/advisors, worker/tasks/advisors.py) ------------------------------
BEAT_SCHEDULE.update({
    # Cached answers are kept 7 days; a daily purge overshoots that by under a day.
    "purge-advisor-results": {
        "task": "stormwatch.purge_advisor_results",
        "schedule": timedelta(days=1),
    },
})

# --- alert notifications (services/notify/, worker/tasks/notifications.py) ---------------
BEAT_SCHEDULE.update({
    # Evaluation enqueues dispatch at once after writing events; this is the backstop for a
    # lost enqueue, for retries past their backoff and for reminders, whose granularity it
    # sets: 15 s keeps a missed event under the 60 s spike-to-message target.
    "dispatch-alert-events": {
        "task": "stormwatch.dispatch_alert_events",
        "schedule": timedelta(seconds=15),
        "options": {"expires": 15},
    },
    # Alertmanager ends an alert whose endsAt passed: firing alerts told to Alertmanager
    # channels are re-posted each minute, valid 4 minutes, as Prometheus resends its own.
    "repost-alertmanager-alerts": {
        "task": "stormwatch.repost_alertmanager_alerts",
        "schedule": REPOST_INTERVAL,
        "options": {"expires": 60},
    },
})

# --- alerts (services/alerts/, worker/tasks/alerts.py) -----------------------------------
BEAT_SCHEDULE.update({
    # A 30 s window is evaluated 5 s after it closes; a 10 s cadence adds at most 10 s, so a
    # spike's first sample is judged within 45 s and told well within the 60 s promised.
    # Cycles are cheap when nothing is due (one read of the rules), and expire rather than
    # pile up behind a slow one.
    "evaluate-alert-rules": {
        "task": "stormwatch.evaluate_alert_rules",
        "schedule": timedelta(seconds=10),
        "options": {"expires": 10},
    },
})

# --- throughput experiments (services/throughput, worker/tasks/throughput.py) -------------
BEAT_SCHEDULE.update({
    # Each run plans the rest of today and all of tomorrow, so tomorrow is planned ~23 h
    # ahead and a newly enabled org, a new pair or a raised budget is picked up within the
    # hour; a run finds what a day already holds and plans nothing twice.
    "schedule-throughput-experiments": {
        "task": "stormwatch.schedule_throughput_experiments",
        "schedule": timedelta(hours=1),
        "options": {"expires": 3600},
    },
    # Experiments are analysed 5 min after they end (the receivers' batches are in by then);
    # every 5 minutes keeps results at most 10 min behind, and an idle pass is one query.
    "analyze-throughput-experiments": {
        "task": "stormwatch.analyze_throughput_experiments",
        "schedule": timedelta(minutes=5),
        "options": {"expires": 300},
    },
})

# --- exports (services/export/otlp.py, worker/tasks/export.py) ----------------------------
BEAT_SCHEDULE.update({
    # Each org sets its own push interval (10 s to an hour); a 10 s tick keeps every push
    # within 10 s of due, and a tick with nothing due is one UPDATE that matches no row.
    "push-otlp-exports": {
        "task": "stormwatch.push_otlp_exports",
        "schedule": timedelta(seconds=10),
        "options": {"expires": 10},
    },
})

# --- path traces (services/paths/requests.py, triggers.py, worker/tasks/paths.py) ---------
BEAT_SCHEDULE.update({
    # A firing mesh alert, a level shift or rising loss asks the pair's agent for a trace;
    # agents poll their config every 30 s, so a 30 s pass has the trace under way within a
    # minute of the alert (a shift is confirmed 2.5-3 min after it starts: 5 windows of 30 s).
    "request-path-traces": {
        "task": "stormwatch.request_path_traces",
        "schedule": timedelta(seconds=30),
        "options": {"expires": 30},
    },
})
