"""Batch ingest for agents: columnar, gzip, idempotent, all-or-nothing."""

from __future__ import annotations

import zlib
from datetime import UTC, datetime

from fastapi import APIRouter, HTTPException, Request, Response, status
from fastapi.responses import JSONResponse

from stormwatch.api.deps import AGENT_DELETED_DETAIL, AgentDep, SettingsDep
from stormwatch.core.config import Settings
from stormwatch.core.db import get_engine
from stormwatch.core.redis import get_redis
from stormwatch.models import Agent
from stormwatch.observability.api import (
    INGEST_DUPLICATES,
    INGEST_REJECTED,
    INGEST_SAMPLES,
    rejection_reason,
)
from stormwatch.schemas.ingest import IngestAccepted, IngestBatch
from stormwatch.services import ratelimit
from stormwatch.services.ingest.parse import BatchError, decode_json, make_limits, parse_batch
from stormwatch.services.ingest.store import (
    AgentGone,
    check_references,
    ensure_partitions,
    raw_retention_days,
    store_batch,
)

router = APIRouter(tags=["ingest"])

async def _read_body(request: Request, max_bytes: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise HTTPException(status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
                            f"batch body over the {max_bytes}-byte limit")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise HTTPException(status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
                                f"batch body over the {max_bytes}-byte limit")
        chunks.append(chunk)
    return b"".join(chunks)


def _gunzip(data: bytes, max_bytes: int) -> bytes:
    """One complete gzip member and nothing after it: a stream cut short (no CRC and size
    trailer) may be a truncated batch, and bytes after it are not part of the batch."""
    d = zlib.decompressobj(wbits=31)  # gzip only
    try:
        out = d.decompress(data, max_bytes)
    except zlib.error as exc:
        raise _invalid(["body"], f"Content-Encoding is gzip but the body is not: {exc}",
                       "gzip_invalid") from exc
    if d.unconsumed_tail:
        raise HTTPException(status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
                            f"batch decompresses to more than {max_bytes} bytes")
    if not d.eof:
        raise _invalid(["body"], "the gzip stream is incomplete (no CRC and size trailer)",
                       "gzip_invalid")
    if d.unused_data:
        raise _invalid(["body"], f"{len(d.unused_data)} bytes follow the end of the gzip "
                       "stream", "gzip_invalid")
    return out


def _check_media(request: Request) -> bool:
    """Whether the body is gzip; 415 for a type other than JSON or an unknown encoding."""
    media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media != "application/json":
        raise HTTPException(status.HTTP_415_UNSUPPORTED_MEDIA_TYPE,
                            "Content-Type must be application/json")
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("gzip", "identity"):
        raise HTTPException(status.HTTP_415_UNSUPPORTED_MEDIA_TYPE,
                            "Content-Encoding must be gzip or identity",
                            {"Accept-Encoding": "gzip, identity"})
    return encoding == "gzip"


def _invalid(loc: list[str | int], msg: str, kind: str = "value_error") -> HTTPException:
    return HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT,
                         [{"loc": loc, "msg": msg, "type": kind}])


@router.post(
    "/ingest/batches",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=IngestAccepted,
    summary="Store a columnar batch of samples (idempotent by batch_id)",
    # The body is parsed by hand (gzip, vectorised checks); this documents its shape.
    openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
        "schema": {"$ref": f"#/components/schemas/{IngestBatch.__name__}"}}}}},
    responses={200: {"model": IngestAccepted, "description": "Duplicate batch, already stored"},
               410: {"description": "agent_deleted: the agent was deleted (also while this "
                                    "batch was in flight); it stops and stores nothing"},
               413: {"description": "Batch too large"},
               415: {"description": "Content-Type not application/json, or Content-Encoding "
                                    "neither gzip nor identity"},
               429: {"description": "Rate exceeded"},
               503: {"description": "Database unavailable, retry after Retry-After"}},
)
async def ingest_batch(request: Request, agent: AgentDep, settings: SettingsDep) -> Response:
    try:
        return await _ingest(request, agent, settings)
    except HTTPException as exc:
        if exc.status_code < 500:
            INGEST_REJECTED.labels(rejection_reason(exc)).inc()
        raise


async def _ingest(request: Request, agent: Agent, settings: Settings) -> Response:
    gzipped = _check_media(request)
    body = await _read_body(request, settings.ingest_max_body_bytes)
    if gzipped:
        body = _gunzip(body, settings.ingest_max_decompressed_bytes)
    elif len(body) > settings.ingest_max_decompressed_bytes:
        raise HTTPException(status.HTTP_413_REQUEST_ENTITY_TOO_LARGE, "batch too large")
    try:
        decoded = decode_json(body)
    except BatchError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, exc.detail()) from exc

    retry_after = await ratelimit.hit(get_redis(), f"ingest:{agent.id}",
                                      settings.ingest_rate_batches_per_min)
    if retry_after is not None:
        raise HTTPException(status.HTTP_429_TOO_MANY_REQUESTS,
                            "agent exceeded its batch rate", {"Retry-After": str(retry_after)})

    async with get_engine().connect() as sa_conn:
        raw = await sa_conn.get_raw_connection()
        conn = raw.driver_connection
        assert conn is not None
        retention_days = await raw_retention_days(conn, agent.org_id, settings.raw_retention_days)
        limits = make_limits(datetime.now(UTC), retention_days, settings.ingest_max_future_s,
                             settings.ingest_max_rtt_us)
        try:
            batch = parse_batch(decoded, limits)
            if batch.agent_id != agent.id:
                raise HTTPException(status.HTTP_403_FORBIDDEN,
                                    "agent_id is not the agent this token belongs to")
            set_aside = await check_references(conn, agent.org_id, batch)
        except BatchError as exc:
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, exc.detail()) from exc
        await ensure_partitions(conn, batch)
        try:
            duplicate, counts = await store_batch(conn, agent.org_id, batch)
        except AgentGone:
            # Deleted while this batch was in flight: told as its next request would be.
            raise HTTPException(status.HTTP_410_GONE, AGENT_DELETED_DETAIL) from None
    if duplicate:
        INGEST_DUPLICATES.inc()
    else:
        for kind, n in counts.items():
            if n:
                INGEST_SAMPLES.labels(kind).inc(n)
    payload = {"batch_id": str(batch.batch_id), "accepted": counts, "duplicate": duplicate,
               "set_aside": {"deleted_peer": set_aside} if set_aside else {}}
    return JSONResponse(payload, status_code=200 if duplicate else 202)

