"""OTLP/HTTP push of an org's measured distributions to its OpenTelemetry collector.

The same series as the Prometheus export (prometheus.py: kinds, levels, labels, the limit on
label sets), as OTLP metrics built with the OpenTelemetry protobuf definitions
(opentelemetry-proto):

* each latency or throughput series is an exponential histogram of scale NATIVE_SCHEMA, the
  buckets of the Prometheus native histogram (protobuf.py): OTLP's bucket i is
  (base**i, base**(i+1)], Prometheus's native bucket i + 1. The sketch's zeros go to the
  zero bucket, so the bucket counts and the zero count add up to the sample count;
* each failure counter is a monotonic Sum;
* both are cumulative from the export origin (the most recent Monday 00:00 UTC, the start
  time of every point): a failed push loses nothing, since the next one carries the totals,
  and a push made twice says the same thing twice. The weekly move of the origin is a new
  start time, which OTLP readers take as a reset.

Names follow OpenTelemetry's conventions with the unit apart (`stormwatch.mesh.rtt`, unit
`s`), which a collector's Prometheus exporter turns back into `stormwatch_mesh_rtt_seconds`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import orjson
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2 as pb
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from stormwatch.core import egress
from stormwatch.core.db import lock_row_key
from stormwatch.core.security import decrypt_secret, encrypt_secret
from stormwatch.models.export import OtlpExport
from stormwatch.notifications.base import (
    PermanentError,
    TransientError,
    http_post,
    reply_problem,
)
from stormwatch.services.export.prometheus import (
    EXPORT_KINDS,
    ExportError,
    SeriesTotals,
    export_origin,
    export_totals,
)
from stormwatch.services.export.protobuf import NATIVE_SCHEMA, ZERO_THRESHOLD, native_dense

log = logging.getLogger("stormwatch.export")

CONTENT_TYPE = "application/x-protobuf"
PUSH_TIMEOUT_S = 10.0
# OTLP/HTTP: these answers ask the client to try again; any other failure will repeat.
RETRYABLE = (429, 502, 503, 504)
# A push is due this much before its interval has passed, so a 60 s interval checked every
# 10 s is not pushed at 70 s.
DUE_SLACK_S = 1.0


@dataclass(frozen=True)
class OtlpNames:
    histogram: str
    unit: str
    failures: str | None = None
    failures_unit: str = ""


OTLP_NAMES = {
    "mesh": OtlpNames("stormwatch.mesh.rtt", "s", "stormwatch.mesh.lost", "{probe}"),
    "quorum": OtlpNames("stormwatch.quorum.latency", "s", "stormwatch.quorum.failures",
                        "{round}"),
    "storage": OtlpNames("stormwatch.storage.latency", "s", "stormwatch.storage.failures",
                         "{operation}"),
    "throughput": OtlpNames("stormwatch.throughput", "By/s"),
}
assert set(OTLP_NAMES) == set(EXPORT_KINDS)


def _ns(t: datetime) -> int:
    return int(t.timestamp()) * 1_000_000_000 + t.microsecond * 1_000


def _attributes(names: tuple[str, ...], values: tuple[str, ...]) -> list[KeyValue]:
    return [KeyValue(key=n, value=AnyValue(string_value=v))
            for n, v in zip(names, values, strict=True)]


def _histogram_points(t: SeriesTotals, start_ns: int, now_ns: int
                      ) -> list[pb.ExponentialHistogramDataPoint]:
    points = []
    for row, labels in enumerate(t.labels):
        lo, dense = native_dense(t.offset, t.matrix[row], t.kind.ladder.scale)
        counts = [int(round(c)) for c in dense.tolist()]
        zero = int(round(float(t.zero[row])))
        points.append(pb.ExponentialHistogramDataPoint(
            attributes=_attributes(t.label_names, labels), start_time_unix_nano=start_ns,
            time_unix_nano=now_ns, count=sum(counts) + zero, sum=float(t.sums[row]),
            scale=NATIVE_SCHEMA, zero_count=zero, zero_threshold=ZERO_THRESHOLD,
            positive=pb.ExponentialHistogramDataPoint.Buckets(
                offset=lo - 1 if counts else 0, bucket_counts=counts)))
    return points


def build_request(totals: list[SeriesTotals], resource: dict[str, str], origin: datetime,
                  now: datetime, scope_version: str = "") -> ExportMetricsServiceRequest:
    """The OTLP request for these series: cumulative from `origin`, observed at `now`."""
    start_ns, now_ns = _ns(origin), _ns(now)
    cumulative = pb.AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE
    metrics = []
    for t in totals:
        if not t.labels:
            continue
        names = OTLP_NAMES[t.kind.name]
        metrics.append(pb.Metric(
            name=names.histogram, unit=names.unit, description=t.kind.help,
            exponential_histogram=pb.ExponentialHistogram(
                aggregation_temporality=cumulative,
                data_points=_histogram_points(t, start_ns, now_ns))))
        if names.failures is not None:
            metrics.append(pb.Metric(
                name=names.failures, unit=names.failures_unit,
                description=t.kind.failures_help,
                sum=pb.Sum(aggregation_temporality=cumulative, is_monotonic=True, data_points=[
                    pb.NumberDataPoint(attributes=_attributes(t.label_names, labels),
                                       start_time_unix_nano=start_ns, time_unix_nano=now_ns,
                                       as_double=float(v))
                    for labels, v in zip(t.labels, t.failures.tolist(), strict=True)])))
    return ExportMetricsServiceRequest(resource_metrics=[pb.ResourceMetrics(
        resource=Resource(attributes=[KeyValue(key=k, value=AnyValue(string_value=v))
                                      for k, v in resource.items()]),
        scope_metrics=[pb.ScopeMetrics(
            scope=InstrumentationScope(name="stormwatch.export", version=scope_version),
            metrics=metrics)])])


def data_points(request: ExportMetricsServiceRequest) -> int:
    n = 0
    for rm in request.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                n += len(m.exponential_histogram.data_points) + len(m.sum.data_points)
    return n


def metrics_url(url: str) -> str:
    """A collector's base URL gets OTLP/HTTP's metrics path, as OTEL_EXPORTER_OTLP_ENDPOINT
    does; a URL with a path is taken as the metrics URL itself."""
    u = httpx.URL(url)
    return str(u.copy_with(path="/v1/metrics")) if u.path in ("", "/") else url


def reply_error(status: int, body: bytes) -> str | None:
    """What the collector said: on success, a partial success's rejected points; else its
    short error code, if any."""
    if 200 <= status < 300:
        try:
            partial = ExportMetricsServiceResponse.FromString(body).partial_success
        except DecodeError:
            return None
        if partial.rejected_data_points or partial.error_message:
            return (f"{partial.rejected_data_points} data points rejected: "
                    f"{partial.error_message[:300]}")
        return None
    return egress.service_error(body)


@dataclass
class PushResult:
    ok: bool
    detail: str
    status: int | None = None
    data_points: int = 0
    transient: bool = False  # the same push may succeed later


def stored_headers(row: OtlpExport) -> dict[str, str]:
    if not row.headers_ciphertext:
        return {}
    headers = orjson.loads(decrypt_secret(row.headers_ciphertext))
    assert isinstance(headers, dict)
    return {str(k): str(v) for k, v in headers.items()}


async def send(row: OtlpExport, request: ExportMetricsServiceRequest,
               policy: egress.Policy | None = None) -> PushResult:
    """One POST of the request to the export's collector; never raises for the network's
    or the collector's failures (the result says which)."""
    points = data_points(request)
    headers = {**stored_headers(row), "content-type": CONTENT_TYPE,
               "user-agent": "Stormwatch-OTLP/1"}
    try:
        reply = await http_post(metrics_url(row.endpoint_url), request.SerializeToString(),
                                headers, PUSH_TIMEOUT_S, True, policy, reply_error)
    except PermanentError as exc:
        return PushResult(False, str(exc), data_points=points)
    except TransientError as exc:
        return PushResult(False, str(exc), data_points=points, transient=True)
    if 200 <= reply.status < 300:
        return PushResult(reply.error is None, reply.detail, reply.status, points)
    return PushResult(False, reply_problem(reply), reply.status, points,
                      transient=reply.status in RETRYABLE)


