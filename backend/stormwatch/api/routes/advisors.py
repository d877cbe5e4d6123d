"""Decisions from the org's measurements (`/advisors/...`) and the pricing catalog they
read (`/pricing`). Advisors only read, so viewers may run them; prices change only with the
admin role. An advisor short of data answers `insufficient_data` with what is missing."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal, NoReturn

from fastapi import APIRouter, HTTPException, Path, Query, Response, status
from fastapi.encoders import jsonable_encoder
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.api.deps import AdminDep, AuditActorDep, OrgPrincipalDep, SessionDep
from stormwatch.core.db import lock_row_key
from stormwatch.models import PricingOverride
from stormwatch.schemas.advisors import (
    CompressionIn,
    CompressionOut,
    PlacementIn,
    PlacementOut,
    PriceFigure,
    PriceIn,
    PriceItem,
    PricingCatalog,
    RankingOut,
    ReplicationIn,
    ReplicationOut,
    TimeoutIn,
    TimeoutOut,
)
from stormwatch.schemas.errors import NOT_FOUND
from stormwatch.services import audit
from stormwatch.services.advisors import catalog, measured, placement, rankings, results, timeouts
from stormwatch.services.analytics.filters import QueryError

router = APIRouter(tags=["advisors"])

_INPUT_ERRORS = (measured.AdvisorInputError, placement.PlacementError,
                 timeouts.TimeoutInputError, rankings.RankingError)


def _invalid(where: str, field: str, msg: str) -> NoReturn:
    raise HTTPException(status.HTTP_422_UNPROCESSABLE_ENTITY,
                        [{"loc": [where, field], "msg": msg, "type": "value_error"}])


def _range(start: datetime | None, end: datetime | None, default: timedelta, where: str
           ) -> tuple[datetime, datetime]:
    # "Now" to the minute: the same question within a minute is the same cached input.
    e = end or datetime.now(UTC).replace(second=0, microsecond=0)
    s = start or e - default
    s = s if s.tzinfo else s.replace(tzinfo=UTC)
    e = e if e.tzinfo else e.replace(tzinfo=UTC)
    if e <= s:
        _invalid(where, "end", "end must be after start")
    return s, e


async def _answer(coro: Any, where: str = "body") -> Any:
    try:
        return await coro
    except _INPUT_ERRORS as exc:
        _invalid(where, exc.field, str(exc))
    except QueryError as exc:
        _invalid(where, exc.param, str(exc))


# --- pricing -----------------------------------------------------------------------------

CATALOG_NOTE = (f"Shipped figures are public list prices (first tier, on-demand, USD) as "
                f"listed on {catalog.CATALOG_DATE.isoformat()}, each with its source page; "
                "check them against the providers' current pages and your contract, and set "
                "your own: an org's figures override the shipped ones and are kept when the "
                "shipped catalog changes.")


@router.get("/pricing", response_model=PricingCatalog)
async def get_pricing(principal: OrgPrincipalDep, session: SessionDep) -> PricingCatalog:
    figures = await measured.effective_catalog(session, principal.org_id)
    return PricingCatalog(catalog_date=catalog.CATALOG_DATE, note=CATALOG_NOTE,
                          items=catalog.ITEM_DESCRIPTIONS,
                          figures=[PriceFigure(**f) for f in figures])


async def _own_price(session: AsyncSession, org_id: Any, provider: str, region: str,
                     item: str) -> dict[str, Any] | None:
    row = await session.scalar(select(PricingOverride).where(
        PricingOverride.org_id == org_id, PricingOverride.provider == provider,
        PricingOverride.region == region, PricingOverride.item == item)
        .execution_options(populate_existing=True))
    if row is None:
        return None
    return audit.snapshot({"price_usd": row.price_usd, "source": row.source,
                           "effective_date": row.effective_date})


@router.put("/pricing/{provider}/{region}/{item}", response_model=PriceFigure)
async def set_price(provider: str, region: str, item: PriceItem, body: PriceIn,
                    principal: AdminDep, session: SessionDep,
                    actor: AuditActorDep) -> PriceFigure:
    # Before the read: two first PUTs at once would each audit a create.
    await lock_row_key(session, "pricing_overrides", principal.org_id, provider, region, item)
    before = await _own_price(session, principal.org_id, provider, region, item)
    try:
        await measured.set_price(session, principal.org_id, provider, region, item,
                                 body.price_usd, body.source, body.effective_date)
    except measured.AdvisorInputError as exc:
        _invalid("path", exc.field, str(exc))
    after = await _own_price(session, principal.org_id, provider, region, item)
    diff = audit.diff(before, after)
    if diff:
        audit.record(session, principal.org_id, actor,
                     "price.create" if before is None else "price.update", "price",
                     f"{provider}/{region}/{item}", f"{provider} {region} {item}", diff)
    await session.commit()
    figs = await measured.prices(session, principal.org_id, provider, region)
    return PriceFigure(**figs[item])


@router.delete("/pricing/{provider}/{region}/{item}", status_code=status.HTTP_204_NO_CONTENT,
               responses=NOT_FOUND)
async def clear_price(provider: str, region: str, item: PriceItem, principal: AdminDep,
                      session: SessionDep, actor: AuditActorDep) -> Response:
    """Drops the org's own figure: the shipped one applies again."""
    await lock_row_key(session, "pricing_overrides", principal.org_id, provider, region, item)
    before = await _own_price(session, principal.org_id, provider, region, item)
    if not await measured.clear_price(session, principal.org_id, provider, region, item):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "the org has no figure of its own here")
    audit.record(session, principal.org_id, actor, "price.delete", "price",
                 f"{provider}/{region}/{item}", f"{provider} {region} {item}",
                 audit.diff(before, None))
    await session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)


