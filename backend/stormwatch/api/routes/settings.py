"""Org settings, API keys, enrollment tokens and users: what an admin manages."""

import uuid
from datetime import UTC, datetime

from fastapi import APIRouter, HTTPException, Response, status
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from stormwatch.api.deps import (
    AdminDep,
    AdminUserDep,
    AuditActorDep,
    OrgPrincipalDep,
    SessionDep,
    get_owned,
)
from stormwatch.api.throttle import login_account_key
from stormwatch.core.redis import get_redis
from stormwatch.models import ApiKey, EnrollmentToken, Org, User
from stormwatch.schemas.accounts import (
    ApiKeyCreate,
    ApiKeyCreated,
    ApiKeyPublic,
    EnrollmentTokenCreate,
    EnrollmentTokenCreated,
    EnrollmentTokenPublic,
    OrgPublic,
    OrgUpdate,
    UserCreate,
    UserPublic,
)
from stormwatch.schemas.errors import CONFLICT, NOT_FOUND
from stormwatch.services import accounts, audit, ratelimit

router = APIRouter(tags=["settings"])


@router.get("/org", response_model=OrgPublic)
async def get_org(principal: OrgPrincipalDep, session: SessionDep) -> Org:
    org = await session.get(Org, principal.org_id)
    assert org is not None
    return org


@router.patch("/org", response_model=OrgPublic)
async def update_org(body: OrgUpdate, principal: AdminDep, session: SessionDep,
                     actor: AuditActorDep) -> Org:
    org = await session.get(Org, principal.org_id)
    assert org is not None
    before = OrgPublic.model_validate(org).model_dump()
    if body.name is not None:
        org.name = body.name
    if body.raw_retention_days is not None:
        org.raw_retention_days = body.raw_retention_days
    if body.rollup_retention_days is not None:
        org.rollup_retention_days = body.rollup_retention_days
    if body.mesh_settings is not None:
        org.mesh_settings = body.mesh_settings.model_dump()
    changes = audit.diff(before, OrgPublic.model_validate(org).model_dump())
    if changes:
        audit.record(session, principal.org_id, actor, "org.update", "org", org.id, org.name,
                     changes)
    await session.commit()
    return org


@router.get("/api-keys", response_model=list[ApiKeyPublic])
async def list_api_keys(principal: OrgPrincipalDep, session: SessionDep) -> list[ApiKey]:
    return list((await session.execute(select(ApiKey).where(
        ApiKey.org_id == principal.org_id).order_by(ApiKey.created_at))).scalars())


@router.post("/api-keys", response_model=ApiKeyCreated, status_code=status.HTTP_201_CREATED)
async def create_api_key(body: ApiKeyCreate, principal: AdminUserDep,
                         session: SessionDep, actor: AuditActorDep) -> ApiKeyCreated:
    key, token = await accounts.create_api_key(session, principal.org_id, body.name,
                                               principal.user_id, body.scope)
    audit.record(session, principal.org_id, actor, "api_key.create", "api_key", key.id,
                 key.name, audit.diff(None, {"name": key.name, "prefix": key.prefix,
                                             "scope": key.scope, "key": token}))
    await session.commit()
    return ApiKeyCreated.model_validate({**ApiKeyPublic.model_validate(key).model_dump(),
                                         "key": token})


@router.delete("/api-keys/{key_id}", status_code=status.HTTP_204_NO_CONTENT,
               responses=NOT_FOUND)
async def revoke_api_key(key_id: uuid.UUID, principal: AdminUserDep,
                         session: SessionDep, actor: AuditActorDep) -> Response:
    key = await get_owned(session, ApiKey, key_id, principal, "API key")
    if key.revoked_at is None:
        key.revoked_at = datetime.now(UTC)
        audit.record(session, principal.org_id, actor, "api_key.revoke", "api_key", key.id,
                     key.name, audit.diff({"revoked_at": None}, {"revoked_at": key.revoked_at}))
    await session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/enrollment-tokens", response_model=list[EnrollmentTokenPublic])
