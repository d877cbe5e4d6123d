"""Rules per org (create, read, change, delete) and the alert history. Every query filters on
the org of the caller's credential."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, func, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.models.alerts import Alert, AlertEvent, AlertRule
from stormwatch.services.alerts.evidence import Evidence
from stormwatch.services.alerts.metrics import statistic_unit
from stormwatch.services.alerts.validation import validate_rule
from stormwatch.services.owned import get_owned

DEFINITION = ("metric", "statistic", "scope", "window_s", "condition", "x", "y", "n", "m")
FIELDS = ("name", "description", "severity", "labels", "enabled", *DEFINITION, "channel_ids",
          "reminder_interval_s")


def judging_from(window_s: int, now: datetime | None = None) -> datetime:
    """The start of the window holding now: a rule judges from the window it was created (or
    last changed) in, so a spike a second after its creation is told, and never the 10-minute
    catch-up replay of what came before. Judging from the next boundary instead would leave
    the rest of the current window, up to a whole window of new data, unjudged."""
    t = int((now or datetime.now(UTC)).timestamp())
    return datetime.fromtimestamp(t // window_s * window_s, UTC)


class RuleNotFound(LookupError):
    pass


class AlertNotFound(LookupError):
    pass


def rule_dict(r: AlertRule, firing: int = 0) -> dict[str, Any]:
    return {**{f: getattr(r, f) for f in FIELDS}, "id": r.id, "org_id": r.org_id,
            "created_by": r.created_by, "created_by_key_id": r.created_by_key_id,
            "created_at": r.created_at, "updated_at": r.updated_at,
            "evaluated_until": r.evaluated_until, "firing": firing}


async def _firing_counts(session: AsyncSession, org_id: uuid.UUID) -> dict[uuid.UUID, int]:
    rows = (await session.execute(
        select(Alert.rule_id, func.count()).where(Alert.org_id == org_id,
                                                  Alert.state == "firing")
        .group_by(Alert.rule_id))).all()
    return {r[0]: int(r[1]) for r in rows}


async def list_rules(session: AsyncSession, org_id: uuid.UUID) -> list[dict[str, Any]]:
    rules = (await session.execute(select(AlertRule).where(AlertRule.org_id == org_id)
                                   .order_by(AlertRule.created_at, AlertRule.id))).scalars()
    counts = await _firing_counts(session, org_id)
    return [rule_dict(r, counts.get(r.id, 0)) for r in rules]


async def _get(session: AsyncSession, org_id: uuid.UUID, rule_id: uuid.UUID) -> AlertRule:
    return await get_owned(session, AlertRule, org_id, rule_id, RuleNotFound(str(rule_id)))


async def get_rule(session: AsyncSession, org_id: uuid.UUID, rule_id: uuid.UUID
                   ) -> dict[str, Any]:
    r = await _get(session, org_id, rule_id)
    return rule_dict(r, (await _firing_counts(session, org_id)).get(r.id, 0))


async def create_rule(session: AsyncSession, org_id: uuid.UUID, body: dict[str, Any],
                      user_id: uuid.UUID | None, api_key_id: uuid.UUID | None = None
                      ) -> dict[str, Any]:
    await validate_rule(session, org_id, body)
    r = AlertRule(id=uuid.uuid4(), org_id=org_id, created_by=user_id,
                  created_by_key_id=api_key_id,
                  evaluated_until=judging_from(body["window_s"]),
                  **{f: body[f] for f in FIELDS if f in body})
    session.add(r)
    await session.flush()
    await session.refresh(r)
    return rule_dict(r)


async def update_rule(session: AsyncSession, org_id: uuid.UUID, rule_id: uuid.UUID,
                      changes: dict[str, Any]) -> dict[str, Any]:
    """A changed definition (or a rule enabled again) judges from the start of the window
    holding now: states cleared, the cursor set there (the past is not replayed), eval_version
    bumped so an evaluation in flight loses its compare-and-set. Open alerts stay open and
    are judged by the new definition from then on: they resolve once it no longer holds."""
    r = await _get(session, org_id, rule_id)
    merged = {f: getattr(r, f) for f in FIELDS}
    merged.update(changes)
    await validate_rule(session, org_id, merged)
    values = {f: merged[f] for f in FIELDS if f in changes}
    values["updated_at"] = datetime.now(UTC)
    if any(f in changes and changes[f] != getattr(r, f) for f in DEFINITION) or (
            changes.get("enabled") is True and not r.enabled):
        values["evaluated_until"] = judging_from(merged["window_s"])
        values["eval_version"] = AlertRule.eval_version + 1
        await session.execute(text("DELETE FROM alert_series_state WHERE rule_id = :r"),
                              {"r": r.id})
    await session.execute(update(AlertRule).where(AlertRule.id == r.id,
                                                  AlertRule.org_id == org_id).values(**values))
    await session.flush()
    await session.refresh(r)
    return rule_dict(r, (await _firing_counts(session, org_id)).get(r.id, 0))


async def delete_rule(session: AsyncSession, org_id: uuid.UUID, rule_id: uuid.UUID) -> None:
    r = await _get(session, org_id, rule_id)
    await session.execute(delete(AlertRule).where(AlertRule.id == r.id,
                                                  AlertRule.org_id == org_id))


def _alert_dict(a: Alert, rule: AlertRule) -> dict[str, Any]:
    ev = Evidence.read(a.evidence)
    return {"id": a.id, "rule_id": a.rule_id, "rule_name": rule.name, "severity": rule.severity,
            "labels": rule.labels, "metric": rule.metric, "statistic": rule.statistic,
            "unit": statistic_unit(rule.metric, rule.statistic),
            "group_key": a.group_key, "state": a.state, "started_at": a.started_at,
            "resolved_at": a.resolved_at,
            "series": [s.model_dump(mode="json", exclude_unset=True, exclude={"values"})
                       for s in ev.series],
            "dashboard_path": ev.dashboard_path, "evidence": a.evidence or {}}


async def list_alerts(session: AsyncSession, org_id: uuid.UUID, state: str | None,
                      rule_id: uuid.UUID | None, start: datetime | None, end: datetime | None,
                      limit: int) -> list[dict[str, Any]]:
    q = (select(Alert, AlertRule).join(AlertRule, AlertRule.id == Alert.rule_id)
         .where(Alert.org_id == org_id, AlertRule.org_id == org_id))
    if state:
        q = q.where(Alert.state == state)
    if rule_id:
        q = q.where(Alert.rule_id == rule_id)
    if start:  # alerts that overlap [start, end)
        q = q.where((Alert.resolved_at.is_(None)) | (Alert.resolved_at >= start))
    if end:
        q = q.where(Alert.started_at < end)
    rows = (await session.execute(q.order_by(Alert.started_at.desc(), Alert.id)
                                  .limit(limit))).all()
    return [_alert_dict(a, r) for a, r in rows]


async def get_alert(session: AsyncSession, org_id: uuid.UUID, alert_id: uuid.UUID
                    ) -> dict[str, Any]:
    row = (await session.execute(
        select(Alert, AlertRule).join(AlertRule, AlertRule.id == Alert.rule_id)
        .where(Alert.id == alert_id, Alert.org_id == org_id))).first()
    if row is None:
        raise AlertNotFound(str(alert_id))
    events = (await session.execute(
        select(AlertEvent).where(AlertEvent.alert_id == alert_id, AlertEvent.org_id == org_id)
        .order_by(AlertEvent.at, AlertEvent.created_at))).scalars()
    out = _alert_dict(row[0], row[1])
    out["events"] = [{"id": e.id, "kind": e.kind, "at": e.at, "created_at": e.created_at,
                      "evidence": e.evidence} for e in events]
    return out