async def push_org(session: AsyncSession, org_id: uuid.UUID, max_series: int,
                   now: datetime | None = None, policy: egress.Policy | None = None
                   ) -> PushResult:
    """Builds and sends the org's export and records the outcome on its row (committed)."""
    now = now or datetime.now(UTC)
    row = await session.get(OtlpExport, org_id)
    if row is None:
        raise LookupError("no OTLP export is configured")
    (org_name,) = (await session.execute(text("SELECT name FROM orgs WHERE id = :o"),
                                         {"o": org_id})).one()
    try:
        totals = await export_totals(session, org_id, row.kinds, row.level, max_series, now)
    except ExportError as exc:
        result = PushResult(False, str(exc))
    else:
        request = build_request(totals, {"service.name": "stormwatch",
                                         "stormwatch.org.id": str(org_id),
                                         "stormwatch.org.name": org_name},
                                export_origin(now), now)
        result = await send(row, request, policy)
    row.last_attempt_at = now
    row.last_data_points = result.data_points
    if result.ok:
        row.last_success_at, row.last_error, row.failures_in_a_row = now, None, 0
    else:
        row.last_error, row.failures_in_a_row = result.detail, row.failures_in_a_row + 1
    await session.commit()
    return result


async def claim_due(session: AsyncSession, now: datetime) -> list[uuid.UUID]:
    """The orgs whose push is due, each claimed by moving its last attempt to now (compare-
    and-set): a second pass at the same time claims none of them."""
    rows = (await session.execute(text(
        "UPDATE otlp_exports SET last_attempt_at = CAST(:now AS timestamptz) WHERE enabled "
        "AND (last_attempt_at IS NULL OR last_attempt_at <= CAST(:now AS timestamptz) - "
        "make_interval(secs => interval_s - CAST(:slack AS float8))) RETURNING org_id"),
        {"now": now, "slack": DUE_SLACK_S})).all()
    await session.commit()
    return sorted(r[0] for r in rows)


