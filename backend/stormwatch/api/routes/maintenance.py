"""Maintenance windows under /maintenance-windows: one-off or recurring (RFC 5545 RRULE in
a timezone), during which matching rules notify nobody."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Response, status

from stormwatch.api.deps import AdminDep, OrgPrincipalDep, SessionDep
from stormwatch.api.errors import ServiceErrors
from stormwatch.api.routes.silences import INVALID, who
from stormwatch.schemas.errors import NOT_FOUND
from stormwatch.schemas.notifications import (
    MaintenanceWindowCreate,
    MaintenanceWindowPublic,
    MaintenanceWindowUpdate,
)
from stormwatch.services.notify import windows as svc

router = APIRouter(prefix="/maintenance-windows", tags=["notifications"])

_errors = ServiceErrors({
    svc.NotFound: (status.HTTP_404_NOT_FOUND, "no such maintenance window"), **INVALID})


@router.get("", response_model=list[MaintenanceWindowPublic])
async def list_maintenance_windows(principal: OrgPrincipalDep, session: SessionDep
                                   ) -> list[MaintenanceWindowPublic]:
    return await svc.list_windows(session, principal.org_id)


@router.post("", response_model=MaintenanceWindowPublic, status_code=status.HTTP_201_CREATED)
async def create_maintenance_window(body: MaintenanceWindowCreate, principal: AdminDep,
                                    session: SessionDep) -> MaintenanceWindowPublic:
    made_by = await who(session, principal)
    async with _errors.writing(session):
        return await svc.create_window(session, principal.org_id, body, made_by)


@router.patch("/{window_id}", response_model=MaintenanceWindowPublic, responses=NOT_FOUND)
async def update_maintenance_window(window_id: uuid.UUID, body: MaintenanceWindowUpdate,
                                    principal: AdminDep, session: SessionDep
                                    ) -> MaintenanceWindowPublic:
    async with _errors.writing(session):
        return await svc.update_window(session, principal.org_id, window_id, body)


@router.delete("/{window_id}", status_code=status.HTTP_204_NO_CONTENT, responses=NOT_FOUND)
async def delete_maintenance_window(window_id: uuid.UUID, principal: AdminDep,
                                    session: SessionDep) -> Response:
    async with _errors.writing(session):
        await svc.delete_window(session, principal.org_id, window_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
