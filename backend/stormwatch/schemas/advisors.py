"""Inputs and answers of the advisors (`/api/v1/advisors/...`) and the pricing catalog
(`/api/v1/pricing`). Bad input is a 422 naming the field."""

from __future__ import annotations

import math
import uuid
from datetime import date, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from stormwatch.schemas.analytics import SourceInfo
from stormwatch.services.advisors.placement import DEFAULT_CONCURRENCY, MAX_CONCURRENCY

PriceItem = Literal["egress_inter_region_per_gb", "egress_internet_per_gb",
                    "storage_per_gb_month", "put_per_1k", "get_per_1k", "list_per_1k",
                    "cpu_per_hour"]
TopologyClass = Literal["self", "same_subnet", "cross_subnet", "cross_az", "cross_region",
                        "cross_provider"]


class _Range(BaseModel):
    model_config = ConfigDict(extra="forbid")
    start: datetime | None = Field(None, description="UTC; default end − 7 days")
    end: datetime | None = Field(None, description="UTC; default now (to the minute)")


# --- pricing -----------------------------------------------------------------------------


class PriceIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    price_usd: float = Field(ge=0, allow_inf_nan=False, description="USD in the item's unit")
    source: str = Field(min_length=1, max_length=500,
                        description="where the figure comes from (a contract, a page, a date)")
    effective_date: date | None = Field(None, description="default today")


class PriceFigure(BaseModel):
    provider: str
    region: str
    item: PriceItem
    price_usd: float
    effective_date: date
    source: str
    origin: Literal["shipped", "org"] = Field(description="org: the org's own figure")
    shipped_price_usd: float | None = Field(description="the shipped figure it overrides")


class PricingCatalog(BaseModel):
    catalog_date: date = Field(description="when the shipped figures were listed")
    note: str
    items: dict[str, str] = Field(description="item → unit and meaning")
    figures: list[PriceFigure]


# --- compression (seed 000 eq. 1) ----------------------------------------------------------


class CompressionIn(_Range):
    target_id: uuid.UUID
    content: Literal["text", "binary"] = "text"
    transfer: Literal["internet", "inter_region"] = Field(
        "internet", description="the billed link each transfer crosses (C_b)")
    transfers: float = Field(1.0, gt=0, allow_inf_nan=False,
                             description="billed transfers per object (C_b multiplier)")
    months_stored: float = Field(1.0, ge=0, allow_inf_nan=False,
                                 description="months each object is kept (C_s multiplier)")
    cpu_provider: str | None = Field(None, description="where compression runs; default the "
                                     "target's provider and region")
    cpu_region: str | None = None


class CompressionTermsOut(BaseModel):
    t_c_s: float
    c_cpu_per_s: float
    delta_s_gb: float
    c_b_per_gb: float
    c_s_per_gb: float
    lhs_usd: float = Field(description="t_c · C_CPU")
    rhs_usd: float = Field(description="ΔS · (C_b + C_s)")
    pays: bool


class CompressionSize(BaseModel):
    size_bytes: int
    stored_bytes: float | None = Field(description="mean gzip9 size")
    plain_put_ms: float | None
    plain_get_ms: float | None
    gzip_put_ms: float | None
    gzip_get_ms: float | None
    samples: int
    t_c_s: float | None = Field(description="compression + decompression time per object")
    t_c_clamped: bool = Field(False, description="the measured t_c came out negative (gzip9 "
                              "faster than plain beyond the saved transfer) and is taken as 0")
    delta_bytes: float | None
    break_even_bps: float | None = Field(
        description="link bandwidth (bit/s) below which compression lowers latency")
    link_bps_measured: dict[str, float | None] | None = None
    terms: CompressionTermsOut | None


class TargetRef(BaseModel):
    id: str
    name: str
    provider: str
    region: str


class CompressionOut(BaseModel):
    status: Literal["ok", "insufficient_data"]
    missing: list[str] = []
    target: TargetRef
    content: str
    transfer: str
    transfers: float
    months_stored: float
    source: SourceInfo
    prices: dict[str, Any]
    sizes: list[CompressionSize]
    bandwidth_basis: dict[str, bool]


# --- replication (seed 000 eq. 2) ----------------------------------------------------------


class ReplicationIn(_Range):
    target_id: uuid.UUID
    gets_per_month: float = Field(ge=0, allow_inf_nan=False, description="N_G")
    value_per_ms_usd: float = Field(ge=0, allow_inf_nan=False, description=(
        "C_V: what one ms less standard deviation is worth to you, per GET (USD)"))


class ReplicationTermsOut(BaseModel):
    n_g: float
    c_v_per_ms: float
    delta_v_ms: float
    f: int
    s_gb: float
    c_s_per_gb: float
    c_g_per_gb: float
    lhs_usd: float = Field(description="N_G · C_V · ΔV̄")
    rhs_usd: float = Field(description="F · S̄ · (C_s + C_G)")
    pays: bool


class CopiesStats(BaseModel):
    copies: int
    count: int
    std_ms: float | None
    p90_ms: float | None
    mean_ms: float | None
    failures: int


class ReplicationSize(BaseModel):
    size_bytes: int
    copies: int
    by_copies: list[CopiesStats]
    delta_v_ms: float | None = None
    terms: ReplicationTermsOut | None
    note: str | None = None


class ReplicationOut(BaseModel):
    status: Literal["ok", "insufficient_data"]
    missing: list[str] = []
    target: TargetRef
    gets_per_month: float
    value_per_ms: float
    prices: dict[str, float | None]
    source: SourceInfo
    sizes: list[ReplicationSize]


# --- placement (seed 001) ------------------------------------------------------------------


