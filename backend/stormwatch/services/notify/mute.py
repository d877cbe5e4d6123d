"""The mute stage: which silence or maintenance window keeps a rule's message from going
out now (matching.py says whether one covers a rule and when a window is on)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, text

from stormwatch.services.alerts.definition import Rule
from stormwatch.services.notify import matching

Row = Mapping[Any, Any]


@dataclass
class Suppressions:
    silences: list[Row]
    windows: list[Row]

    def why(self, rule: Rule, now: datetime, at: datetime | None = None) -> tuple[str, Any]:
        """('silenced', id) for a silence active now, ('maintenance', id) for a window
        covering now or the data time `at`, else ('', None)."""
        labels = matching.rule_labels(rule.id, rule.name, rule.severity, rule.labels)
        for s in self.silences:
            if (s["org_id"] == rule.org_id and s["starts_at"] <= now < s["ends_at"]
                    and matching.scope_matches(s["rule_ids"], s["matchers"], rule.id, labels)):
                return "silenced", s["id"]
        for w in self.windows:
            if w["org_id"] != rule.org_id or not matching.scope_matches(
                    w["rule_ids"], w["matchers"], rule.id, labels):
                continue
            for t in (now, at) if at is not None else (now,):
                if matching.window_active(w["starts_at"], w["duration_s"], w["rrule"],
                                          w["timezone"], t):
                    return "maintenance", w["id"]
        return "", None


def load_suppressions(conn: Connection, org_ids: Iterable[uuid.UUID],
                      now: datetime) -> Suppressions:
    orgs = list(set(org_ids))
    silences = conn.execute(text(
        "SELECT id, org_id, rule_ids, matchers, starts_at, ends_at FROM silences "
        "WHERE org_id = ANY(:orgs) AND starts_at <= :now AND ends_at > :now"),
        {"orgs": orgs, "now": now}).mappings().all()
    windows = conn.execute(text(
        "SELECT id, org_id, rule_ids, matchers, starts_at, duration_s, rrule, timezone "
        "FROM maintenance_windows WHERE org_id = ANY(:orgs) AND starts_at <= :now "
        "AND (rrule IS NOT NULL OR starts_at + make_interval(secs => duration_s) "
        "    > :now - interval '2 days')"),
        {"orgs": orgs, "now": now}).mappings().all()
    return Suppressions(list(silences), list(windows))
