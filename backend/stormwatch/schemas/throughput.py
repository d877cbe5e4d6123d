"""Throughput experiments (THROUGHPUT_CONTRACT.md): settings, budget, experiments and the
analyses. Rates are bytes per second (`_bytes_per_s`) except the UDP offered rate."""

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from stormwatch.schemas.types import IsoDatetime

Proto = Literal["tcp", "udp"]
Status = Literal["scheduled", "running", "done", "missed"]


class PairRef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    src_agent_id: uuid.UUID = Field(description="the initiator (sends first)")
    dst_agent_id: uuid.UUID = Field(description="the responder (sends second)")

    @model_validator(mode="after")
    def _distinct(self) -> "PairRef":
        if self.src_agent_id == self.dst_agent_id:
            raise ValueError("src_agent_id and dst_agent_id must differ")
        return self


class ThroughputSettingsBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(description="the scheduler plans experiments only when enabled")
    monthly_budget_bytes: int = Field(ge=0, le=10**16, description=(
        "egress the org's experiments may move per UTC month, measured plus planned"))
    monthly_budget_usd: float | None = Field(default=None, ge=0, description=(
        "optional cap on the estimated egress cost per month; null: bytes only"))
    price_per_gb_usd: float | None = Field(default=None, ge=0, description=(
        "egress price per GB (10^9 bytes) for every pair; null: the pricing catalog's "
        "inter-region figure for the sending agent's provider and region"))
    default_duration_s: int = Field(default=300, ge=5, le=3600,
                                    description="length of each direction")
    default_proto: Literal["tcp", "udp", "both"] = "tcp"
    streams: int = Field(default=4, ge=1, le=16, description="parallel TCP streams")
    udp_rate_bits_per_s: int = Field(default=500_000_000, ge=1_000, le=100_000_000_000)
    udp_datagram_bytes: int = Field(default=1400, ge=64, le=8972)
    experiments_per_pair_per_day: int = Field(default=4, ge=1, le=96)
    pairs: list[PairRef] | None = Field(default=None, max_length=1000, description=(
        "ordered pairs (initiator, responder); null: every cross-region pair of agents "
        "whose probe listens, the initiator the one whose name sorts first"))


class ThroughputSettingsPublic(ThroughputSettingsBody):
    updated_at: datetime | None = Field(description="null: never set, these are the defaults")


class Refusal(BaseModel):
    pair: PairRef
    proto: Proto
    code: Literal["budget_bytes", "budget_usd", "no_free_time"]
    reason: str
    experiments: int = Field(description="experiments of the pair refused for this reason")
    day: str | None = Field(default=None, description="UTC day planned, YYYY-MM-DD")


class BudgetPublic(BaseModel):
    month: str = Field(description="UTC month, YYYY-MM")
    budget_bytes: int
    used_bytes: float = Field(description="measured: the receivers' samples this month "
                                          "(UDP: received / (1 - loss), what was sent)")
    scheduled_bytes: float = Field(description="estimated, for experiments not yet ended")
    remaining_bytes: float
    used_cost_usd: float
    scheduled_cost_usd: float
    estimated_cost_usd: float = Field(description="used plus scheduled")
    budget_cost_usd: float | None = Field(description="the monthly cost cap, if set")
    refused: list[Refusal] = Field(description="what the scheduler's last run refused")
    refused_at: datetime | None


class ExperimentCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    initiator_agent_id: uuid.UUID
    responder_agent_id: uuid.UUID
    proto: Proto | None = Field(default=None, description="null: the settings' default "
                                                          "(tcp when it is both)")
    start_at: IsoDatetime | None = Field(default=None, description=(
        "null: as soon as both agents can have polled their config (about a minute)"))
    duration_s: int | None = Field(default=None, ge=5, le=3600)
    streams: int | None = Field(default=None, ge=1, le=16)
    udp_rate_bits_per_s: int | None = Field(default=None, ge=1_000, le=100_000_000_000)
    udp_datagram_bytes: int | None = Field(default=None, ge=64, le=8972)


