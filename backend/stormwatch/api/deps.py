"""Typed FastAPI dependencies: database session, and who is calling (org from credential)."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Literal, Protocol, TypeVar

from fastapi import Depends, HTTPException, Request, params, status
from fastapi.dependencies.utils import get_flat_params
from fastapi.routing import APIRoute
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.api.throttle import (
    address_key,
    client_address,
    count_failure,
    refuse_if_blocked,
    token_address_policy,
)
from stormwatch.core.config import Settings, get_settings
from stormwatch.core.db import get_sessionmaker
from stormwatch.core.security import constant_time_equals, hash_token, token_kind
from stormwatch.models import Agent, ApiKey, DeletedAgent, User
from stormwatch.services import audit
from stormwatch.services.accounts import SessionLimits, find_session

SESSION_COOKIE = "sw_session"
CSRF_COOKIE = "sw_csrf"
CSRF_HEADER = "X-CSRF-Token"
UNSAFE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}
# What a deleted agent's token is answered with (410); agents match on the leading word.
AGENT_DELETED_DETAIL = ("agent_deleted: this agent was deleted from its org; "
                        "enroll it again to rejoin")


async def get_session() -> AsyncIterator[AsyncSession]:
    async with get_sessionmaker()() as session:
        yield session


SessionDep = Annotated[AsyncSession, Depends(get_session)]
SettingsDep = Annotated[Settings, Depends(get_settings)]


@dataclass(frozen=True)
class Principal:
    kind: Literal["user", "api_key", "agent"]
    org_id: uuid.UUID
    # What the caller may do in its org: "admin" manages, "viewer" reads; agents have none.
    role: Literal["admin", "viewer", "none"] = "none"
    user_id: uuid.UUID | None = None
    api_key_id: uuid.UUID | None = None
    agent: Agent | None = None


def _unauthorized(detail: str) -> HTTPException:
    return HTTPException(status.HTTP_401_UNAUTHORIZED, detail,
                         headers={"WWW-Authenticate": "Bearer"})


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise _unauthorized("Authorization header must be 'Bearer <token>'")
    return token.strip()


async def _agent_from_token(session: AsyncSession, token: str) -> Agent:
    agent = (await session.execute(
        select(Agent).where(Agent.token_hash == hash_token(token)))).scalar()
    if agent is None:
        deleted = await session.scalar(select(DeletedAgent.id).where(
            DeletedAgent.token_hash == hash_token(token)).limit(1))
        if deleted is not None:
            # Distinct from 401 so the agent stops for good instead of retrying forever.
            raise HTTPException(status.HTTP_410_GONE, AGENT_DELETED_DETAIL)
        raise _unauthorized("unknown or rotated agent token")
    now = datetime.now(UTC)
    # Throttled so busy agents don't turn every batch into an UPDATE.
    if agent.last_seen is None or now - agent.last_seen > timedelta(seconds=15):
        agent.last_seen = now
        await session.commit()
    return agent


def session_limits(settings: Settings) -> SessionLimits:
    return SessionLimits(idle=timedelta(minutes=settings.session_idle_timeout_min),
                         absolute=timedelta(hours=settings.session_absolute_timeout_h))


async def get_principal(request: Request, session: SessionDep) -> Principal:
    token = _bearer(request)
    if token is not None:
        # Guessing keys and tokens is throttled per client address; the caller's own valid
        # credential is refused too while its address is blocked.
        address = address_key("token", client_address(request, get_settings()))
        await refuse_if_blocked("token", [address])
        try:
            return await _token_principal(session, token)
        except HTTPException as exc:
            if exc.status_code == status.HTTP_401_UNAUTHORIZED:
                await count_failure("token", [(address, token_address_policy(get_settings()))])
            raise
    cookie = request.cookies.get(SESSION_COOKIE)
    if not cookie:
        raise _unauthorized("not logged in")
    row = await find_session(session, cookie, session_limits(get_settings()))
    if row is None:
        raise _unauthorized("session expired, log in again")
    if request.method in UNSAFE_METHODS:
        sent = request.headers.get(CSRF_HEADER, "")
        if not sent or not constant_time_equals(sent, row.csrf_token):
            raise HTTPException(status.HTTP_403_FORBIDDEN,
                                f"missing or wrong {CSRF_HEADER} header")
    role = await session.scalar(select(User.role).where(User.id == row.user_id))
    return Principal(kind="user", org_id=row.org_id, user_id=row.user_id,
                     role="admin" if role == "admin" else "viewer")


async def _token_principal(session: AsyncSession, token: str) -> Principal:
    kind = token_kind(token)
    if kind == "api_key":
        key = (await session.execute(select(ApiKey).where(
            ApiKey.token_hash == hash_token(token)))).scalar()
        if key is None or key.revoked_at is not None:
            raise _unauthorized("unknown or revoked API key")
        now = datetime.now(UTC)
        if key.last_used_at is None or now - key.last_used_at > timedelta(minutes=1):
            await session.execute(update(ApiKey).where(ApiKey.id == key.id)
                                  .values(last_used_at=now))
            await session.commit()
        return Principal(kind="api_key", org_id=key.org_id,
                         role="viewer" if key.scope == "read" else "admin", api_key_id=key.id)
    if kind == "agent":
        agent = await _agent_from_token(session, token)
        return Principal(kind="agent", org_id=agent.org_id, agent=agent)
    raise _unauthorized("not a Stormwatch API key or agent token")


PrincipalDep = Annotated[Principal, Depends(get_principal)]


async def get_org_principal(principal: PrincipalDep) -> Principal:
    """People and REST clients; agent tokens are limited to ingest and config."""
    if principal.kind == "agent":
        raise HTTPException(status.HTTP_403_FORBIDDEN,
                            "agent tokens may only ingest and read their own config")
    return principal


async def get_admin_principal(principal: PrincipalDep) -> Principal:
    """People and REST clients allowed to change the org's configuration."""
    if principal.kind == "agent":
        raise HTTPException(status.HTTP_403_FORBIDDEN,
                            "agent tokens may only ingest and read their own config")
    if principal.role != "admin":
        raise HTTPException(status.HTTP_403_FORBIDDEN, "this action needs the admin role")
    return principal


