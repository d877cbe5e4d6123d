"""CRUD of storage targets under /storage-targets. Credentials are write-only."""

import uuid
from typing import NoReturn

from fastapi import APIRouter, HTTPException, Response, status

from stormwatch.api.deps import AdminDep, OrgPrincipalDep, SessionDep
from stormwatch.schemas.errors import CONFLICT, NOT_FOUND
from stormwatch.schemas.storage_target import (
    StorageTargetCreate,
    StorageTargetPublic,
    StorageTargetUpdate,
)
from stormwatch.services import storage_targets as svc

router = APIRouter(prefix="/storage-targets", tags=["storage targets"])


def _raise(exc: Exception) -> NoReturn:
    if isinstance(exc, svc.StorageTargetNotFound):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such storage target") from exc
    if isinstance(exc, svc.StorageTargetConflict):
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from exc
    if isinstance(exc, svc.StorageTargetInvalid):
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_ENTITY,
                            [{"loc": exc.loc, "msg": exc.msg, "type": "value_error"}]) from exc
    raise exc


_ERRORS = (svc.StorageTargetNotFound, svc.StorageTargetConflict, svc.StorageTargetInvalid)


@router.get("", response_model=list[StorageTargetPublic])
async def list_storage_targets(principal: OrgPrincipalDep,
                               session: SessionDep) -> list[StorageTargetPublic]:
    return await svc.list_targets(session, principal.org_id)


@router.post("", response_model=StorageTargetPublic, status_code=status.HTTP_201_CREATED,
             responses=CONFLICT)
async def create_storage_target(body: StorageTargetCreate, principal: AdminDep,
                                session: SessionDep) -> StorageTargetPublic:
    try:
        out = await svc.create_target(session, principal.org_id, body)
    except _ERRORS as exc:
        await session.rollback()
        _raise(exc)
    await session.commit()
    return out


@router.get("/{target_id}", response_model=StorageTargetPublic, responses=NOT_FOUND)
async def get_storage_target(target_id: uuid.UUID, principal: OrgPrincipalDep,
                             session: SessionDep) -> StorageTargetPublic:
    try:
        return await svc.get_target(session, principal.org_id, target_id)
    except _ERRORS as exc:
        _raise(exc)


@router.patch("/{target_id}", response_model=StorageTargetPublic,
              responses={**NOT_FOUND, **CONFLICT})
async def update_storage_target(target_id: uuid.UUID, body: StorageTargetUpdate,
                                principal: AdminDep,
                                session: SessionDep) -> StorageTargetPublic:
    try:
        out = await svc.update_target(session, principal.org_id, target_id, body)
    except _ERRORS as exc:
        await session.rollback()
        _raise(exc)
    await session.commit()
    return out


@router.delete("/{target_id}", status_code=status.HTTP_204_NO_CONTENT, responses=NOT_FOUND)
async def delete_storage_target(target_id: uuid.UUID, principal: AdminDep,
                                session: SessionDep) -> Response:
    try:
        await svc.delete_target(session, principal.org_id, target_id)
    except _ERRORS as exc:
        _raise(exc)
    await session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)