# --- advisors ----------------------------------------------------------------------------


@router.post("/advisors/compression", response_model=CompressionOut)
async def compression_advice(body: CompressionIn, principal: OrgPrincipalDep,
                             session: SessionDep) -> Any:
    """Seed 000 eq. (1), t_c·C_CPU < ΔS·(C_b + C_s), per object size of a target, from its
    gzip9 and plain samples and the org's prices; with plain vs gzip9 latency by size and
    the link bandwidth below which compression lowers latency."""
    s, e = _range(body.start, body.end, timedelta(days=7), "body")
    return await _answer(measured.compression(
        session, principal.org_id, body.target_id, s, e, body.content, body.transfer,
        body.transfers, body.months_stored, body.cpu_provider, body.cpu_region))


@router.post("/advisors/replication", response_model=ReplicationOut)
async def replication_advice(body: ReplicationIn, principal: OrgPrincipalDep,
                             session: SessionDep) -> Any:
    """Seed 000 eq. (2), N_G·C_V·ΔV̄ > F·S̄·(C_s + C_G), per object size of a target, from
    its replicated-variant first-of-k GETs; std dev and p90 by number of copies."""
    s, e = _range(body.start, body.end, timedelta(days=7), "body")
    return await _answer(measured.replication(
        session, principal.org_id, body.target_id, s, e, body.gets_per_month,
        body.value_per_ms_usd))


def _placement_out(row_status: str, h: str, payload: dict[str, Any] | None,
                   error: dict[str, Any] | None, cached: bool, by: str | None) -> PlacementOut:
    p = payload or {}
    return PlacementOut(status=p.get("status", row_status), input_hash=h, cached=cached,
                        computed_by=by, missing=p.get("missing", []),
                        error=(error or {}).get("msg"), result=p.get("result"),
                        data=p.get("data"))


@router.post("/advisors/placement", response_model=PlacementOut,
             responses={202: {"model": PlacementOut, "description": "queued for the worker"}})
