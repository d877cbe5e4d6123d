"""What health makes of a scheduled job's runs: failures in a row, and staleness counted
from its last success or from beat's start, whichever is later."""

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from stormwatch.services.jobs import FAILURES_RED, STALE_GRACE_S, judge, reason_of

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def row(**kw):
    base = {"job": "evaluate-alert-rules", "cadence_s": 10, "first_start": NOW - timedelta(days=1),
            "last_start": NOW - timedelta(seconds=5), "last_success": NOW - timedelta(seconds=5),
            "last_failure": None, "last_error": None, "failures_in_a_row": 0}
    return SimpleNamespace(**{**base, **kw})


def test_a_job_running_on_time_is_ok() -> None:
    assert judge(row(), NOW, None).ok


def test_failures_in_a_row_turn_it_red_at_the_threshold_naming_the_reason() -> None:
    s = judge(row(failures_in_a_row=FAILURES_RED - 1, last_error="OperationalError: x"), NOW, None)
    assert s.ok and "red after" in s.detail
    s = judge(row(failures_in_a_row=FAILURES_RED, last_error="OperationalError: x"), NOW, None)
    assert not s.ok and s.detail == f"failed its last {FAILURES_RED} runs: OperationalError: x"


def test_no_success_within_three_cadences_and_the_grace_is_red() -> None:
    limit = 3 * 10 + STALE_GRACE_S
    assert judge(row(last_success=NOW - timedelta(seconds=limit - 1)), NOW, None).ok
    s = judge(row(last_success=NOW - timedelta(seconds=limit + 1)), NOW, None)
    assert not s.ok and "no success for" in s.detail


def test_a_daily_job_after_a_restart_is_judged_from_beats_start_not_its_old_success() -> None:
    old = row(job="purge-expired-sessions", cadence_s=86400, first_start=NOW - timedelta(days=30),
              last_success=NOW - timedelta(days=5))
    assert not judge(old, NOW, None).ok
    assert judge(old, NOW, NOW - timedelta(hours=2)).ok


def test_a_job_that_never_succeeded_counts_from_its_first_start() -> None:
    s = judge(row(last_success=None, first_start=NOW - timedelta(hours=1)), NOW, None)
    assert not s.ok and "never succeeded" in s.detail


def test_a_failures_reason_keeps_the_drivers_first_line_not_the_statement_or_parameters(
) -> None:
    class Driver(Exception):
        pass

    class Wrapped(Exception):
        orig = Driver('relation "x" does not exist\nLINE 1: SELECT secret')

    assert reason_of(Wrapped("[SQL: SELECT :token] [parameters: {'token': 'swa_s3cret'}]")) \
        == 'Driver: relation "x" does not exist'