async def push_due(sessionmaker: async_sessionmaker[AsyncSession], max_series: int,
                   now: datetime | None = None, policy: egress.Policy | None = None
                   ) -> dict[str, Any]:
    """Every due org's push; one org's failure (even an exception) never stops the others."""
    now = now or datetime.now(UTC)
    async with sessionmaker() as session:
        due = await claim_due(session, now)
    out: dict[str, Any] = {"pushed": 0, "failed": 0}
    for org_id in due:
        try:
            async with sessionmaker() as session:
                result = await push_org(session, org_id, max_series, now, policy)
        except LookupError:
            continue  # deleted since it was claimed: nothing to push, nothing to record
        except Exception as exc:  # a bug in one org's export must not stop the others'
            log.exception("OTLP export of org %s failed", org_id)
            result = PushResult(False, f"{type(exc).__name__}: {exc}")
            async with sessionmaker() as session:
                await session.execute(text(
                    "UPDATE otlp_exports SET last_error = :e, failures_in_a_row = "
                    "failures_in_a_row + 1 WHERE org_id = :o"), {"e": result.detail,
                                                                   "o": org_id})
                await session.commit()
        if result.ok:
            out["pushed"] += 1
        else:
            out["failed"] += 1
            log.warning("OTLP export of org %s: %s", org_id, result.detail)
    return out



def public(row: OtlpExport) -> dict[str, Any]:
    """What may be shown of an export: header names, never their values."""
    return {"endpoint_url": row.endpoint_url, "header_names": list(row.header_names),
            "level": row.level, "kinds": list(row.kinds), "interval_s": row.interval_s,
            "enabled": row.enabled, "last_attempt_at": row.last_attempt_at,
            "last_success_at": row.last_success_at, "last_error": row.last_error,
            "failures_in_a_row": row.failures_in_a_row,
            "last_data_points": row.last_data_points, "updated_at": row.updated_at}


def audited(row: OtlpExport) -> dict[str, Any]:
    """The public form plus the headers, for the audit log's diff, which masks them."""
    return {**public(row), "headers": stored_headers(row) or None}


async def save(session: AsyncSession, org_id: uuid.UUID, *, endpoint_url: str,
               headers: dict[str, str] | None, level: str, kinds: Sequence[str],
               interval_s: int, enabled: bool) -> tuple[dict[str, Any] | None, OtlpExport]:
    """Creates or replaces the org's export (not committed); headers None keeps the stored
    ones. Returns the public form before (None when new) and the row. A changed destination
    is pushed at the next pass, as is a new one."""
    await lock_row_key(session, "otlp_exports", org_id)
    row = await session.get(OtlpExport, org_id)
    before = None if row is None else audited(row)
    if row is None:
        row = OtlpExport(org_id=org_id, header_names=[], failures_in_a_row=0)
        session.add(row)
    if row.endpoint_url != endpoint_url:
        row.last_attempt_at = row.last_error = None
        row.failures_in_a_row = 0
    row.endpoint_url, row.level, row.kinds = endpoint_url, level, list(kinds)
    row.interval_s, row.enabled = interval_s, enabled
    if headers is not None:
        row.headers_ciphertext = (encrypt_secret(orjson.dumps(headers).decode())
                                  if headers else None)
        row.header_names = sorted(headers)
    row.updated_at = datetime.now(UTC)
    return before, row
