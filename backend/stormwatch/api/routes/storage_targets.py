"""CRUD of storage targets under /storage-targets. Credentials are write-only."""

import uuid

from fastapi import APIRouter, Response, status

from stormwatch.api.deps import AdminDep, AuditActorDep, OrgPrincipalDep, SessionDep
from stormwatch.api.errors import ServiceErrors, value_error
from stormwatch.schemas.errors import CONFLICT, NOT_FOUND
from stormwatch.schemas.storage_target import (
    StorageTargetCreate,
    StorageTargetPublic,
    StorageTargetUpdate,
)
from stormwatch.services import audit
from stormwatch.services import storage_targets as svc

router = APIRouter(prefix="/storage-targets", tags=["storage targets"])


_errors = ServiceErrors({
    svc.StorageTargetNotFound: (status.HTTP_404_NOT_FOUND, "no such storage target"),
    svc.StorageTargetConflict: (status.HTTP_409_CONFLICT, str),
    svc.StorageTargetInvalid: (status.HTTP_422_UNPROCESSABLE_CONTENT,
                               lambda e: value_error(e.loc, e.msg)),
})


@router.get("", response_model=list[StorageTargetPublic])
async def list_storage_targets(principal: OrgPrincipalDep,
                               session: SessionDep) -> list[StorageTargetPublic]:
    return await svc.list_targets(session, principal.org_id)


@router.post("", response_model=StorageTargetPublic, status_code=status.HTTP_201_CREATED,
             responses=CONFLICT)
async def create_storage_target(body: StorageTargetCreate, principal: AdminDep,
                                session: SessionDep, actor: AuditActorDep) -> StorageTargetPublic:
    async with _errors.writing(session):
        made = await svc.create_target(session, principal.org_id, body)
        audit.record(session, principal.org_id, actor, "storage_target.create",
                     "storage_target", made.id, made.name, audit.diff(None, audit.snapshot(made)))
        return made


@router.get("/{target_id}", response_model=StorageTargetPublic, responses=NOT_FOUND)
async def get_storage_target(target_id: uuid.UUID, principal: OrgPrincipalDep,
                             session: SessionDep) -> StorageTargetPublic:
    with _errors.reading():
        return await svc.get_target(session, principal.org_id, target_id)


@router.patch("/{target_id}", response_model=StorageTargetPublic,
              responses={**NOT_FOUND, **CONFLICT})
async def update_storage_target(target_id: uuid.UUID, body: StorageTargetUpdate,
                                principal: AdminDep, session: SessionDep,
                                actor: AuditActorDep) -> StorageTargetPublic:
    async with _errors.writing(session):
        before = audit.snapshot(await svc.get_target(session, principal.org_id, target_id))
        made = await svc.update_target(session, principal.org_id, target_id, body)
        diff = audit.diff(before, audit.snapshot(made))
        if diff:
            audit.record(session, principal.org_id, actor, "storage_target.update",
                         "storage_target", target_id, made.name, diff)
        return made


@router.delete("/{target_id}", status_code=status.HTTP_204_NO_CONTENT, responses=NOT_FOUND)
async def delete_storage_target(target_id: uuid.UUID, principal: AdminDep,
                                session: SessionDep, actor: AuditActorDep) -> Response:
    async with _errors.writing(session):
        before = audit.snapshot(await svc.get_target(session, principal.org_id, target_id))
        await svc.delete_target(session, principal.org_id, target_id)
        audit.record(session, principal.org_id, actor, "storage_target.delete",
                     "storage_target", target_id, str(before["name"]), audit.diff(before, None))
    return Response(status_code=status.HTTP_204_NO_CONTENT)
