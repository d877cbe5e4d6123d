"""Alert rules (CRUD, backtest, the metric catalog) and alert history. Reads take any
principal of the org, changes the admin role; the org always comes from the credential."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response, status

from stormwatch.api.deps import AdminDep, AuditActorDep, OrgPrincipalDep, SessionDep
from stormwatch.api.errors import ServiceErrors, value_error
from stormwatch.schemas.alerts import (
    AlertDetail,
    AlertPublic,
    AlertRuleCreate,
    AlertRulePublic,
    AlertRuleUpdate,
    BacktestRequest,
    BacktestResult,
    MetricsCatalog,
)
from stormwatch.schemas.errors import NOT_FOUND
from stormwatch.services import audit
from stormwatch.services import vocabularies as vocab
from stormwatch.services.alerts import rules as svc
from stormwatch.services.alerts.backtest import backtest
from stormwatch.services.alerts.validation import RuleInvalid
from stormwatch.services.analytics.filters import QueryError

router = APIRouter(tags=["alerts"])


_errors = ServiceErrors({
    svc.RuleNotFound: (status.HTTP_404_NOT_FOUND, "no such alert rule"),
    svc.AlertNotFound: (status.HTTP_404_NOT_FOUND, "no such alert"),
    RuleInvalid: (status.HTTP_422_UNPROCESSABLE_CONTENT, lambda e: value_error(e.loc, e.msg)),
    QueryError: (status.HTTP_422_UNPROCESSABLE_CONTENT,
                 lambda e: value_error(["body", e.param], str(e))),
})


def _draft(body: Any) -> dict[str, Any]:
    d = body.model_dump(exclude_unset=False, by_alias=False)
    d.pop("from_", None)
    d.pop("to", None)
    d["scope"] = body.scope.model_dump(mode="json", exclude_none=True)
    d["condition"] = body.condition.model_dump()
    d["channel_ids"] = list(body.channel_ids)
    return d


@router.get("/alert-rules/metrics", response_model=MetricsCatalog)
async def alert_metrics(principal: OrgPrincipalDep) -> MetricsCatalog:
    """What the rule editor can offer (also part of GET /vocabularies)."""
    return MetricsCatalog.model_validate(vocab.alert_metrics())


@router.get("/alert-rules", response_model=list[AlertRulePublic])
async def list_alert_rules(principal: OrgPrincipalDep, session: SessionDep) -> Any:
    return await svc.list_rules(session, principal.org_id)


# Kept by the evaluator, not changed by people.
_NOT_AUDITED = ("firing", "evaluated_until", "created_by", "created_by_key_id",
                "eval_failures_in_a_row", "eval_last_error", "eval_last_failure")


@router.post("/alert-rules", response_model=AlertRulePublic,
             status_code=status.HTTP_201_CREATED)
async def create_alert_rule(body: AlertRuleCreate, principal: AdminDep,
                            session: SessionDep, actor: AuditActorDep) -> Any:
    async with _errors.writing(session):
        rule = await svc.create_rule(session, principal.org_id, _draft(body), principal.user_id,
                                     principal.api_key_id)
        audit.record(session, principal.org_id, actor, "alert_rule.create", "alert_rule",
                     rule["id"], rule["name"], audit.diff(None, rule, ignore=_NOT_AUDITED))
        return rule


@router.post("/alert-rules/backtest", response_model=BacktestResult,
             response_model_by_alias=True)
async def backtest_alert_rule(body: BacktestRequest, principal: OrgPrincipalDep,
                              session: SessionDep) -> Any:
    """How often the draft would have fired over the range (default: the last 7 days, from
    where the org's data begins when that is later), each firing's start, end, series and
    peak, and the evaluated windows to draw."""
    end = body.to or datetime.now(UTC)
    start = body.from_ or end - timedelta(days=7)
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    if end.tzinfo is None:
        end = end.replace(tzinfo=UTC)
    if end <= start:
        _errors.raise_(RuleInvalid(["body", "to"], "to must be after from"))
    if end - start > timedelta(days=31):
        _errors.raise_(RuleInvalid(["body", "from"], "a backtest covers at most 31 days"))
    with _errors.reading():
        return await backtest(session, principal.org_id, _draft(body), start, end,
                              from_data=body.from_ is None)


@router.get("/alert-rules/{rule_id}", response_model=AlertRulePublic, responses=NOT_FOUND)
async def get_alert_rule(rule_id: uuid.UUID, principal: OrgPrincipalDep,
                         session: SessionDep) -> Any:
    with _errors.reading():
        return await svc.get_rule(session, principal.org_id, rule_id)


@router.patch("/alert-rules/{rule_id}", response_model=AlertRulePublic, responses=NOT_FOUND)
async def update_alert_rule(rule_id: uuid.UUID, body: AlertRuleUpdate, principal: AdminDep,
                            session: SessionDep, actor: AuditActorDep) -> Any:
    changes = body.model_dump(exclude_unset=True)
    if body.scope is not None:
        changes["scope"] = body.scope.model_dump(mode="json", exclude_none=True)
    if body.condition is not None:
        changes["condition"] = body.condition.model_dump()
    for k in ("name", "metric", "statistic", "window_s", "condition", "x", "y", "n",
              "severity", "enabled", "labels", "scope", "channel_ids"):
        if k in changes and changes[k] is None:
            _errors.raise_(RuleInvalid(["body", k], f"{k} cannot be null"))
    async with _errors.writing(session):
        before = audit.snapshot(await svc.get_rule(session, principal.org_id, rule_id))
        rule = await svc.update_rule(session, principal.org_id, rule_id, changes)
        diff = audit.diff(before, rule, ignore=_NOT_AUDITED)
        if diff:
            audit.record(session, principal.org_id, actor, "alert_rule.update", "alert_rule",
                         rule_id, rule["name"], diff)
        return rule


@router.delete("/alert-rules/{rule_id}", status_code=status.HTTP_204_NO_CONTENT,
               responses=NOT_FOUND)
async def delete_alert_rule(rule_id: uuid.UUID, principal: AdminDep,
                            session: SessionDep, actor: AuditActorDep) -> Response:
    async with _errors.writing(session):
        before = await svc.get_rule(session, principal.org_id, rule_id)
        await svc.delete_rule(session, principal.org_id, rule_id)
        audit.record(session, principal.org_id, actor, "alert_rule.delete", "alert_rule",
                     rule_id, before["name"], audit.diff(before, None, ignore=_NOT_AUDITED))
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/alerts", response_model=list[AlertPublic])
async def list_alerts(
    principal: OrgPrincipalDep, session: SessionDep,
    state: Literal["firing", "resolved"] | None = None,
    rule_id: uuid.UUID | None = None,
    from_: Annotated[datetime | None, Query(alias="from", description="UTC")] = None,
    to: Annotated[datetime | None, Query(description="UTC")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> Any:
    """Alerts, newest first, with their rule's name, severity and labels, the agreeing
    series and the evidence."""
    return await svc.list_alerts(session, principal.org_id, state, rule_id, from_, to, limit)


@router.get("/alerts/{alert_id}", response_model=AlertDetail, responses=NOT_FOUND)
async def get_alert(alert_id: uuid.UUID, principal: OrgPrincipalDep,
                    session: SessionDep) -> Any:
    """One alert with its transitions (firing, resolved) and evidence."""
    with _errors.reading():
        return await svc.get_alert(session, principal.org_id, alert_id)
