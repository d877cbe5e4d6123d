"""Notification channels under /channels, their test send, and the delivery log
(/channels/{id}/deliveries, /deliveries). Secrets are write-only."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response, status
from sqlalchemy import text

from stormwatch.api.deps import AdminDep, AuditActorDep, OrgPrincipalDep, SessionDep
from stormwatch.api.errors import ServiceErrors
from stormwatch.notifications.base import PermanentError, TransientError
from stormwatch.notifications.registry import SECRET_NAMES
from stormwatch.schemas.errors import CONFLICT, NOT_FOUND
from stormwatch.schemas.notifications import (
    ChannelCreate,
    ChannelCreated,
    ChannelPublic,
    ChannelTestResult,
    ChannelUpdate,
    DeliveryPublic,
)
from stormwatch.services import audit
from stormwatch.services.notify import channels as svc

router = APIRouter(tags=["notifications"])


_errors = ServiceErrors({
    svc.ChannelNotFound: (status.HTTP_404_NOT_FOUND, "no such channel"),
    svc.ChannelConflict: (status.HTTP_409_CONFLICT, str),
    svc.Invalid: (status.HTTP_422_UNPROCESSABLE_CONTENT, lambda e: e.errors),
})


def _audited(public: Any, row: Any) -> dict[str, Any]:
    """The channel's public form plus its secrets, which the diff masks: the log shows which
    secret changed, never its value."""
    secrets = svc.secret_values(row)
    return {**audit.snapshot(public), "signing_secret": None,
            **{name: secrets.get(name) for name in SECRET_NAMES}}


@router.get("/channels", response_model=list[ChannelPublic])
async def list_channels(principal: OrgPrincipalDep, session: SessionDep) -> list[ChannelPublic]:
    return await svc.list_channels(session, principal.org_id)


@router.post("/channels", response_model=ChannelCreated, status_code=status.HTTP_201_CREATED,
             responses=CONFLICT)
async def create_channel(body: ChannelCreate, principal: AdminDep,
                         session: SessionDep, actor: AuditActorDep) -> ChannelCreated:
    """Creates a channel of a kind GET /vocabularies lists (email, Slack, webhook, PagerDuty,
    Opsgenie, Discord, Microsoft Teams, Prometheus Alertmanager; docs/integrations.md). A
    webhook channel's `signing_secret` (whsec_..., Standard Webhooks) is in this response
    only."""
    async with _errors.writing(session):
        made = await svc.create_channel(session, principal.org_id, body, principal.user_id)
        row = await svc.get_row(session, principal.org_id, made.id)
        audit.record(session, principal.org_id, actor, "channel.create", "channel", made.id,
                     made.name, audit.diff(None, _audited(made, row)))
        return made


@router.get("/channels/{channel_id}", response_model=ChannelPublic, responses=NOT_FOUND)
async def get_channel(channel_id: uuid.UUID, principal: OrgPrincipalDep,
                      session: SessionDep) -> ChannelPublic:
    with _errors.reading():
        return svc.public(await svc.get_row(session, principal.org_id, channel_id))


@router.patch("/channels/{channel_id}", response_model=ChannelCreated,
              responses={**NOT_FOUND, **CONFLICT})
async def update_channel(channel_id: uuid.UUID, body: ChannelUpdate, principal: AdminDep,
                         session: SessionDep, actor: AuditActorDep) -> ChannelCreated:
    async with _errors.writing(session):
        row = await svc.get_row(session, principal.org_id, channel_id)
        before = _audited(svc.public(row), row)
        made = await svc.update_channel(session, principal.org_id, channel_id, body)
        diff = audit.diff(before, _audited(made, row))
        if diff:
            audit.record(session, principal.org_id, actor, "channel.update", "channel",
                         channel_id, made.name, diff)
        return made


@router.delete("/channels/{channel_id}", status_code=status.HTTP_204_NO_CONTENT,
               responses=NOT_FOUND)
async def delete_channel(channel_id: uuid.UUID, principal: AdminDep,
                         session: SessionDep, actor: AuditActorDep) -> Response:
    async with _errors.writing(session):
        row = await svc.get_row(session, principal.org_id, channel_id)
        before = _audited(svc.public(row), row)
        await svc.delete_channel(session, principal.org_id, channel_id)
        audit.record(session, principal.org_id, actor, "channel.delete", "channel", channel_id,
                     before["name"], audit.diff(before, None))
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/channels/{channel_id}/test", response_model=ChannelTestResult, responses=NOT_FOUND)
async def test_channel(channel_id: uuid.UUID, principal: AdminDep,
                       session: SessionDep) -> ChannelTestResult:
    """Sends a test message now and answers the server's own reply or error verbatim."""
    with _errors.reading():
        row = await svc.get_row(session, principal.org_id, channel_id)
    message = svc.test_message(principal.org_id, row.name)
    try:
        channel = svc.build_channel(row.kind, row.config, row.secret_ciphertext)
    except (ValueError, KeyError) as exc:
        return ChannelTestResult(ok=False, permanent=True, detail=f"channel unusable: {exc}")
    try:
        reply = await channel.send(message, f"msg_test_{uuid.uuid4().hex}")
    except PermanentError as exc:
        return ChannelTestResult(ok=False, permanent=True, detail=exc.detail)
    except TransientError as exc:
        return ChannelTestResult(ok=False, permanent=False, detail=exc.detail)
    return ChannelTestResult(ok=True, detail=reply)