class ExperimentPublic(BaseModel):
    id: uuid.UUID
    initiator_agent_id: uuid.UUID
    responder_agent_id: uuid.UUID
    proto: Proto
    start_at: datetime
    end_at: datetime = Field(description="start_at + 2 * duration_s")
    duration_s: int
    streams: int
    udp_rate_bits_per_s: int
    udp_datagram_bytes: int
    status: Status = Field(description=(
        "scheduled (not started), running (until 2 min after end_at), done (samples "
        "stored), missed (ended without samples)"))
    missed_reason: str | None = Field(default=None, description=(
        "when missed: why, as far as the server can tell (an agent deleted, its probe off, "
        "not heard from during the experiment)"))
    est_bytes: int
    est_cost_usd: float
    origin: Literal["scheduler", "manual"]
    created_at: datetime


class Transition(BaseModel):
    at: datetime = Field(description="the switch, to a fraction of a second")
    offset_s: float = Field(description="seconds from the direction's start")
    level_before_bytes_per_s: float
    level_after_bytes_per_s: float
    bytes_before: float = Field(description="volume the direction moved before the switch")


class DirectionStats(BaseModel):
    direction: Literal["forward", "reverse"]
    src_agent_id: uuid.UUID = Field(description="the sender of this direction")
    dst_agent_id: uuid.UUID = Field(description="the receiver, who measured it")
    seconds: int
    bytes: float
    mean_bytes_per_s: float | None
    max_bytes_per_s: float | None
    min_bytes_per_s: float | None
    std_bytes_per_s: float | None
    cov: float | None = Field(description="std / mean over the per-second samples")
    loss_ratio_mean: float | None
    jitter_us_mean: float | None
    jitter_us_max: float | None
    transitions: list[Transition]


class ExperimentDetail(ExperimentPublic):
    directions: list[DirectionStats]
    asymmetry: float | None = Field(description="forward mean / reverse mean")


class SamplePoint(BaseModel):
    time: datetime = Field(description="end of the second")
    offset_s: float = Field(description="seconds from the direction's start")
    bytes_per_s: float
    loss_ratio: float | None
    jitter_us: int | None


class DirectionSamples(BaseModel):
    direction: Literal["forward", "reverse"]
    src_agent_id: uuid.UUID
    dst_agent_id: uuid.UUID
    samples: list[SamplePoint]


class ExperimentSamples(BaseModel):
    experiment_id: uuid.UUID
    directions: list[DirectionSamples]


class FlowStats(BaseModel):
    mean_bytes_per_s: float | None = Field(description="mean over experiments' means")
    std_bytes_per_s: float | None = Field(description="sigma over experiments' means")
    cov: float | None
    experiments: int
    reverse_mean_bytes_per_s: float | None = Field(description="the opposite flow's mean")
    asymmetry: float | None = Field(description="this flow's mean / the opposite flow's")


class RegionPairStats(FlowStats):
    src_provider: str
    src_region: str
    dst_provider: str
    dst_region: str
    proto: Proto


class AgentPairStats(FlowStats):
    src_agent_id: uuid.UUID
    dst_agent_id: uuid.UUID
    proto: Proto


class PairsPublic(BaseModel):
    start: datetime
    end: datetime
    region_pairs: list[RegionPairStats] = Field(description="flows src -> dst")
    agent_pairs: list[AgentPairStats]


class AzPairMean(BaseModel):
    src_zone: str
    dst_zone: str
    mean_bytes_per_s: float | None
    experiments: int


class ZoneRef(BaseModel):
    src_zone: str
    dst_zone: str


class AzComparison(BaseModel):
    a: ZoneRef
    b: ZoneRef
    slots: int = Field(description="hours both AZ pairs measured")
    cv_rmse: float | None


class AzRegionPair(BaseModel):
    src_provider: str
    src_region: str
    dst_provider: str
    dst_region: str
    proto: Proto
    az_pairs: list[AzPairMean]
    comparisons: list[AzComparison]


class AzPairsPublic(BaseModel):
    start: datetime
    end: datetime
    region_pairs: list[AzRegionPair]


class Degradation(BaseModel):
    src_agent_id: uuid.UUID
    dst_agent_id: uuid.UUID
    src_region: str
    dst_region: str
    proto: Proto
    start: datetime
    end: datetime
    duration_s: float
    level_bytes_per_s: float
    norm_bytes_per_s: float
    experiments: int


class DegradationsPublic(BaseModel):
    start: datetime
    end: datetime
    fraction: float
    min_hours: float
    degradations: list[Degradation]
