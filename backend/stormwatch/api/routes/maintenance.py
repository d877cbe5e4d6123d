"""Maintenance windows under /maintenance-windows: one-off or recurring (RFC 5545 RRULE in
a timezone), during which matching rules notify nobody."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, HTTPException, Response, status

from stormwatch.api.deps import AdminDep, OrgPrincipalDep, SessionDep
from stormwatch.api.routes.silences import who
from stormwatch.schemas.errors import NOT_FOUND
from stormwatch.schemas.notifications import (
    MaintenanceWindowCreate,
    MaintenanceWindowPublic,
    MaintenanceWindowUpdate,
)
from stormwatch.services.notify import windows as svc
from stormwatch.services.notify.channels import Invalid

router = APIRouter(prefix="/maintenance-windows", tags=["notifications"])


@router.get("", response_model=list[MaintenanceWindowPublic])
async def list_maintenance_windows(principal: OrgPrincipalDep, session: SessionDep
                                   ) -> list[MaintenanceWindowPublic]:
    return await svc.list_windows(session, principal.org_id)


@router.post("", response_model=MaintenanceWindowPublic, status_code=status.HTTP_201_CREATED)
async def create_maintenance_window(body: MaintenanceWindowCreate, principal: AdminDep,
                                    session: SessionDep) -> MaintenanceWindowPublic:
    try:
        out = await svc.create_window(session, principal.org_id, body,
                                      await who(session, principal))
    except Invalid as exc:
        await session.rollback()
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_ENTITY, exc.errors) from exc
    await session.commit()
    return out


@router.patch("/{window_id}", response_model=MaintenanceWindowPublic, responses=NOT_FOUND)
async def update_maintenance_window(window_id: uuid.UUID, body: MaintenanceWindowUpdate,
                                    principal: AdminDep, session: SessionDep
                                    ) -> MaintenanceWindowPublic:
    try:
        out = await svc.update_window(session, principal.org_id, window_id, body)
    except svc.NotFound as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such maintenance window") from exc
    except Invalid as exc:
        await session.rollback()
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_ENTITY, exc.errors) from exc
    await session.commit()
    return out


@router.delete("/{window_id}", status_code=status.HTTP_204_NO_CONTENT, responses=NOT_FOUND)
async def delete_maintenance_window(window_id: uuid.UUID, principal: AdminDep,
                                    session: SessionDep) -> Response:
    try:
        await svc.delete_window(session, principal.org_id, window_id)
    except svc.NotFound as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such maintenance window") from exc
    await session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)
