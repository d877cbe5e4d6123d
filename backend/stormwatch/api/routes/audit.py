"""The org's audit log, newest first: for admins (people and admin API keys)."""

import uuid
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, status
from sqlalchemy import and_, or_, select

from stormwatch.api.deps import AdminDep, SessionDep
from stormwatch.models import AuditEvent
from stormwatch.schemas.audit import AuditEventPublic, AuditPage

router = APIRouter(tags=["audit"])


def _cursor(event: AuditEvent) -> str:
    return f"{event.at.astimezone(UTC).isoformat()}~{event.id}"


def _parse_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    at_text, _, id_text = cursor.partition("~")
    try:
        at = datetime.fromisoformat(at_text)
        if at.tzinfo is None:
            raise ValueError("naive")
        return at, uuid.UUID(id_text)
    except ValueError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT,
                            [{"loc": ["query", "cursor"], "type": "value_error",
                              "msg": "cursor must be a next_cursor this API returned"}]) from exc


def _utc(value: datetime | None) -> datetime | None:
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


@router.get("/audit", response_model=AuditPage)
async def list_audit_events(
    principal: AdminDep, session: SessionDep,
    actor: Annotated[str | None, Query(
        description="The actor's id, or a part of its label (email, key name)")] = None,
    target_type: str | None = None,
    target_id: str | None = None,
    action: str | None = None,
    from_: Annotated[datetime | None, Query(alias="from", description="UTC, inclusive")] = None,
    to: Annotated[datetime | None, Query(description="UTC, exclusive")] = None,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> Any:
    start, end = _utc(from_), _utc(to)
    if start is not None and end is not None and end <= start:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT,
                            [{"loc": ["query", "to"], "type": "value_error",
                              "msg": "to must be after from"}])
    q = select(AuditEvent).where(AuditEvent.org_id == principal.org_id)
    if actor:
        try:
            q = q.where(AuditEvent.actor_id == uuid.UUID(actor))
        except ValueError:
            q = q.where(AuditEvent.actor_label.icontains(actor, autoescape=True))
    if target_type:
        q = q.where(AuditEvent.target_type == target_type)
    if target_id:
        q = q.where(AuditEvent.target_id == target_id)
    if action:
        q = q.where(AuditEvent.action == action)
    if start is not None:
        q = q.where(AuditEvent.at >= start)
    if end is not None:
        q = q.where(AuditEvent.at < end)
    if cursor:
        at, event_id = _parse_cursor(cursor)
        q = q.where(or_(AuditEvent.at < at, and_(AuditEvent.at == at, AuditEvent.id < event_id)))
    rows = list((await session.execute(
        q.order_by(AuditEvent.at.desc(), AuditEvent.id.desc()).limit(limit + 1))).scalars())
    more = len(rows) > limit
    rows = rows[:limit]
    return AuditPage(items=[AuditEventPublic.model_validate(r) for r in rows],
                     next_cursor=_cursor(rows[-1]) if more and rows else None)
