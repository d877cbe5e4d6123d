"""Which rules a silence or maintenance window covers, and when a window is on. Pure."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from dateutil.rrule import rrulestr


def rule_labels(rule_id: uuid.UUID, name: str, severity: str,
                labels: Mapping[str, str] | None) -> dict[str, str]:
    """The labels matchers see: the rule's own plus alertname, severity and rule_id."""
    return {**(labels or {}), "alertname": name, "severity": severity, "rule_id": str(rule_id)}


def matcher_matches(matcher: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    have = labels.get(matcher["label"], "")
    op, want = matcher.get("op", "="), matcher["value"]
    if op == "=":
        return have == want
    if op == "!=":
        return have != want
    hit = re.fullmatch(want, have) is not None
    return hit if op == "=~" else not hit


def scope_matches(rule_ids: Sequence[uuid.UUID], matchers: Iterable[Mapping[str, str]],
                  rule_id: uuid.UUID, labels: Mapping[str, str]) -> bool:
    """Rule ids (if any) must include the rule AND every matcher must hold."""
    if rule_ids and rule_id not in rule_ids:
        return False
    return all(matcher_matches(m, labels) for m in matchers)


def local_naive(at: datetime, tz: ZoneInfo) -> datetime:
    return at.astimezone(tz).replace(tzinfo=None)


def to_utc(local: datetime, tz: ZoneInfo) -> datetime:
    # fold=0: an ambiguous wall time (autumn) is its first instance; one in the spring gap
    # is read with the offset before the change, i.e. it lands just after the gap.
    return local.replace(tzinfo=tz, fold=0).astimezone(UTC)


def occurrences(starts_at: datetime, rrule: str, tz_name: str, lo: datetime,
                hi: datetime) -> list[datetime]:
    """UTC starts of a recurring window's occurrences with lo <= start < hi. The rule runs
    on the local wall clock of `tz_name` from starts_at's local time, so "every day at 23:30
    Berlin" stays 23:30 local across DST."""
    tz = ZoneInfo(tz_name)
    rule = rrulestr(rrule, dtstart=local_naive(starts_at, tz))
    # One day of slack on each side covers any UTC offset; exact bounds are checked in UTC.
    lo_l = local_naive(lo, tz) - timedelta(days=1)
    hi_l = local_naive(hi, tz) + timedelta(days=1)
    out = []
    for occ in rule.between(lo_l, hi_l, inc=True):
        start = to_utc(occ, tz)
        if lo <= start < hi:
            out.append(start)
    return out


def window_active(starts_at: datetime, duration_s: int, rrule: str | None, tz_name: str,
                  at: datetime) -> bool:
    span = timedelta(seconds=duration_s)
    if not rrule:
        return starts_at <= at < starts_at + span
    if at < starts_at:
        return False
    return bool(occurrences(starts_at, rrule, tz_name, at - span + timedelta(microseconds=1),
                            at + timedelta(microseconds=1)))


def next_start(starts_at: datetime, duration_s: int, rrule: str | None, tz_name: str,
               after: datetime) -> datetime | None:
    if not rrule:
        return starts_at if starts_at > after else None
    tz = ZoneInfo(tz_name)
    rule = rrulestr(rrule, dtstart=local_naive(starts_at, tz))
    cur = local_naive(after, tz) - timedelta(days=1)
    for _ in range(5):  # the day of slack can yield starts before `after`
        occ = rule.after(cur, inc=False)
        if occ is None:
            return None
        start = to_utc(occ, tz)
        if start > after:
            return start
        cur = occ
    return None
