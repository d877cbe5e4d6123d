"""Batch ingest for agents: columnar, gzip, idempotent, all-or-nothing."""

from __future__ import annotations

import time
import zlib
from datetime import UTC, datetime

from fastapi import APIRouter, HTTPException, Request, Response, status
from fastapi.responses import JSONResponse

from stormwatch.api.deps import AgentDep, SettingsDep
from stormwatch.core.db import get_engine
from stormwatch.core.redis import get_redis
from stormwatch.schemas.ingest import IngestAccepted, IngestBatch
from stormwatch.services import ratelimit
from stormwatch.services.ingest import BatchError, decode_json, make_limits, parse_batch
from stormwatch.services.ingest_store import check_references, ensure_partitions, store_batch

router = APIRouter(tags=["ingest"])

_retention_cache: dict[object, tuple[float, int]] = {}


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
    d = zlib.decompressobj(wbits=47)  # gzip or zlib header
    try:
        out = d.decompress(data, max_bytes)
    except zlib.error as exc:
        raise _invalid(["body"], f"Content-Encoding is gzip but the body is not: {exc}") from exc
    if d.unconsumed_tail:
        raise HTTPException(status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
                            f"batch decompresses to more than {max_bytes} bytes")
    return out


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
               413: {"description": "Batch too large"}, 429: {"description": "Rate exceeded"},
               503: {"description": "Database unavailable, retry after Retry-After"}},
)
async def ingest_batch(request: Request, agent: AgentDep, settings: SettingsDep) -> Response:
    body = await _read_body(request, settings.ingest_max_body_bytes)
    if request.headers.get("content-encoding", "").lower() in ("gzip", "x-gzip"):
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
        retention_days = await _raw_retention_days(conn, agent.org_id, settings.raw_retention_days)
        limits = make_limits(datetime.now(UTC), retention_days, settings.ingest_max_future_s,
                             settings.ingest_max_rtt_us)
        try:
            batch = parse_batch(decoded, limits)
            if batch.agent_id != agent.id:
                raise HTTPException(status.HTTP_403_FORBIDDEN,
                                    "agent_id is not the agent this token belongs to")
            await check_references(conn, agent.org_id, batch)
        except BatchError as exc:
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, exc.detail()) from exc
        await ensure_partitions(conn, batch)
        duplicate, counts = await store_batch(conn, agent.org_id, batch)
    payload = {"batch_id": str(batch.batch_id), "accepted": counts, "duplicate": duplicate}
    return JSONResponse(payload, status_code=200 if duplicate else 202)


async def _raw_retention_days(conn: object, org_id: object, default: int) -> int:
    cached = _retention_cache.get(org_id)
    now = time.monotonic()
    if cached and now - cached[0] < 60:
        return cached[1]
    value = await conn.fetchval(  # type: ignore[attr-defined]
        "SELECT raw_retention_days FROM orgs WHERE id = $1", org_id)
    days = int(value or default)
    _retention_cache[org_id] = (now, days)
    return days
