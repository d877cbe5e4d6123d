"""Silence and maintenance matching: label matchers, and recurring windows on a local wall
clock across DST changes and midnight."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from stormwatch.services.notify.matching import (
    next_start,
    occurrences,
    rule_labels,
    scope_matches,
    window_active,
)

RULE = uuid.uuid4()
LABELS = rule_labels(RULE, "p99 eu", "critical", {"team": "net", "env": "prod-eu"})


def test_matchers_see_rule_labels_and_name_severity_and_id() -> None:
    assert scope_matches([], [{"label": "team", "op": "=", "value": "net"}], RULE, LABELS)
    assert scope_matches([], [{"label": "alertname", "op": "=", "value": "p99 eu"},
                              {"label": "severity", "op": "!=", "value": "info"}], RULE, LABELS)
    assert scope_matches([], [{"label": "env", "op": "=~", "value": "prod-.*"}], RULE, LABELS)
    assert not scope_matches([], [{"label": "env", "op": "!~", "value": "prod.*"}], RULE, LABELS)
    # A regex matches the whole value, not a part of it.
    assert not scope_matches([], [{"label": "env", "op": "=~", "value": "prod"}], RULE, LABELS)
    # A missing label is the empty string.
    assert scope_matches([], [{"label": "owner", "op": "=", "value": ""}], RULE, LABELS)
    assert scope_matches([RULE], [], RULE, LABELS)
    assert not scope_matches([uuid.uuid4()], [], RULE, LABELS)
    # rule_ids and matchers must both hold.
    assert not scope_matches([RULE], [{"label": "team", "value": "db"}], RULE, LABELS)


def utc(*a: int) -> datetime:
    return datetime(*a, tzinfo=UTC)


def test_a_nightly_window_keeps_its_local_time_across_spring_and_autumn_dst() -> None:
    # Every day 23:30-00:30 Berlin, first on 2026-03-20 (CET, UTC+1).
    start = utc(2026, 3, 20, 22, 30)
    starts = occurrences(start, "FREQ=DAILY", "Europe/Berlin", utc(2026, 3, 27), utc(2026, 3, 31))
    assert starts == [utc(2026, 3, 27, 22, 30), utc(2026, 3, 28, 22, 30),
                      utc(2026, 3, 29, 21, 30), utc(2026, 3, 30, 21, 30)]  # CEST from 29 March
    autumn = occurrences(start, "FREQ=DAILY", "Europe/Berlin", utc(2026, 10, 24),
                         utc(2026, 10, 27))
    assert autumn == [utc(2026, 10, 24, 21, 30), utc(2026, 10, 25, 22, 30),
                      utc(2026, 10, 26, 22, 30)]
    # Across midnight: 00:15 local the next day is inside, 00:31 is not.
    assert window_active(start, 3600, "FREQ=DAILY", "Europe/Berlin", utc(2026, 3, 30, 22, 15))
    assert not window_active(start, 3600, "FREQ=DAILY", "Europe/Berlin",
                             utc(2026, 3, 30, 22, 31))
    # The UTC hour the window had before DST is outside it after the change.
    assert not window_active(start, 3600, "FREQ=DAILY", "Europe/Berlin",
                             utc(2026, 4, 1, 23, 15))


def test_a_weekly_window_on_sunday_night_in_new_york_and_its_next_start() -> None:
    # Sundays 01:00 New York for 2 hours; DST begins 2026-03-08 at 02:00 local, so that
    # night's window starts in EST (06:00 UTC) and the next Sunday's in EDT (05:00 UTC).
    start = utc(2026, 3, 1, 6, 0)  # 01:00 EST
    rule = "FREQ=WEEKLY;BYDAY=SU"
    assert window_active(start, 7200, rule, "America/New_York", utc(2026, 3, 1, 7, 59))
    assert window_active(start, 7200, rule, "America/New_York", utc(2026, 3, 8, 6, 30))
    assert not window_active(start, 7200, rule, "America/New_York", utc(2026, 3, 8, 5, 30))
    assert window_active(start, 7200, rule, "America/New_York", utc(2026, 3, 15, 5, 30))
    assert not window_active(start, 7200, rule, "America/New_York", utc(2026, 3, 15, 7, 30))
    assert next_start(start, 7200, rule, "America/New_York",
                      utc(2026, 3, 9)) == utc(2026, 3, 15, 5, 0)
    # Nothing before the first occurrence.
    assert not window_active(start, 7200, rule, "America/New_York", utc(2026, 2, 22, 6, 30))


def test_one_off_windows_are_half_open() -> None:
    start = utc(2026, 11, 23, 12)
    assert window_active(start, 600, None, "UTC", start)
    assert window_active(start, 600, None, "UTC", start + timedelta(seconds=599))
    assert not window_active(start, 600, None, "UTC", start + timedelta(seconds=600))
    assert next_start(start, 600, None, "UTC", start - timedelta(hours=1)) == start
    assert next_start(start, 600, None, "UTC", start) is None