async def get_admin_user_principal(principal: PrincipalDep) -> Principal:
    """An admin in person: who may grant access (API keys, users) to others."""
    if principal.kind != "user":
        raise HTTPException(status.HTTP_403_FORBIDDEN, "this action needs a logged-in user")
    if principal.role != "admin":
        raise HTTPException(status.HTTP_403_FORBIDDEN, "this action needs the admin role")
    return principal


async def get_user_principal(principal: PrincipalDep) -> Principal:
    if principal.kind != "user":
        raise HTTPException(status.HTTP_403_FORBIDDEN, "this action needs a logged-in user")
    return principal


async def get_agent(principal: PrincipalDep) -> Agent:
    if principal.kind != "agent" or principal.agent is None:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "this endpoint takes an agent token")
    return principal.agent


OrgPrincipalDep = Annotated[Principal, Depends(get_org_principal)]
UserPrincipalDep = Annotated[Principal, Depends(get_user_principal)]
AdminDep = Annotated[Principal, Depends(get_admin_principal)]
AdminUserDep = Annotated[Principal, Depends(get_admin_user_principal)]
AgentDep = Annotated[Agent, Depends(get_agent)]


async def get_audit_actor(request: Request, principal: OrgPrincipalDep,
                          session: SessionDep) -> audit.Actor:
    """Who the audit log names for this request's changes."""
    request_id = (request.headers.get("x-request-id") or "")[:100] or None
    return await audit.actor_for(session, principal.kind, principal.user_id,
                                 principal.api_key_id, request_id)


AuditActorDep = Annotated[audit.Actor, Depends(get_audit_actor)]


class _OrgOwned(Protocol):
    org_id: uuid.UUID


OwnedT = TypeVar("OwnedT", bound=_OrgOwned)


async def get_owned(session: AsyncSession, model: type[OwnedT], row_id: uuid.UUID,
                    principal: Principal, what: str) -> OwnedT:
    """The row of `model` with `row_id` if it belongs to the caller's org, else 404 (another
    org's rows are indistinguishable from missing ones)."""
    row = await session.get(model, row_id)
    if row is None or row.org_id != principal.org_id:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no such {what}")
    return row


_declared_query: dict[int, frozenset[str]] = {}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _query_names(route: APIRoute) -> frozenset[str]:
    names = _declared_query.get(id(route))
    if names is None:
        names = frozenset(f.alias for f in get_flat_params(route.dependant)
                          if isinstance(f.field_info, params.Query))
        _declared_query[id(route)] = names
    return names


async def reject_unknown_query(request: Request) -> None:
    """A query parameter the route does not declare is a 422 naming it: a misspelt or
    unsupported option silently ignored would answer a different question than was asked."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute) or not request.query_params:
        return
    declared = _query_names(route)
    unknown = [k for k in dict.fromkeys(request.query_params.keys()) if k not in declared]
    if unknown:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, [
            {"loc": ["query", k], "msg": "unknown query parameter", "type": "extra_forbidden"}
            for k in unknown])
    # No filter or option holds control characters, and PostgreSQL refuses NUL in text.
    bad = [k for k, v in request.query_params.multi_items() if _CONTROL.search(v)]
    if bad:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, [
            {"loc": ["query", k], "msg": "control characters are not allowed",
             "type": "string_pattern_mismatch"} for k in dict.fromkeys(bad)])