async def list_enrollment_tokens(principal: OrgPrincipalDep,
                                 session: SessionDep) -> list[EnrollmentToken]:
    return list((await session.execute(select(EnrollmentToken).where(
        EnrollmentToken.org_id == principal.org_id).order_by(EnrollmentToken.created_at)))
        .scalars())


@router.post("/enrollment-tokens", response_model=EnrollmentTokenCreated,
             status_code=status.HTTP_201_CREATED)
async def create_enrollment_token(body: EnrollmentTokenCreate, principal: AdminDep,
                                  session: SessionDep,
                                  actor: AuditActorDep) -> EnrollmentTokenCreated:
    row, token = await accounts.create_enrollment_token(session, principal.org_id, body.name,
                                                        body.expires_at)
    audit.record(session, principal.org_id, actor, "enrollment_token.create",
                 "enrollment_token", row.id, row.name,
                 audit.diff(None, {"name": row.name, "expires_at": row.expires_at,
                                   "token": token}))
    await session.commit()
    return EnrollmentTokenCreated.model_validate(
        {**EnrollmentTokenPublic.model_validate(row).model_dump(), "token": token})


@router.delete("/enrollment-tokens/{token_id}", status_code=status.HTTP_204_NO_CONTENT,
               responses=NOT_FOUND)
async def revoke_enrollment_token(token_id: uuid.UUID, principal: AdminDep,
                                  session: SessionDep, actor: AuditActorDep) -> Response:
    row = await get_owned(session, EnrollmentToken, token_id, principal, "enrollment token")
    if row.revoked_at is None:
        row.revoked_at = datetime.now(UTC)
        audit.record(session, principal.org_id, actor, "enrollment_token.revoke",
                     "enrollment_token", row.id, row.name,
                     audit.diff({"revoked_at": None}, {"revoked_at": row.revoked_at}))
    await session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/users", response_model=list[UserPublic])
async def list_users(principal: OrgPrincipalDep, session: SessionDep) -> list[User]:
    return list((await session.execute(select(User).where(
        User.org_id == principal.org_id).order_by(User.email))).scalars())


@router.post("/users", response_model=UserPublic, status_code=status.HTTP_201_CREATED,
             responses=CONFLICT)
async def create_user(body: UserCreate, principal: AdminUserDep,
                      session: SessionDep, actor: AuditActorDep) -> User:
    try:
        user = await accounts.create_user(session, principal.org_id, body.email, body.password,
                                          body.role)
        audit.record(session, principal.org_id, actor, "user.create", "user", user.id,
                     user.email, audit.diff(None, {"email": user.email, "role": user.role}))
        await session.commit()
    except IntegrityError as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, "a user with this email exists") from exc
    return user


@router.delete("/users/{user_id}", status_code=status.HTTP_204_NO_CONTENT,
               responses={**NOT_FOUND, **CONFLICT})
async def delete_user(user_id: uuid.UUID, principal: AdminUserDep,
                      session: SessionDep, actor: AuditActorDep) -> Response:
    user = await get_owned(session, User, user_id, principal, "user")
    if user.id == principal.user_id:
        raise HTTPException(status.HTTP_409_CONFLICT, "you cannot delete yourself")
    audit.record(session, principal.org_id, actor, "user.delete", "user", user.id, user.email,
                 audit.diff({"email": user.email, "role": user.role}, None))
    await session.delete(user)
    await session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.delete("/users/{user_id}/login-lock", status_code=status.HTTP_204_NO_CONTENT,
               responses=NOT_FOUND)
async def lift_login_lock(user_id: uuid.UUID, principal: AdminDep,
                          session: SessionDep, actor: AuditActorDep) -> Response:
    """Forgets the user's failed logins: a lock or backoff ends now (idempotent)."""
    user = await get_owned(session, User, user_id, principal, "user")
    audit.record(session, principal.org_id, actor, "user.login_lock_lift", "user", user.id,
                 user.email)
    await session.commit()
    await ratelimit.forget(get_redis(), login_account_key(user.email))
    return Response(status_code=status.HTTP_204_NO_CONTENT)
