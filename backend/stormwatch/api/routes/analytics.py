"""Analysis API: `/api/v1/analytics/...`. Every endpoint takes a time range and filters;
the org always comes from the credential. Percentiles come from raw samples or merged
DDSketches (1% relative accuracy), never from averaged percentiles."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query
from fastapi.responses import PlainTextResponse

from stormwatch.api.deps import OrgPrincipalDep, SessionDep
from stormwatch.schemas.analytics import (
    AsymmetryResponse,
    BoxplotResponse,
    CvRmseResponse,
    CyclesResponse,
    DetoursResponse,
    DistributionResponse,
    HeatmapResponse,
    LevelShiftResponse,
    LossReasonsResponse,
    QuorumCompareResponse,
    SeriesResponse,
    StorageComparisonResponse,
    StorageDailyMediansResponse,
    StorageReplicationResponse,
    StretchResponse,
    SummaryResponse,
    WelchResponse,
)
from stormwatch.schemas.types import IsoDatetime
from stormwatch.services.analytics import analyses
from stormwatch.services.analytics.filters import Filters, QueryError
from stormwatch.services.analytics.stats import SUMMARY_PERCENTILES, parse_percentiles

router = APIRouter(prefix="/analytics", tags=["analytics"])

KindParam = Literal["mesh", "quorum", "storage", "throughput"]
PairKind = Literal["mesh", "throughput"]


def _invalid(param: str, message: str) -> HTTPException:
    return HTTPException(422,
                         [{"loc": ["query", param], "msg": message, "type": "value_error"}])


def _split(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    out = [v.strip() for item in values for v in item.split(",") if v.strip()]
    return out or None


def _uuids(name: str, values: list[str] | None) -> list[uuid.UUID] | None:
    items = _split(values)
    if items is None:
        return None
    try:
        return [uuid.UUID(v) for v in items]
    except ValueError:
        raise _invalid(name, "must be agent ids (UUIDs)") from None


def _ints(name: str, values: list[str] | None) -> list[int] | None:
    items = _split(values)
    if items is None:
        return None
    try:
        return [int(v) for v in items]
    except ValueError:
        raise _invalid(name, "must be integers") from None


ListParam = Annotated[list[str] | None, Query()]


def filters(
    start: Annotated[IsoDatetime | None, Query(description="UTC; default end - 1 h")] = None,
    end: Annotated[IsoDatetime | None, Query(description="UTC; default now")] = None,
    agents: Annotated[list[str] | None, Query(
        description="agent ids; every agent of a series must be one of them")] = None,
    src: Annotated[list[str] | None, Query(
        description="source agent ids (the agent for quorum and storage)")] = None,
    dst: Annotated[list[str] | None, Query(description="destination agent ids")] = None,
    regions: ListParam = None,
    zones: Annotated[list[str] | None, Query(
        description="zones as provider/region/zone keys (the zone heatmap's), since zone "
        "names repeat across regions and providers")] = None,
    providers: ListParam = None,
    topology_class: Annotated[list[str] | None, Query(
        description="self, same_subnet, cross_subnet, cross_az, cross_region, "
        "cross_provider")] = None,
    payload_bytes: ListParam = None,
    resolution: Annotated[Literal["auto", "raw", "1m", "5m", "1h", "1d"], Query(
        description="auto: raw up to 3 h for a few series (15 min fleet-wide); otherwise "
        "the finest rollup level (1m, 5m, 1h, 1d) whose rows for the selected series stay "
        "within 50 000, and with windows the coarsest level dividing window_s")] = "auto",
    target: ListParam = None,
    op: ListParam = None,
    variant: ListParam = None,
    content: ListParam = None,
    size_bytes: ListParam = None,
    copies: ListParam = None,
    concurrency: ListParam = None,
    group_name: ListParam = None,
    proto: ListParam = None,
    direction: ListParam = None,
) -> Filters:
    end_t = end or datetime.now(UTC)
    start_t = start or end_t - timedelta(hours=1)
    if start_t.tzinfo is None:
        start_t = start_t.replace(tzinfo=UTC)
    if end_t.tzinfo is None:
        end_t = end_t.replace(tzinfo=UTC)
    if end_t <= start_t:
        raise _invalid("end", "end must be after start")
    extra: dict[str, list[Any]] = {}
    if (t := _uuids("target", target)) is not None:
        extra["target_id"] = t
    for name, vals in (("op", op), ("variant", variant), ("content", content),
                       ("group_name", group_name), ("proto", proto), ("direction", direction)):
        if (v := _split(vals)) is not None:
            extra[name] = v
    for name, vals in (("size_bytes", size_bytes), ("copies", copies),
                       ("concurrency", concurrency)):
        if (n := _ints(name, vals)) is not None:
            extra[name] = n
    return Filters(start=start_t, end=end_t, agents=_uuids("agents", agents),
                   src=_uuids("src", src), dst=_uuids("dst", dst), regions=_split(regions),
                   zones=_split(zones), providers=_split(providers),
                   topology_class=_split(topology_class),
                   payload_bytes=_ints("payload_bytes", payload_bytes), extra=extra,
                   resolution=resolution)


FiltersDep = Annotated[Filters, Depends(filters)]


def _pcts(text: str) -> list[float]:
    try:
        return parse_percentiles(text)
    except ValueError as exc:
        raise _invalid("percentiles", str(exc)) from None


async def _run(coro: Any) -> Any:
    try:
        return await coro
    except QueryError as exc:
        raise _invalid(exc.param, str(exc)) from None


Adjusted = Annotated[bool, Query(description="storage: latency minus the endpoint RTT")]


@router.get("/{kind}/summary", response_model=SummaryResponse,
            summary="Count, loss rate, mean, std dev, CoV, min, max, p5...p99.999, tail ratios")
async def get_summary(kind: KindParam, principal: OrgPrincipalDep, session: SessionDep,
                      f: FiltersDep, group_by: str = "all", adjusted: Adjusted = False,
                      percentiles: str | None = None) -> Any:
    f.adjusted = adjusted
    ps = _pcts(percentiles) if percentiles else list(SUMMARY_PERCENTILES)
    return await _run(analyses.summary(session, principal.org_id, kind, f, group_by, ps))


@router.get("/{kind}/series", response_model=SeriesResponse,
            summary="Statistics in time windows (default 30 s) with chosen percentiles")
async def get_series(kind: KindParam, principal: OrgPrincipalDep, session: SessionDep,
                     f: FiltersDep, window_s: Annotated[int, Query(gt=0)] = 30,
                     percentiles: str = "50,90,99,99.9", group_by: str = "all",
                     adjusted: Adjusted = False,
                     rank_by: Annotated[str | None, Query(
                         description="with limit: rank groups by this statistic over the "
                         "range (p50, p99, mean, loss_rate...)")] = None,
                     limit: Annotated[int | None, Query(
                         ge=1, le=100, description="only this many groups with data: half "
                         "with the highest rank_by (default p50), the rest the lowest")] = None
                     ) -> Any:
    f.adjusted = adjusted
    return await _run(analyses.series(session, principal.org_id, kind, f, window_s,
                                      _pcts(percentiles), group_by, rank_by, limit))


# No response_class: it would declare its text type for the JSON errors too.
@router.get("/{kind}/series.csv", response_model=None,
            summary="CSV export of a windowed series",
            responses={200: {"content": {"text/csv": {"schema": {"type": "string"}}},
                             "description": "One row per window and group"}})
async def get_series_csv(kind: KindParam, principal: OrgPrincipalDep, session: SessionDep,
                         f: FiltersDep, window_s: Annotated[int, Query(gt=0)] = 30,
                         percentiles: str = "50,90,99,99.9", group_by: str = "all",
                         adjusted: Adjusted = False) -> PlainTextResponse:
    f.adjusted = adjusted
    result = await _run(analyses.series(session, principal.org_id, kind, f, window_s,
                                        _pcts(percentiles), group_by))
    name = await analyses.series_csv_filename(session, principal.org_id, kind, f)
    return PlainTextResponse(analyses.series_csv(result), media_type="text/csv", headers={
        "Content-Disposition": f'attachment; filename="{name}"'})


@router.get("/{kind}/distribution", response_model=DistributionResponse,
            summary="Histogram with a chosen bucket width, CDF and a tail slice of the CDF")
async def get_distribution(kind: KindParam, principal: OrgPrincipalDep, session: SessionDep,
                           f: FiltersDep, bucket_width: Annotated[float, Query(gt=0)] = 100.0,
                           tail_fraction: Annotated[float | None, Query(gt=0, le=1)] = 0.05,
                           adjusted: Adjusted = False) -> Any:
    f.adjusted = adjusted
    return await _run(analyses.distribution(session, principal.org_id, kind, f, bucket_width,
                                            tail_fraction))


@router.get("/{kind}/boxplots", response_model=BoxplotResponse,
            summary="Box plots per group: p25/p50/p75 box, p5/p95 whiskers and the mean")
async def get_boxplots(kind: KindParam, principal: OrgPrincipalDep, session: SessionDep,
                       f: FiltersDep, group_by: str = "topology_class",
                       adjusted: Adjusted = False) -> Any:
    f.adjusted = adjusted
    return await _run(analyses.boxplots(session, principal.org_id, kind, f, group_by))


@router.get("/{kind}/heatmap", response_model=HeatmapResponse,
            summary="A statistic for every (src, dst) at node, zone, region or provider level")
async def get_heatmap(kind: PairKind, principal: OrgPrincipalDep, session: SessionDep,
                      f: FiltersDep, level: str = "node", stat: str = "p50") -> Any:
    return await _run(analyses.heatmap(session, principal.org_id, kind, f, level, stat))


@router.get("/{kind}/level-shifts", response_model=LevelShiftResponse,
            summary="Change points of windowed medians with segment levels and step sizes")
async def get_level_shifts(kind: KindParam, principal: OrgPrincipalDep, session: SessionDep,
                           f: FiltersDep, window_s: Annotated[int, Query(gt=0)] = 30,
                           min_step: Annotated[float | None, Query(
                               description="smallest step to report "
                               "(default 3 noise sigmas)")] = None,
                           group_by: Annotated[str, Query(
                               description="all (one series of everything selected) or a "
                               "grouping such as pair: each group analysed on its own")] = "all",
                           fit_window: Annotated[bool, Query(
                               description="start where the org's data begins and take the "
                               "window from the span left (10 s for a young install's minutes, "
                               "up to 1 h), instead of window_s; the answer's window_s and "
                               "source say which")] = False,
                           ) -> Any:
    return await _run(analyses.level_shift_report(session, principal.org_id, kind, f, window_s,
                                                  min_step, group_by, fit_window))


@router.get("/{kind}/cycles", response_model=CyclesResponse,
            summary="Cyclical patterns: strongest periods of the windowed medians")
async def get_cycles(kind: KindParam, principal: OrgPrincipalDep, session: SessionDep,
                     f: FiltersDep, window_s: Annotated[int, Query(gt=0)] = 60,
                     min_period_s: Annotated[float, Query(gt=0)] = 300.0) -> Any:
    return await _run(analyses.cycles(session, principal.org_id, kind, f, window_s,
                                      min_period_s))


@router.get("/{kind}/asymmetry", response_model=AsymmetryResponse,
            summary="Direction asymmetry: the statistic A->B against B->A")
async def get_asymmetry(kind: PairKind, principal: OrgPrincipalDep, session: SessionDep,
                        f: FiltersDep, level: str = "region", stat: str = "p50") -> Any:
    return await _run(analyses.asymmetry(session, principal.org_id, kind, f, level, stat))


@router.get("/{kind}/welch", response_model=WelchResponse,
            summary="Welch's t-test between two groups of a grouping (e.g. topology classes)")
async def get_welch(kind: KindParam, principal: OrgPrincipalDep, session: SessionDep,
                    f: FiltersDep, a: str, b: str, group_by: str = "topology_class") -> Any:
    return await _run(analyses.welch(session, principal.org_id, kind, f, group_by, a, b))


def _pair(name: str, value: str) -> tuple[uuid.UUID, uuid.UUID]:
    try:
        s, d = value.split(":")
        return uuid.UUID(s), uuid.UUID(d)
    except ValueError:
        raise _invalid(name, "must be '<src agent id>:<dst agent id>'") from None


@router.get("/{kind}/cv-rmse", response_model=CvRmseResponse,
            summary="CV_RMSE between two pairs' windowed means")
async def get_cv_rmse(kind: PairKind, principal: OrgPrincipalDep, session: SessionDep,
                      f: FiltersDep, a: str, b: str,
                      window_s: Annotated[int, Query(gt=0)] = 300) -> Any:
    return await _run(analyses.cv_rmse_pairs(session, principal.org_id, kind, f,
                                             _pair("a", a), _pair("b", b), window_s))


@router.get("/mesh/detours", response_model=DetoursResponse,
            summary="Detours: a path as slow as the route through a middle place, while "
            "another path between the same places is faster or the path is far above its "
            "physical floor")
async def get_detours(principal: OrgPrincipalDep, session: SessionDep, f: FiltersDep,
                      level: str = "region",
                      tolerance: Annotated[float, Query(
                          gt=0, lt=0.1, description="how much faster than the route through "
                          "the middle place the direct path may be")] = 0.05,
                      min_excess: Annotated[float, Query(
                          gt=1, description="how many times slower than the best other path "
                          "between the same places")] = 1.25,
                      max_stretch: Annotated[float, Query(
                          ge=1.5, description="how many times its physical floor a path's "
                          "RTT must be for geography alone to be evidence")] = 2.0) -> Any:
    return await _run(analyses.detours(session, principal.org_id, f, level, tolerance,
                                       min_excess, max_stretch))


@router.get("/mesh/stretch", response_model=StretchResponse,
            summary="Every region path's distance, physical floor and stretch (p50 / floor)")
async def get_stretch(principal: OrgPrincipalDep, session: SessionDep, f: FiltersDep) -> Any:
    return await _run(analyses.stretch(session, principal.org_id, f))


@router.get("/mesh/loss-reasons", response_model=LossReasonsResponse,
            summary="Lost rounds by why they were lost (timeout, refused, error, corrupt)")
async def get_loss_reasons(principal: OrgPrincipalDep, session: SessionDep,
                           f: FiltersDep) -> Any:
    return await _run(analyses.loss_reasons(session, principal.org_id, f))


@router.get("/quorum/compare", response_model=QuorumCompareResponse,
            summary="Quorum latency (Qk/n) beside node-to-node RTT from the same senders")
async def get_quorum_compare(principal: OrgPrincipalDep, session: SessionDep, f: FiltersDep,
                             members: ListParam = None) -> Any:
    return await _run(analyses.quorum_vs_pairs(session, principal.org_id, f,
                                               _uuids("members", members)))


@router.get("/storage/comparison", response_model=StorageComparisonResponse,
            summary="Median PUT/GET by provider (or target) x op x size, raw and RTT-adjusted, "
            "failure rates and latency per bit")
async def get_storage_comparison(principal: OrgPrincipalDep, session: SessionDep, f: FiltersDep,
                                 by: Literal["provider", "target"] = "provider") -> Any:
    return await _run(analyses.storage_comparison(session, principal.org_id, f, by))


@router.get("/storage/daily-medians", response_model=StorageDailyMediansResponse,
            summary="Median latency of each UTC day by provider (or target) x op x size")
async def get_storage_daily(principal: OrgPrincipalDep, session: SessionDep, f: FiltersDep,
                            by: Literal["provider", "target"] = "provider") -> Any:
    return await _run(analyses.storage_daily_medians(session, principal.org_id, f, by))


@router.get("/storage/replication", response_model=StorageReplicationResponse,
            summary="Std dev and p90 of replicated GETs by number of copies")
async def get_storage_replication(principal: OrgPrincipalDep, session: SessionDep,
                                  f: FiltersDep) -> Any:
    return await _run(analyses.storage_replication(session, principal.org_id, f))
