"""Throughput experiments (THROUGHPUT_CONTRACT.md): settings and budget, experiments, and
the analyses over them. Org-scoped; viewers read, admins change."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, NoReturn

from fastapi import APIRouter, HTTPException, Query, status
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.api.deps import AdminDep, AuditActorDep, OrgPrincipalDep, SessionDep, get_owned
from stormwatch.models import ThroughputExperiment
from stormwatch.schemas.errors import NOT_FOUND
from stormwatch.schemas.throughput import (
    AzPairsPublic,
    BudgetPublic,
    DegradationsPublic,
    ExperimentCreate,
    ExperimentDetail,
    ExperimentPublic,
    ExperimentSamples,
    PairsPublic,
    Proto,
    Status,
    ThroughputSettingsBody,
    ThroughputSettingsPublic,
)
from stormwatch.schemas.types import IsoDatetime
from stormwatch.services import audit
from stormwatch.services.throughput import reports, store

router = APIRouter(prefix="/throughput", tags=["throughput"])

From = Annotated[IsoDatetime | None, Query(alias="from", description="UTC; default to - 7 d")]
To = Annotated[IsoDatetime | None, Query(alias="to", description="UTC; default now")]
ProtoQ = Annotated[Proto | None, Query(description="tcp or udp; default both")]
MAX_RANGE = timedelta(days=400)
# Far enough either way for any experiment; keeps date arithmetic away from year 1 and 9999.
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
LATEST = datetime(2200, 1, 1, tzinfo=UTC)


def _invalid(loc: list[str | int], msg: str) -> NoReturn:
    raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT,
                        [{"loc": loc, "msg": msg, "type": "value_error"}])


def _range(start: datetime | None, end: datetime | None, default_end: datetime | None = None,
           default_span: timedelta = timedelta(days=7)) -> tuple[datetime, datetime]:
    for name, t in (("from", start), ("to", end)):
        if t is not None and t.tzinfo is None:
            _invalid(["query", name], "must carry a UTC offset (e.g. Z)")
        if t is not None and not EARLIEST <= t <= LATEST:
            _invalid(["query", name], f"must lie between {EARLIEST:%Y} and {LATEST:%Y}")
    end = end or default_end or datetime.now(UTC)
    start = start or end - default_span
    if start >= end:
        _invalid(["query", "from"], "must be before to")
    if end - start > MAX_RANGE:
        _invalid(["query", "from"], f"the range may span at most {MAX_RANGE.days} days")
    return start, end


def _public(e: ThroughputExperiment, state: str, missed_reason: str | None = None
            ) -> dict[str, Any]:
    return {"missed_reason": missed_reason, "id": e.id, "initiator_agent_id": e.initiator_agent_id,
            "responder_agent_id": e.responder_agent_id, "proto": e.proto,
            "start_at": e.start_at, "end_at": e.start_at + timedelta(seconds=2 * e.duration_s),
            "duration_s": e.duration_s, "streams": e.streams,
            "udp_rate_bits_per_s": e.udp_rate_bits_per_s,
            "udp_datagram_bytes": e.udp_datagram_bytes, "status": state,
            "est_bytes": e.est_bytes, "est_cost_usd": e.est_cost_usd, "origin": e.origin,
            "created_at": e.created_at}


async def _status(session: AsyncSession, e: ThroughputExperiment) -> str:
    has = await store.with_samples(session, e.org_id, [e])
    return store.status_of(e, datetime.now(UTC), e.id in has)


@router.get("/settings", response_model=ThroughputSettingsPublic)
async def get_throughput_settings(principal: OrgPrincipalDep,
                                  session: SessionDep) -> dict[str, Any]:
    return await store.get_settings(session, principal.org_id)


@router.put("/settings", response_model=ThroughputSettingsPublic)
async def put_throughput_settings(body: ThroughputSettingsBody, principal: AdminDep,
                                  session: SessionDep, actor: AuditActorDep) -> dict[str, Any]:
    before = audit.snapshot(await store.get_settings(session, principal.org_id))
    try:
        out = await store.put_settings(session, principal.org_id, body.model_dump(mode="json"))
    except store.ThroughputInputError as exc:
        await session.rollback()
        _invalid(exc.loc, exc.msg)
    diff = audit.diff(before, out)
    if diff:
        audit.record(session, principal.org_id, actor, "throughput_settings.update",
                     "throughput_settings", principal.org_id, "throughput settings", diff)
    await session.commit()
    return out


@router.get("/budget", response_model=BudgetPublic,
            summary="This month's egress: measured, planned, left, and what was refused")
async def get_throughput_budget(principal: OrgPrincipalDep,
                                session: SessionDep) -> dict[str, Any]:
    return await store.budget(session, principal.org_id, datetime.now(UTC))


@router.get("/experiments", response_model=list[ExperimentPublic])
async def list_throughput_experiments(
        principal: OrgPrincipalDep, session: SessionDep,
        start: Annotated[IsoDatetime | None, Query(
            alias="from", description="UTC, on start_at; default to - 7 d")] = None,
        end: Annotated[IsoDatetime | None, Query(
            alias="to", description="UTC, on start_at; default now + 2 d")] = None,
        src_agent_id: Annotated[uuid.UUID | None, Query(description="initiator")] = None,
        dst_agent_id: Annotated[uuid.UUID | None, Query(description="responder")] = None,
        proto: ProtoQ = None,
        state: Annotated[Status | None, Query(alias="status")] = None,
) -> list[dict[str, Any]]:
    now = datetime.now(UTC)
    s, e = _range(start, end, default_end=now + timedelta(days=2),
                  default_span=timedelta(days=9))
    rows = await store.list_experiments(session, principal.org_id, s, e, src_agent_id,
                                        dst_agent_id, proto, state, now)
    reasons = await store.missed_reasons(session, rows)
    return [_public(x, st, reasons.get(x.id)) for x, st in rows]


@router.post("/experiments", response_model=ExperimentPublic,
             status_code=status.HTTP_201_CREATED,
             summary="Schedule one experiment now or at a time (422 when over budget or "
                     "overlapping another on either agent)")
async def create_throughput_experiment(body: ExperimentCreate, principal: AdminDep,
                                       session: SessionDep) -> dict[str, Any]:
    now = datetime.now(UTC)
    try:
        e = await store.create_experiment(session, principal.org_id, body.model_dump(), now)
    except store.ThroughputInputError as exc:
        await session.rollback()
        _invalid(exc.loc, exc.msg)
    await session.commit()
    return _public(e, store.status_of(e, now, False))


@router.get("/experiments/{experiment_id}", response_model=ExperimentDetail,
            responses=NOT_FOUND)
async def get_throughput_experiment(experiment_id: uuid.UUID, principal: OrgPrincipalDep,
                                    session: SessionDep) -> dict[str, Any]:
    e = await get_owned(session, ThroughputExperiment, experiment_id, principal, "experiment")
    res = await store.results(session, e)
    state = await _status(session, e)
    reasons = await store.missed_reasons(session, [(e, state)])
    return {**_public(e, state, reasons.get(e.id)), **res}


@router.get("/experiments/{experiment_id}/samples", response_model=ExperimentSamples,
            responses=NOT_FOUND, summary="The per-second series of both directions")
async def get_throughput_experiment_samples(experiment_id: uuid.UUID,
                                            principal: OrgPrincipalDep,
                                            session: SessionDep) -> dict[str, Any]:
    e = await get_owned(session, ThroughputExperiment, experiment_id, principal, "experiment")
    series = await store.experiment_series(session, e)
    out = []
    for d in series:
        first = d.times[0] - timedelta(seconds=1) if d.times else None
        out.append({"direction": d.direction, "src_agent_id": d.src, "dst_agent_id": d.dst,
                    "samples": [{"time": t, "offset_s": (t - first).total_seconds()
                                 if first else 0.0, "bytes_per_s": float(b),
                                 "loss_ratio": None if lr != lr else float(lr),
                                 "jitter_us": j}
                                for t, b, lr, j in zip(d.times, d.bytes_per_s.tolist(),
                                                       d.loss_ratio.tolist(), d.jitter_us,
                                                       strict=True)]})
    return {"experiment_id": e.id, "directions": out}


@router.get("/pairs", response_model=PairsPublic,
            summary="Per region pair and agent pair: mean, sigma and asymmetry")
async def get_throughput_pairs(principal: OrgPrincipalDep, session: SessionDep,
                               start: From = None, end: To = None,
                               proto: ProtoQ = None) -> dict[str, Any]:
    s, e = _range(start, end)
    return await reports.pairs(session, principal.org_id, s, e, proto)


@router.get("/az-pairs", response_model=AzPairsPublic,
            summary="CV_RMSE between the AZ pairs of each region pair")
async def get_throughput_az_pairs(
        principal: OrgPrincipalDep, session: SessionDep, start: From = None,
        end: To = None,
        src_region: Annotated[str | None, Query(max_length=100)] = None,
        dst_region: Annotated[str | None, Query(max_length=100)] = None,
        proto: ProtoQ = None) -> dict[str, Any]:
    s, e = _range(start, end)
    return await reports.az_pairs(session, principal.org_id, s, e, src_region, dst_region,
                                  proto)


@router.get("/degradations", response_model=DegradationsPublic,
            summary="Long degradations: runs of experiments below a fraction of the norm")
async def get_throughput_degradations(
        principal: OrgPrincipalDep, session: SessionDep, start: From = None,
        end: To = None,
        fraction: Annotated[float, Query(gt=0, lt=1, description=(
            "below this fraction of the flow's norm (median experiment mean)"))] = 0.5,
        min_hours: Annotated[float, Query(gt=0, le=24 * 30)] = 1.0,
        proto: ProtoQ = None) -> dict[str, Any]:
    s, e = _range(start, end)
    return await reports.degradations(session, principal.org_id, s, e, fraction, min_hours,
                                      proto)
