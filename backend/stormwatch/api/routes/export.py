"""Exports for other monitoring systems: `/api/v1/export/prometheus`, the org's measured
distributions as Prometheus histograms (services/export/prometheus.py says what they mean),
and `/api/v1/export/otlp`, the same series pushed to the org's OpenTelemetry collector
(services/export/otlp.py)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Query, Request, status
from fastapi.responses import Response
from prometheus_client.exposition import choose_encoder

from stormwatch.api.deps import (
    AdminDep,
    AuditActorDep,
    OrgPrincipalDep,
    SessionDep,
    SettingsDep,
)
from stormwatch.core import egress
from stormwatch.core.db import lock_row_key
from stormwatch.models.export import OtlpExport
from stormwatch.schemas.errors import NOT_FOUND
from stormwatch.schemas.export import OtlpExportIn, OtlpExportPublic, OtlpPushResult
from stormwatch.services import audit
from stormwatch.services.export import otlp, prometheus, protobuf

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


_NO_EXPORT = "no OTLP export is configured for this org (PUT /api/v1/export/otlp)"


@router.get("/otlp", response_model=OtlpExportPublic, responses=NOT_FOUND,
            summary="The org's OTLP push to its OpenTelemetry collector, and how it went")
async def get_otlp(principal: OrgPrincipalDep, session: SessionDep) -> OtlpExportPublic:
    row = await session.get(OtlpExport, principal.org_id)
    if row is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, _NO_EXPORT)
    return OtlpExportPublic(**otlp.public(row))


@router.put("/otlp", response_model=OtlpExportPublic,
            summary="Push the org's measured distributions to an OpenTelemetry collector")
async def put_otlp(body: OtlpExportIn, principal: AdminDep, session: SessionDep,
                   actor: AuditActorDep) -> OtlpExportPublic:
    """Every `interval_s` the worker pushes the series of `kinds` at `level` as OTLP/HTTP
    protobuf (exponential histograms and monotonic sums, cumulative from Monday 00:00 UTC)
    to `endpoint_url`, which must be a public address unless the operator allows it
    (EGRESS_ALLOW)."""
    url = str(body.endpoint_url)
    try:
        await egress.check_url(otlp.metrics_url(url))
    except egress.EgressRefused as exc:
        raise HTTPException(422, [{"loc": ["body", "endpoint_url"], "msg": exc.detail,
                                   "type": "egress_refused"}]) from None
    before, row = await otlp.save(session, principal.org_id, endpoint_url=url,
                                  headers=body.headers, level=body.level, kinds=body.kinds,
                                  interval_s=body.interval_s, enabled=body.enabled)
    await session.flush()
    changes = audit.diff(before, otlp.audited(row), secret_fields=("headers",),
                         ignore=("last_attempt_at", "last_error", "failures_in_a_row"))
    if changes:
        audit.record(session, principal.org_id, actor,
                     "otlp_export.create" if before is None else "otlp_export.update",
                     "otlp_export", principal.org_id, url, changes)
    await session.commit()
    return OtlpExportPublic(**otlp.public(row))


@router.delete("/otlp", status_code=status.HTTP_204_NO_CONTENT, responses=NOT_FOUND,
               summary="Stop pushing to the OpenTelemetry collector")
async def delete_otlp(principal: AdminDep, session: SessionDep,
                      actor: AuditActorDep) -> Response:
    await lock_row_key(session, "otlp_exports", principal.org_id)
    row = await session.get(OtlpExport, principal.org_id)
    if row is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, _NO_EXPORT)
    before = otlp.audited(row)
    await session.delete(row)
    audit.record(session, principal.org_id, actor, "otlp_export.delete", "otlp_export",
                 principal.org_id, row.endpoint_url,
                 audit.diff(before, None, secret_fields=("headers",)))
    await session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/otlp/test", response_model=OtlpPushResult, responses=NOT_FOUND,
             summary="Push now and say what the collector answered")
async def test_otlp(principal: AdminDep, session: SessionDep,
                    settings: SettingsDep) -> OtlpPushResult:
    """One push of the current totals, recorded like the scheduled ones: a failure is an
    answer here (ok false, with the collector's status or the network's error), not an
    HTTP error."""
    if await session.get(OtlpExport, principal.org_id) is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, _NO_EXPORT)
    result = await otlp.push_org(session, principal.org_id,
                                 settings.prometheus_export_max_series)
    return OtlpPushResult(ok=result.ok, detail=result.detail, status=result.status,
                          data_points=result.data_points, transient=result.transient)
