"""Periodic jobs' run records, and what health makes of them.

Every job in the beat schedule records its starts, successes and failures (with the
failure's reason) in `job_runs`, from the worker process that ran it. A job is failing when
it failed its last FAILURES_RED runs, or when it has not succeeded within STALE_CADENCES
times its cadence (plus STALE_GRACE_S) counted from its last success, or from when beat
started if that is later (beat plans a job's first run one cadence after it starts, so a
restart after a long stop is not a failure). Health, the worker's metrics and the UI's
banner all read these rows, so every process agrees."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, text

# Failures in a row that make a job red: one failed run can be a blip (a deploy, a lock).
FAILURES_RED = 3
# Cadences without a success that make a job red, and the slack for a long pass before it.
STALE_CADENCES = 3
STALE_GRACE_S = 120
REASON_CHARS = 300


def reason_of(exc: BaseException) -> str:
    """A failure's reason for people: the exception's type and the first line of its message.
    SQLAlchemy's messages carry the statement and its parameters, so only the driver's own
    first line is kept."""
    inner = getattr(exc, "orig", None) or exc
    first = (str(inner).strip().splitlines() or [""])[0]
    return f"{type(inner).__name__}: {first}"[:REASON_CHARS]


def record_start(conn: Connection, job: str, cadence_s: int, now: datetime) -> None:
    conn.execute(text("""
        INSERT INTO job_runs (job, cadence_s, first_start, last_start)
        VALUES (:job, :cadence, :now, :now)
        ON CONFLICT (job) DO UPDATE SET last_start = EXCLUDED.last_start,
                                        cadence_s = EXCLUDED.cadence_s"""),
                 {"job": job, "cadence": cadence_s, "now": now})


def record_success(conn: Connection, job: str, now: datetime) -> None:
    conn.execute(text("UPDATE job_runs SET last_success = :now, failures_in_a_row = 0 "
                      "WHERE job = :job"), {"job": job, "now": now})


def record_failure(conn: Connection, job: str, now: datetime, reason: str) -> None:
    conn.execute(text("UPDATE job_runs SET last_failure = :now, last_error = :reason, "
                      "failures_in_a_row = failures_in_a_row + 1 WHERE job = :job"),
                 {"job": job, "now": now, "reason": reason[:REASON_CHARS]})


@dataclass
class JobState:
    """One scheduled job as health reports it (the beat schedule's name of the job)."""

    job: str
    ok: bool
    detail: str
    cadence_s: int
    last_start: datetime | None
    last_success: datetime | None
    last_failure: datetime | None
    last_error: str | None
    failures_in_a_row: int


def judge(row: Any, now: datetime, beat_started: datetime | None) -> JobState:
    """One job's state from its row (job_runs columns)."""
    since = max(x for x in (row.last_success, row.first_start, beat_started) if x is not None)
    limit = timedelta(seconds=STALE_CADENCES * row.cadence_s + STALE_GRACE_S)
    ok, detail = True, "ok"
    if row.failures_in_a_row >= FAILURES_RED:
        ok = False
        detail = f"failed its last {row.failures_in_a_row} runs: {row.last_error}"
    elif now - since > limit:
        ok = False
        last = ("never succeeded" if row.last_success is None
                else f"last succeeded {(now - row.last_success).total_seconds():.0f} s ago")
        detail = (f"no success for {(now - since).total_seconds():.0f} s, more than "
                  f"{STALE_CADENCES} runs of every {row.cadence_s} s ({last})"
                  + (f"; last failure: {row.last_error}" if row.last_error else ""))
    elif row.failures_in_a_row:
        detail = f"failed its last run ({row.last_error}); red after {FAILURES_RED} in a row"
    return JobState(row.job, ok, detail, row.cadence_s, row.last_start, row.last_success,
                    row.last_failure, row.last_error, row.failures_in_a_row)


JOB_ROWS_SQL = ("SELECT job, cadence_s, first_start, last_start, last_success, last_failure, "
                "last_error, failures_in_a_row FROM job_runs ORDER BY job")