class PlacementIn(_Range):
    regions: list[str] = Field(min_length=2, max_length=12)
    uploader: str
    downloader: str
    file_bytes: int = Field(gt=0, le=1 << 40)
    block_bytes: int = Field(gt=0)
    trials: int = Field(10_000, ge=1, le=100_000)
    seed: int = Field(1, ge=0)
    concurrency: int = Field(
        DEFAULT_CONCURRENCY, ge=1, le=MAX_CONCURRENCY,
        description="blocks in flight at once, upload and download (1: one after another)")

    @field_validator("regions")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("regions must be distinct")
        return v

    @field_validator("uploader", "downloader")
    @classmethod
    def _among(cls, v: str, info: ValidationInfo) -> str:
        regions = info.data.get("regions")
        if regions is not None and v not in regions:
            raise ValueError(f"{v!r} is not among the chosen regions")
        return v

    @field_validator("block_bytes")
    @classmethod
    def _fits(cls, v: int, info: ValidationInfo) -> int:
        f = info.data.get("file_bytes")
        if f is not None and v > f:
            raise ValueError("block_bytes is larger than file_bytes")
        return v


class PolicyResult(BaseModel):
    policy: Literal["random", "two_random", "local", "local_closest", "local_farthest"]
    upload_ms: float
    upload_std_ms: float
    download_ms: float
    download_std_ms: float
    download_p90_ms: float
    blocks_read_in_downloader_region: float
    download_rank: int


class PlacementResult(BaseModel):
    regions: list[str]
    uploader: str
    downloader: str
    block_bytes: int
    file_bytes: int
    blocks: int
    concurrency: int = Field(1, description="blocks in flight at once (1: one after another; "
                             "answers cached before it was a setting read one at a time)")
    trials: int
    policies: list[PolicyResult]
    throughput_measured: bool


class PlacementData(BaseModel):
    rtt_mean_ms: list[list[float | None]]
    samples: list[list[int]]
    throughput_bps: list[list[float | None]]
    notes: list[str]
    source: SourceInfo


class PlacementOut(BaseModel):
    status: Literal["ok", "insufficient_data", "pending", "failed"]
    input_hash: str
    cached: bool = False
    computed_by: Literal["api", "worker"] | None = None
    missing: list[str] = []
    error: str | None = None
    result: PlacementResult | None = None
    data: PlacementData | None = None


# --- timeouts (seed 003 §1) ----------------------------------------------------------------


class TimeoutIn(_Range):
    scope: Literal["pair", "group", "topology_class", "quorum"]
    msg_rate_per_s: float = Field(gt=0, allow_inf_nan=False)
    false_timeouts_per_hour: float = Field(gt=0, allow_inf_nan=False)
    src: uuid.UUID | None = Field(None, description="pair: source; quorum: the sender")
    dst: uuid.UUID | None = None
    agents: list[uuid.UUID] | None = Field(None, description="group: its agents")
    topology_class: TopologyClass | None = None
    group_name: str | None = Field(None, description="quorum: the group's name")
    payload_bytes: int | None = Field(None, gt=0)

    @field_validator("false_timeouts_per_hour")
    @classmethod
    def _below_rate(cls, v: float, info: ValidationInfo) -> float:
        rate = info.data.get("msg_rate_per_s")
        if rate is not None and math.isfinite(rate) and v / 3600.0 > rate:
            raise ValueError("the tolerated false-timeout rate exceeds the message rate")
        return v


class HourTimeout(BaseModel):
    hour: int
    samples: int
    timeout_us: float | None
    timeout_ms: float | None
    warning: str | None


class TimeoutOut(BaseModel):
    status: Literal["ok", "insufficient_data"]
    missing: list[str] = []
    scope: str
    what: str
    source: SourceInfo
    target_probability: float
    msg_rate_per_s: float | None = None
    false_timeouts_per_hour: float | None = None
    hourly_source: SourceInfo | None = None
    samples: int | None = None
    losses: int | None = None
    tail_samples_expected: float | None = None
    samples_needed: int | None = Field(default=None, description=(
        "samples for 10 beyond T at the measured loss rate; null when that loss rate alone "
        "exceeds the target probability"))
    time_needed_s: float | None = Field(default=None, description=(
        "how long the scope takes to collect samples_needed at its measured sample rate"))
    best_probability: float | None = Field(default=None, description=(
        "when the asked rate is not met or not supported: the smallest probability with 10 "
        "values beyond T besides the losses"))
    best_timeout_us: float | None = None
    best_timeout_ms: float | None = None
    best_false_timeouts_per_hour: float | None = Field(default=None, description=(
        "best_probability at the asked message rate"))
    best_msg_rate_per_s: float | None = Field(default=None, description=(
        "the message rate best_probability allows at the asked false timeouts per hour"))
    exact: bool | None = None
    quantile: float | None = None
    achievable: bool | None = None
    timeout_us: float | None = None
    timeout_ms: float | None = None
    warning: str | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    max_ms: float | None = None
    by_hour: list[HourTimeout] = []


# --- rankings ------------------------------------------------------------------------------


class RankRow(BaseModel):
    key: str
    rank: int | None
    value: float | None
    ci_low: float | None
    ci_high: float | None
    ci_method: str | None = Field(description="normal, order_statistic, order_statistic_sketch, "
                                  "chi_square or wilson (95%)")
    count: int
    samples: int
    overlaps_previous: bool = Field(description="its interval overlaps the one ranked above")


class RankingOut(BaseModel):
    status: Literal["ok", "insufficient_data"]
    missing: list[str] = []
    kind: str
    level: str
    stat: str
    unit: str | None = None
    order: str | None = None
    source: SourceInfo
    rows: list[RankRow]
