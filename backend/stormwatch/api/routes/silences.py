"""Silences under /silences: mute matching rules' notifications until an end time."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, status
from sqlalchemy import select

from stormwatch.api.deps import AdminDep, AuditActorDep, OrgPrincipalDep, Principal, SessionDep
from stormwatch.api.errors import Detail, ServiceErrors
from stormwatch.models import Silence, User
from stormwatch.schemas.errors import NOT_FOUND
from stormwatch.schemas.notifications import SilenceCreate, SilencePublic
from stormwatch.services import audit
from stormwatch.services.notify import windows as svc
from stormwatch.services.notify.channels import Invalid

router = APIRouter(prefix="/silences", tags=["notifications"])

# Silences and maintenance windows check their bodies the same way.
INVALID: dict[type[Exception], tuple[int, Detail]] = {
    Invalid: (status.HTTP_422_UNPROCESSABLE_CONTENT, lambda e: e.errors)}
_errors = ServiceErrors({svc.NotFound: (status.HTTP_404_NOT_FOUND, "no such silence"),
                         **INVALID})


async def who(session: SessionDep, principal: Principal) -> str:
    """Who made a silence or window: the user's email, or which API key."""
    if principal.user_id is not None and principal.kind == "user":
        email = await session.scalar(select(User.email).where(User.id == principal.user_id))
        if email:
            return str(email)
    if principal.api_key_id is not None:
        return f"api key {principal.api_key_id}"
    return principal.kind


def _audited(silence: SilencePublic) -> dict[str, object]:
    # The state follows from the clock; the log keeps what people set.
    return {k: v for k, v in audit.snapshot(silence).items() if k != "state"}


@router.get("", response_model=list[SilencePublic])
async def list_silences(principal: OrgPrincipalDep, session: SessionDep,
                        include_expired: bool = False) -> list[SilencePublic]:
    return await svc.list_silences(session, principal.org_id, include_expired)


@router.post("", response_model=SilencePublic, status_code=status.HTTP_201_CREATED)
async def create_silence(body: SilenceCreate, principal: AdminDep,
                         session: SessionDep, actor: AuditActorDep) -> SilencePublic:
    """Mutes notifications of the rules matched by rule_ids and/or label matchers (rules
    carry their labels plus alertname, severity and rule_id) from starts_at to ends_at."""
    made_by = await who(session, principal)
    async with _errors.writing(session):
        made = await svc.create_silence(session, principal.org_id, body, made_by)
        audit.record(session, principal.org_id, actor, "silence.create", "silence", made.id,
                     made.comment, audit.diff(None, _audited(made)))
        return made


@router.delete("/{silence_id}", response_model=SilencePublic, responses=NOT_FOUND)
async def expire_silence(silence_id: uuid.UUID, principal: AdminDep,
                         session: SessionDep, actor: AuditActorDep) -> SilencePublic:
    """Expires the silence now (it stays in the history)."""
    async with _errors.writing(session):
        row = await session.get(Silence, silence_id)
        before = _audited(svc.silence_public(row)) if row is not None else None
        made = await svc.expire_silence(session, principal.org_id, silence_id)
        diff = audit.diff(before, _audited(made))
        if diff:
            audit.record(session, principal.org_id, actor, "silence.expire", "silence",
                         silence_id, made.comment, diff)
        return made
