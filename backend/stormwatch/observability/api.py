"""The API's metrics: requests by route template and status with latency histograms
(prometheus-fastapi-instrumentator), and what ingest accepted and refused."""

from __future__ import annotations

from fastapi import FastAPI, HTTPException, Request, Response, status
from prometheus_client import CONTENT_TYPE_LATEST, Counter, generate_latest
from prometheus_fastapi_instrumentator import Instrumentator, metrics

from stormwatch.core.config import get_settings
from stormwatch.core.security import constant_time_equals
from stormwatch.observability.registry import exposition_registry

INGEST_SAMPLES = Counter("stormwatch_ingest_samples_total",
                         "Samples stored by ingest, by kind (duplicates of a stored batch not "
                         "counted again)", ["kind"])
INGEST_REJECTED = Counter("stormwatch_ingest_rejected_batches_total",
                          "Batches refused by ingest, by reason (the 422 error type, or "
                          "too_large, media_type, wrong_agent, rate_limited)", ["reason"])
INGEST_DUPLICATES = Counter("stormwatch_ingest_duplicate_batches_total",
                            "Batches already stored, answered 200 and not written again")
AUTH_FAILURES = Counter("stormwatch_auth_failures_total",
                        "Wrong credentials, by surface (login; token: API keys and agent "
                        "tokens; enrollment)", ["surface"])
AUTH_THROTTLED = Counter("stormwatch_auth_throttled_total",
                         "Credential attempts refused with 429 before being checked, after too "
                         "many failures of the account or client address, by surface",
                         ["surface"])

# Upper bounds in seconds: most reads take milliseconds, analyses over weeks seconds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def rejection_reason(exc: HTTPException) -> str:
    """A bounded label for a refused batch: the error type of a 422, else its class."""
    if exc.status_code == status.HTTP_422_UNPROCESSABLE_CONTENT and isinstance(exc.detail, list):
        first = exc.detail[0] if exc.detail else {}
        return str(first.get("type", "invalid")) if isinstance(first, dict) else "invalid"
    return {413: "too_large", 415: "media_type", 403: "wrong_agent",
            429: "rate_limited"}.get(exc.status_code, str(exc.status_code))


def instrument(app: FastAPI) -> None:
    """Request counts and latency by route template, method and exact status, and /metrics.

    /metrics is on the public port, so it takes `Authorization: Bearer <METRICS_TOKEN>`
    and is off (404) while METRICS_TOKEN is unset: no user session is involved."""
    instrumentator = Instrumentator(should_group_status_codes=False,
                                    excluded_handlers=["^/metrics$"])
    instrumentator.add(metrics.requests(should_include_handler=True,
                                        should_include_method=True,
                                        should_include_status=True))
    instrumentator.add(metrics.latency(buckets=LATENCY_BUCKETS))
    instrumentator.instrument(app)

    @app.get("/metrics", include_in_schema=False)
    async def scrape(request: Request) -> Response:
        token = get_settings().metrics_token
        if not token:
            return Response("metrics are off: set METRICS_TOKEN", status_code=404,
                            media_type="text/plain")
        header = request.headers.get("authorization", "")
        scheme, _, sent = header.partition(" ")
        if scheme.lower() != "bearer" or not constant_time_equals(sent.strip(), token):
            return Response("Authorization: Bearer <METRICS_TOKEN> required", status_code=401,
                            media_type="text/plain", headers={"WWW-Authenticate": "Bearer"})
        return Response(generate_latest(exposition_registry()),
                        media_type=CONTENT_TYPE_LATEST)
