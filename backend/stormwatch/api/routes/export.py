"""Exports for other monitoring systems: `/api/v1/export/prometheus`, the org's measured
distributions as Prometheus histograms (services/export/prometheus.py says what they mean)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import Response
from prometheus_client.exposition import choose_encoder

from stormwatch.api.deps import OrgPrincipalDep, SessionDep, SettingsDep
from stormwatch.services.export import prometheus, protobuf

router = APIRouter(prefix="/export", tags=["export"])

_TEXT = {"schema": {"type": "string"}}


@router.get(
    "/prometheus", response_class=Response,
    summary="Measured latencies as Prometheus histograms (a scrape target)",
    responses={200: {"description": "Prometheus text, OpenMetrics, or the delimited protobuf "
                                    "with native histograms, as the Accept header asks",
                     "content": {"text/plain": _TEXT, "application/openmetrics-text": _TEXT,
                                 "application/vnd.google.protobuf": {
                                     "schema": {"type": "string", "format": "binary"}}}}})
async def get_prometheus(
        request: Request, principal: OrgPrincipalDep, session: SessionDep,
        settings: SettingsDep,
        level: Annotated[Literal["region", "pair"], Query(
            description="region: one series per provider/region (pair); pair: one per agent "
                        "(pair), at most PROMETHEUS_EXPORT_MAX_SERIES label sets")] = "region",
        kind: Annotated[Literal["all", "mesh", "quorum", "storage", "throughput"], Query(
            description="which measurements; all by default")] = "all",
) -> Response:
    kinds = prometheus.KINDS if kind == "all" else (kind,)
    accept = request.headers.get("accept", "")
    try:
        if protobuf.wants_protobuf(accept):
            totals = await prometheus.export_totals(
                session, principal.org_id, kinds, level, settings.prometheus_export_max_series)
            return Response(protobuf.encode(totals), media_type=protobuf.CONTENT_TYPE)
        registry = await prometheus.export_registry(
            session, principal.org_id, kinds, level, settings.prometheus_export_max_series)
    except prometheus.ExportError as exc:
        raise HTTPException(422, [{"loc": ["query", exc.param], "msg": str(exc),
                                   "type": "value_error"}]) from None
    encoder, content_type = choose_encoder(accept)
    return Response(encoder(registry), media_type=content_type)