_DELIVERY_SQL = (
    "SELECT d.id, d.notification_id, n.kind AS notification_kind, d.channel_id, "
    "c.name AS channel_name, c.kind AS channel_kind, n.rule_id, r.name AS rule_name, "
    "n.alert_ids, d.state, d.attempts, d.next_attempt_at, d.last_error, d.response, "
    "d.sent_at, d.created_at FROM notification_deliveries d "
    "JOIN notifications n ON n.id = d.notification_id "
    "JOIN notification_channels c ON c.id = d.channel_id "
    "JOIN alert_rules r ON r.id = n.rule_id WHERE d.org_id = :org ")


async def _deliveries(session: SessionDep, org_id: uuid.UUID, where: str,
                      params: dict[str, Any], limit: int) -> list[DeliveryPublic]:
    rows = (await session.execute(text(
        _DELIVERY_SQL + where + " ORDER BY d.created_at DESC, d.id LIMIT :limit"),
        {"org": org_id, "limit": limit, **params})).mappings().all()
    return [DeliveryPublic(**r) for r in rows]


Limit = Annotated[int, Query(ge=1, le=1000)]


@router.get("/channels/{channel_id}/deliveries", response_model=list[DeliveryPublic],
            responses=NOT_FOUND)
async def list_channel_deliveries(channel_id: uuid.UUID, principal: OrgPrincipalDep,
                                  session: SessionDep, limit: Limit = 100
                                  ) -> list[DeliveryPublic]:
    """The channel's delivery log, newest first: state, attempts, the server's reply or
    the last error."""
    with _errors.reading():
        await svc.get_row(session, principal.org_id, channel_id)
    return await _deliveries(session, principal.org_id, "AND d.channel_id = :ch",
                             {"ch": channel_id}, limit)


@router.get("/deliveries", response_model=list[DeliveryPublic])
async def list_deliveries(principal: OrgPrincipalDep, session: SessionDep,
                          alert_id: uuid.UUID | None = None, rule_id: uuid.UUID | None = None,
                          state: str | None = Query(
                              default=None, pattern="^(pending|sending|sent|failed)$"),
                          since: datetime | None = None, limit: Limit = 100
                          ) -> list[DeliveryPublic]:
    """Deliveries of the org, newest first, by alert, rule or state."""
    where, params = "", dict[str, Any]()
    if alert_id is not None:
        where += "AND :alert = ANY(n.alert_ids) "
        params["alert"] = alert_id
    if rule_id is not None:
        where += "AND n.rule_id = :rule "
        params["rule"] = rule_id
    if state is not None:
        where += "AND d.state = :state "
        params["state"] = state
    if since is not None:
        where += "AND d.created_at >= :since "
        params["since"] = since
    return await _deliveries(session, principal.org_id, where, params, limit)
