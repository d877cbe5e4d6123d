"""The org's OTLP/HTTP export to its OpenTelemetry collector over the REST API. Header
values (a collector's API key) go in, never out."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal

from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field, field_validator

ExportKindName = Literal["mesh", "quorum", "storage", "throughput"]
ALL_KINDS: tuple[ExportKindName, ...] = ("mesh", "quorum", "storage", "throughput")
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$")
# Headers the export sets itself, or that would change how the request is framed.
_RESERVED = {"host", "content-type", "content-length", "content-encoding", "transfer-encoding",
             "connection", "user-agent", "te", "upgrade", "accept-encoding"}


class OtlpExportIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    endpoint_url: AnyHttpUrl = Field(
        description="The collector's OTLP/HTTP metrics URL (…/v1/metrics); a URL without a "
                    "path gets /v1/metrics, as OTEL_EXPORTER_OTLP_ENDPOINT does")
    headers: dict[str, str] | None = Field(
        default=None, max_length=20,
        description="Request headers (an API key); left out keeps the stored ones, {} clears")
    level: Literal["region", "pair"] = Field(
        default="region", description="region: per provider/region (pair); pair: per agent")
    kinds: list[ExportKindName] = Field(default_factory=lambda: list(ALL_KINDS), min_length=1)
    interval_s: int = Field(default=60, ge=10, le=3600,
                            description="seconds between pushes")
    enabled: bool = True

    @field_validator("headers")
    @classmethod
    def _headers(cls, v: dict[str, str] | None) -> dict[str, str] | None:
        if v is None:
            return v
        for name, value in v.items():
            if not _TOKEN.match(name):
                raise ValueError(f"not a header name: {name!r}")
            if name.lower() in _RESERVED:
                raise ValueError(f"header {name!r} is set by the export itself")
            if len(value) > 4096 or any(c in value for c in "\r\n\0"):
                raise ValueError(f"header {name!r}: at most 4096 characters, no line breaks")
        return v

    @field_validator("kinds")
    @classmethod
    def _kinds(cls, v: list[ExportKindName]) -> list[ExportKindName]:
        if len(set(v)) != len(v):
            raise ValueError("each kind once")
        return v


class OtlpExportPublic(BaseModel):
    endpoint_url: str
    header_names: list[str]
    level: str
    kinds: list[str]
    interval_s: int
    enabled: bool
    last_attempt_at: datetime | None
    last_success_at: datetime | None
    last_error: str | None
    failures_in_a_row: int
    last_data_points: int | None = Field(description="data points in the last push")
    updated_at: datetime


class OtlpPushResult(BaseModel):
    ok: bool
    detail: str = Field(description="the collector's answer, or why there was none")
    status: int | None = Field(description="the collector's HTTP status, if it answered")
    data_points: int
    transient: bool = Field(description="the same push may succeed later")