async def placement_advice(body: PlacementIn, principal: OrgPrincipalDep, session: SessionDep,
                           response: Response) -> PlacementOut:
    """Seed 001's five policies by Monte Carlo over the measured region RTT matrix (and TCP
    throughput where measured). Answers are cached per input; small runs are simulated in
    the request, large ones by the worker (202, then poll GET .../placement/{input_hash})."""
    s, e = _range(body.start, body.end, timedelta(days=1), "body")
    inputs = jsonable_encoder({**body.model_dump(), "start": s, "end": e})
    if measured.placement_cells(inputs) > placement.MAX_CELLS:
        _invalid("body", "trials", f"trials × blocks is too large (at most "
                 f"{placement.MAX_CELLS // 2}): fewer trials or larger blocks")
    await _answer(measured.check_regions(session, principal.org_id, body.regions))
    h = results.input_hash("placement", inputs)
    row = await results.get(session, principal.org_id, "placement", h)
    if row is not None and row.status == "done":
        return _placement_out("done", h, row.result, None, True, None)
    if row is not None and row.status == "pending":
        response.status_code = status.HTTP_202_ACCEPTED
        return _placement_out("pending", h, None, None, False, "worker")
    if measured.placement_cells(inputs) <= measured.INLINE_CELLS:
        out = await _answer(measured.placement_answer(session, principal.org_id, inputs))
        if await results.claim(session, principal.org_id, "placement", h, inputs):
            await results.finish(session, principal.org_id, "placement", h, "done",
                                 jsonable_encoder(out), None)
        return _placement_out("done", h, jsonable_encoder(out), None, False, "api")
    if await results.claim(session, principal.org_id, "placement", h, inputs):
        from stormwatch.worker.app import celery_app

        await asyncio.to_thread(celery_app.send_task, "stormwatch.compute_placement",
                                args=[str(principal.org_id), h])
    response.status_code = status.HTTP_202_ACCEPTED
    return _placement_out("pending", h, None, None, False, "worker")


@router.get("/advisors/placement/{input_hash}", response_model=PlacementOut,
            responses={202: {"model": PlacementOut, "description": "still being computed"},
                       **NOT_FOUND})
async def placement_result(input_hash: Annotated[str, Path(pattern="^[0-9a-f]{64}$")],
                           principal: OrgPrincipalDep, session: SessionDep,
                           response: Response) -> PlacementOut:
    row = await results.get(session, principal.org_id, "placement", input_hash)
    if row is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such placement answer")
    if row.status == "pending":
        response.status_code = status.HTTP_202_ACCEPTED
    return _placement_out(row.status, input_hash, row.result, row.error, True,
                          "worker" if row.status != "pending" else None)


@router.post("/advisors/timeout", response_model=TimeoutOut)
async def timeout_advice(body: TimeoutIn, principal: OrgPrincipalDep,
                         session: SessionDep) -> Any:
    """Seed 003 §1: the timeout T with P(RTT > T) ≤ tolerated false timeouts / messages, from
    a pair's, a group's, a topology class's or a quorum's measured distribution (losses
    count beyond every T); the samples behind it, a warning when too few, T by hour."""
    s, e = _range(body.start, body.end, timedelta(days=1), "body")
    return await _answer(measured.timeout(
        session, principal.org_id, body.scope, s, e, body.msg_rate_per_s,
        body.false_timeouts_per_hour, body.src, body.dst, body.agents, body.topology_class,
        body.group_name, body.payload_bytes))


@router.get("/advisors/rankings", response_model=RankingOut)
async def rankings_advice(
    principal: OrgPrincipalDep, session: SessionDep,
    kind: Literal["mesh", "storage", "throughput", "quorum"] = "mesh",
    level: Literal["provider", "region", "region_pair", "pair"] = "region_pair",
    stat: Annotated[str, Query(description="mean, std, loss_rate or pNN (p50, p99.9)")] = "p50",
    start: datetime | None = None, end: datetime | None = None,
    op: str | None = None, size_bytes: int | None = None, variant: str | None = None,
    proto: Literal["tcp", "udp"] | None = None,
) -> Any:
    """Providers, regions or pairs ranked by a measured statistic, each with its 95%
    confidence interval (order statistics for percentiles, widened by the sketch's 1% when
    read from rollups; normal for means; Wilson for loss rates)."""
    if kind == "quorum":
        _invalid("query", "kind", "rank quorums with the timeout advisor; rankings take "
                 "mesh, storage or throughput")
    s, e = _range(start, end, timedelta(days=1), "query")
    return await _answer(measured.ranking(session, principal.org_id, kind, level, stat, s, e,
                                          op, size_bytes, variant, proto), "query")

