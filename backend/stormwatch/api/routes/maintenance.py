"""Maintenance windows under /maintenance-windows: one-off or recurring (RFC 5545 RRULE in
a timezone), during which matching rules notify nobody."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Response, status

from stormwatch.api.deps import AdminDep, AuditActorDep, OrgPrincipalDep, SessionDep
from stormwatch.api.errors import ServiceErrors
from stormwatch.api.routes.silences import INVALID, who
from stormwatch.schemas.errors import NOT_FOUND
from stormwatch.schemas.notifications import (
    MaintenanceWindowCreate,
    MaintenanceWindowPublic,
    MaintenanceWindowUpdate,
)
from stormwatch.services import audit
from stormwatch.services.notify import windows as svc

router = APIRouter(prefix="/maintenance-windows", tags=["notifications"])

_errors = ServiceErrors({
    svc.NotFound: (status.HTTP_404_NOT_FOUND, "no such maintenance window"), **INVALID})


def _audited(window: MaintenanceWindowPublic) -> dict[str, object]:
    # Whether it is active and when it next starts follow from the clock, not from people.
    return {k: v for k, v in audit.snapshot(window).items()
            if k not in ("active_now", "next_start")}


@router.get("", response_model=list[MaintenanceWindowPublic])
async def list_maintenance_windows(principal: OrgPrincipalDep, session: SessionDep
                                   ) -> list[MaintenanceWindowPublic]:
    return await svc.list_windows(session, principal.org_id)


@router.post("", response_model=MaintenanceWindowPublic, status_code=status.HTTP_201_CREATED)
async def create_maintenance_window(body: MaintenanceWindowCreate, principal: AdminDep,
                                    session: SessionDep,
                                    actor: AuditActorDep) -> MaintenanceWindowPublic:
    made_by = await who(session, principal)
    async with _errors.writing(session):
        made = await svc.create_window(session, principal.org_id, body, made_by)
        audit.record(session, principal.org_id, actor, "maintenance_window.create",
                     "maintenance_window", made.id, made.name, audit.diff(None, _audited(made)))
        return made


@router.patch("/{window_id}", response_model=MaintenanceWindowPublic, responses=NOT_FOUND)
async def update_maintenance_window(window_id: uuid.UUID, body: MaintenanceWindowUpdate,
                                    principal: AdminDep, session: SessionDep,
                                    actor: AuditActorDep) -> MaintenanceWindowPublic:
    async with _errors.writing(session):
        before = _audited(svc.window_public(
            await svc.get_window(session, principal.org_id, window_id)))
        made = await svc.update_window(session, principal.org_id, window_id, body)
        diff = audit.diff(before, _audited(made))
        if diff:
            audit.record(session, principal.org_id, actor, "maintenance_window.update",
                         "maintenance_window", window_id, made.name, diff)
        return made


@router.delete("/{window_id}", status_code=status.HTTP_204_NO_CONTENT, responses=NOT_FOUND)
async def delete_maintenance_window(window_id: uuid.UUID, principal: AdminDep,
                                    session: SessionDep, actor: AuditActorDep) -> Response:
    async with _errors.writing(session):
        before = _audited(svc.window_public(
            await svc.get_window(session, principal.org_id, window_id)))
        await svc.delete_window(session, principal.org_id, window_id)
        audit.record(session, principal.org_id, actor, "maintenance_window.delete",
                     "maintenance_window", window_id, str(before["name"]),
                     audit.diff(before, None))
    return Response(status_code=status.HTTP_204_NO_CONTENT)
