"""Path traces: agents send them (`POST /ingest/paths`); people read each pair's traces, its
current path, its path changes and the difference of two traces (`/analytics/paths/...`)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, status
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
from stormwatch.models.agent import Agent
from stormwatch.models.paths import PairPath, PathTrace, PathTraceRequest
from stormwatch.schemas.errors import NOT_FOUND
from stormwatch.schemas.paths import (
    CurrentPathResponse,
    HopPublic,
    PathChangePublic,
    PathChangesResponse,
    PathPublic,
    TraceDiffResponse,
    TracePublic,
    TraceRequestAccepted,
    TraceRequestIn,
    TracesAccepted,
    TracesIn,
    TracesResponse,
)
from stormwatch.services.paths import requests, store
from stormwatch.services.paths.identity import differing_hops, first_difference, path_from_wire

router = APIRouter(tags=["paths"])

Src = Annotated[uuid.UUID, Query(description="the tracing agent")]
Dst = Annotated[uuid.UUID, Query(description="the agent traced to")]


@router.post("/ingest/paths", status_code=status.HTTP_202_ACCEPTED,
             response_model=TracesAccepted,
             summary="Store the calling agent's path traces (idempotent by trace id)")
async def ingest_paths(body: TracesIn, agent: AgentDep, session: SessionDep,
                       settings: SettingsDep) -> TracesAccepted:
    latest = datetime.now(UTC) + timedelta(seconds=settings.ingest_max_future_s)
    for i, t in enumerate(body.traces):
        if t.started_at > latest:
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, value_error(
                ["body", "traces", i, "started_at"],
                f"more than {settings.ingest_max_future_s} s in the future"))
    try:
        out = await store.record_traces(session, agent, body.traces)
    except store.UnknownPeer as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, value_error(
            ["body", "traces", exc.index, "dst_agent_id"], str(exc))) from None
    await session.commit()
    return TracesAccepted(stored=out.stored, duplicates=out.duplicates,
                          path_changes=out.path_changes)


def _hops(hops: list[dict]) -> list[HopPublic]:
    return [HopPublic.model_validate(h) for h in hops]


def _trace(t: PathTrace) -> TracePublic:
    return TracePublic(id=t.id, src_agent_id=t.src_agent_id, dst_agent_id=t.dst_agent_id,
                       dst_address=t.dst_address, started_at=t.started_at, proto=t.proto,
                       trigger=t.trigger, reached=t.reached, elapsed_ms=t.elapsed_ms,
                       path_id=t.path_id, hops=_hops(t.hops))


def _path(p: PairPath) -> PathPublic:
    return PathPublic(id=p.id, src_agent_id=p.src_agent_id, dst_agent_id=p.dst_agent_id,
                      first_seen=p.first_seen, last_seen=p.last_seen, traces=p.traces,
                      reached=p.reached, hops=_hops(p.hops))


def _range(start: datetime | None, end: datetime | None) -> tuple[datetime, datetime]:
    end = end or datetime.now(UTC)
    start = start or end - timedelta(days=1)
    if start.tzinfo is None or end.tzinfo is None:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, value_error(
            ["query", "start"], "start and end carry a time zone (e.g. Z)"))
    if start >= end:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, value_error(
            ["query", "start"], "start is before end"))
    return start, end


@router.get("/analytics/paths/traces", response_model=TracesResponse,
            summary="A pair's traces in a time range, newest first")
async def list_traces(principal: OrgPrincipalDep, session: SessionDep, src: Src, dst: Dst,
                      start: datetime | None = None, end: datetime | None = None,
                      limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> TracesResponse:
    start, end = _range(start, end)
    rows = (await session.execute(select(PathTrace).where(
        PathTrace.org_id == principal.org_id, PathTrace.src_agent_id == src,
        PathTrace.dst_agent_id == dst, PathTrace.started_at >= start,
        PathTrace.started_at < end).order_by(PathTrace.started_at.desc()).limit(limit))).scalars()
    return TracesResponse(traces=[_trace(t) for t in rows])


@router.get("/analytics/paths/current", response_model=CurrentPathResponse,
            summary="A pair's current path")
async def current_path(principal: OrgPrincipalDep, session: SessionDep, src: Src,
                       dst: Dst) -> CurrentPathResponse:
    row = (await session.execute(select(PairPath).where(
        PairPath.org_id == principal.org_id, PairPath.src_agent_id == src,
        PairPath.dst_agent_id == dst).order_by(PairPath.first_seen.desc()).limit(1))).scalar()
    return CurrentPathResponse(path=_path(row) if row else None)


@router.get("/analytics/paths/changes", response_model=PathChangesResponse,
            summary="Path changes in a time range (one pair, or every pair of the org)")
async def list_changes(principal: OrgPrincipalDep, session: SessionDep,
                       src: uuid.UUID | None = None, dst: uuid.UUID | None = None,
                       start: datetime | None = None,
                       end: datetime | None = None) -> PathChangesResponse:
    start, end = _range(start, end)
    out = []
    for c in await store.changes(session, principal.org_id, start, end,
                                 [src] if src else None, [dst] if dst else None):
        a, b = path_from_wire(c.before.hops, c.before.reached), path_from_wire(c.path.hops,
                                                                                c.path.reached)
        out.append(PathChangePublic(
            at=c.path.first_seen, src_agent_id=c.path.src_agent_id,
            dst_agent_id=c.path.dst_agent_id, from_path=_path(c.before), to_path=_path(c.path),
            diff_ttl=c.path.diff_ttl or 0, differing_ttls=differing_hops(a, b),
            parting_after=c.parting_after, added_rtt_us=c.path.added_rtt_us))
    return PathChangesResponse(changes=out)


@router.get("/analytics/paths/diff", response_model=TraceDiffResponse, responses=NOT_FOUND,
            summary="Where two traces' paths differ")
async def diff_traces(principal: OrgPrincipalDep, session: SessionDep,
                      a: Annotated[uuid.UUID, Query(description="the earlier trace")],
                      b: Annotated[uuid.UUID, Query(description="the later trace")],
                      ) -> TraceDiffResponse:
    ta = await get_owned(session, PathTrace, a, principal, "trace")
    tb = await get_owned(session, PathTrace, b, principal, "trace")
    pa, pb = path_from_wire(ta.hops, ta.reached), path_from_wire(tb.hops, tb.reached)
    d = first_difference(pa, pb)
    return TraceDiffResponse(a=a, b=b, same_path=d is None, diff_ttl=d.ttl if d else None,
                             differing_ttls=differing_hops(pa, pb),
                             added_rtt_us=d.added_rtt_us if d else None)


@router.post("/analytics/paths/requests", status_code=status.HTTP_202_ACCEPTED,
             response_model=TraceRequestAccepted,
             summary="Ask the src agent to trace the path to dst now (at its next config poll)")
async def request_trace(body: TraceRequestIn, principal: AdminDep,
                        session: SessionDep) -> TraceRequestAccepted:
    for field, agent_id in (("src", body.src), ("dst", body.dst)):
        a = await session.get(Agent, agent_id)
        if a is None or a.org_id != principal.org_id:
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, value_error(
                ["body", field], f"{agent_id} is not an agent of this org"))
    if body.src == body.dst:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, value_error(
            ["body", "dst"], "an agent does not trace the path to itself"))
    assert principal.org_id is not None
    rid, _ = await requests.request_trace(session, principal.org_id, body.src, body.dst,
                                          "request", "asked through the API")
    await session.commit()
    row = (await session.execute(select(PathTraceRequest).where(
        PathTraceRequest.id == rid))).scalar_one()
    return TraceRequestAccepted(id=rid, expires_at=row.expires_at)
