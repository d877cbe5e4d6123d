"""Enrollment and the agent-facing endpoints, plus the fleet listing for people."""

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import APIRouter, HTTPException, Request, Response, status
from fastapi.responses import JSONResponse
from sqlalchemy import select

from stormwatch.api.deps import (
    AdminDep,
    AgentDep,
    OrgPrincipalDep,
    SessionDep,
    SettingsDep,
    get_owned,
)
from stormwatch.api.errors import value_error
from stormwatch.api.throttle import (
    address_key,
    client_address,
    count_failure,
    refuse_if_blocked,
    token_address_policy,
)
from stormwatch.core.config import Settings
from stormwatch.models import Agent, AgentPair
from stormwatch.schemas.agents import (
    AgentPairPublic,
    AgentPublic,
    AgentSelfUpdate,
    EnrollRequest,
    EnrollResponse,
    QuorumGroupPublic,
)
from stormwatch.schemas.errors import NOT_FOUND, ErrorBody
from stormwatch.services import agents as agent_service
from stormwatch.services import mesh_address

router = APIRouter(tags=["agents"])

ONLINE_WITHIN = timedelta(minutes=2)
MESH_ADDRESS_422: dict[int | str, dict[str, Any]] = {422: {"model": ErrorBody, "description": (
    "Invalid input; a mesh_address peers could not reach is refused naming `mesh_address`")}}


def _check_mesh_address(address: str | None, request: Request, settings: Settings) -> None:
    """422 for a mesh address peers could not reach from where this agent asks."""
    why = address and mesh_address.refusal(address, client_address(request, settings),
                                           settings.mesh_address_allow_networks)
    if why:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT,
                            value_error(["body", "mesh_address"], why))


@router.post("/agents/enroll", response_model=EnrollResponse,
             status_code=status.HTTP_201_CREATED,
             responses={**MESH_ADDRESS_422,
                        401: {"description": "Unknown, revoked or expired enrollment token"},
                        429: {"description": "Too many failed credentials from this address; "
                                             "retry after Retry-After"}})
async def enroll(body: EnrollRequest, request: Request, session: SessionDep,
                 settings: SettingsDep) -> EnrollResponse:
    # Shares the per-address count of API keys and agent tokens: all are guessed the same way.
    _check_mesh_address(body.mesh_address, request, settings)
    address = address_key("token", client_address(request, settings))
    await refuse_if_blocked("enrollment", [address])
    async with agent_service.enrollment_slot(body.enrollment_token):
        try:
            agent, token = await agent_service.enroll(
                session, body.enrollment_token, body.name, body.agent_version,
                body.mesh_address, body.metadata.model_dump())
        except agent_service.EnrollmentRefused as exc:
            await count_failure("enrollment", [(address, token_address_policy(settings))])
            raise HTTPException(status.HTTP_401_UNAUTHORIZED, str(exc)) from exc
        await session.commit()
    return EnrollResponse(agent_id=agent.id, agent_token=token, org_id=agent.org_id)


@router.get("/agent/config", summary="The calling agent's configuration (ETag-versioned)",
            responses={304: {"description": "Unchanged since If-None-Match"}})
async def agent_config(request: Request, agent: AgentDep, session: SessionDep) -> Response:
    config = await agent_service.build_config(session, agent)
    etag = f'"{config["version"]}"'
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=status.HTTP_304_NOT_MODIFIED, headers={"ETag": etag})
    return JSONResponse(config, headers={"ETag": etag, "Cache-Control": "no-store"})


@router.patch("/agent/self", status_code=status.HTTP_204_NO_CONTENT,
              responses=MESH_ADDRESS_422)
async def update_self(body: AgentSelfUpdate, request: Request, agent: AgentDep,
                      session: SessionDep, settings: SettingsDep) -> Response:
    _check_mesh_address(body.mesh_address, request, settings)
    try:
        await agent_service.update_self(
            session, agent, body.agent_version, body.mesh_address,
            body.metadata.model_dump(exclude_unset=True) if body.metadata else None,
            body.throughput_address)
    except agent_service.AgentGone as exc:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, str(exc),
                            headers={"WWW-Authenticate": "Bearer"}) from exc
    await session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)


def _public(a: Agent, now: datetime) -> AgentPublic:
    if a.last_seen is None:
        state = "never_seen"
    else:
        state = "online" if now - a.last_seen <= ONLINE_WITHIN else "stale"
    return AgentPublic.model_validate({**{c: getattr(a, c) for c in AgentPublic.model_fields
                                          if c != "status"}, "status": state})


@router.get("/agents", response_model=list[AgentPublic])
async def list_agents(principal: OrgPrincipalDep, session: SessionDep) -> list[AgentPublic]:
    rows = (await session.execute(select(Agent).where(Agent.org_id == principal.org_id)
                                  .order_by(Agent.name))).scalars().all()
    now = datetime.now(UTC)
    return [_public(a, now) for a in rows]


@router.get("/agents/pairs", response_model=list[AgentPairPublic])
async def list_pairs(principal: OrgPrincipalDep, session: SessionDep) -> list[AgentPairPublic]:
    rows = (await session.execute(select(AgentPair).where(
        AgentPair.org_id == principal.org_id))).scalars().all()
    return [AgentPairPublic(src_agent_id=r.src_agent_id, dst_agent_id=r.dst_agent_id,
                            topology_class=r.topology_class) for r in rows]


@router.get("/agents/{agent_id}", response_model=AgentPublic, responses=NOT_FOUND)
async def get_agent(agent_id: uuid.UUID, principal: OrgPrincipalDep,
                    session: SessionDep) -> AgentPublic:
    agent = await get_owned(session, Agent, agent_id, principal, "agent")
    return _public(agent, datetime.now(UTC))


@router.get("/agents/{agent_id}/quorum-groups", response_model=list[QuorumGroupPublic],
            responses=NOT_FOUND,
            summary="The quorum groups the agent measures, with their members")
async def get_quorum_groups(agent_id: uuid.UUID, principal: OrgPrincipalDep,
                            session: SessionDep) -> list[QuorumGroupPublic]:
    agent = await get_owned(session, Agent, agent_id, principal, "agent")
    return [QuorumGroupPublic.model_validate(g)
            for g in await agent_service.quorum_groups(session, agent)]


@router.delete("/agents/{agent_id}", status_code=status.HTTP_204_NO_CONTENT,
               responses=NOT_FOUND)
async def delete_agent(agent_id: uuid.UUID, principal: AdminDep,
                       session: SessionDep) -> Response:
    agent = await get_owned(session, Agent, agent_id, principal, "agent")
    if not await agent_service.delete_agent(session, agent):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such agent")
    await session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)
