"""Path traces (`POST /api/v1/ingest/paths` from agents) and the path analyses
(`/api/v1/analytics/paths/...`)."""

from __future__ import annotations

import ipaddress
import uuid
from datetime import datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator, model_validator

MAX_HOPS = 64
TRIGGERS = ("schedule", "level_shift", "loss", "alert", "request")


class HopIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ttl: int = Field(ge=1, le=MAX_HOPS)
    addrs: list[str] = Field(default_factory=list, max_length=16, description=(
        "every address that answered at this TTL (ECMP siblings); empty when none did"))
    sent: int = Field(ge=1, le=64)
    lost: int = Field(ge=0, le=64)
    rtt_min_us: int | None = Field(default=None, ge=0, le=60_000_000)
    rtt_med_us: int | None = Field(default=None, ge=0, le=60_000_000)
    rtt_max_us: int | None = Field(default=None, ge=0, le=60_000_000)
    reached: bool = False

    @field_validator("addrs")
    @classmethod
    def _addresses(cls, v: list[str]) -> list[str]:
        out = []
        for a in v:
            try:
                out.append(str(ipaddress.ip_address(a)))
            except ValueError:
                raise ValueError(f"{a!r} is not an IP address") from None
        return out

    @model_validator(mode="after")
    def _consistent(self) -> HopIn:
        if self.lost > self.sent:
            raise ValueError("lost is more than sent")
        rtts = (self.rtt_min_us, self.rtt_med_us, self.rtt_max_us)
        answered = self.sent > self.lost
        if answered and None in rtts:
            raise ValueError("a hop that answered has rtt_min_us, rtt_med_us and rtt_max_us")
        if not answered and (any(r is not None for r in rtts) or self.addrs or self.reached):
            raise ValueError("a hop with every probe lost has no addresses, no RTTs and did "
                             "not reach the destination")
        if answered and not (rtts[0] <= rtts[1] <= rtts[2]):  # type: ignore[operator]
            raise ValueError("rtt_min_us <= rtt_med_us <= rtt_max_us")
        return self


class TraceIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: uuid.UUID = Field(description="chosen by the agent: a retried batch stores it once")
    dst_agent_id: uuid.UUID
    dst_address: str = Field(max_length=64)
    started_at: AwareDatetime
    proto: Literal["tcp", "udp"]
    trigger: Literal["schedule", "level_shift", "loss", "alert", "request"]
    request_id: uuid.UUID | None = Field(default=None, description=(
        "the server's request this trace answers (from the agent config's paths.requests)"))
    reached: bool
    elapsed_ms: int = Field(ge=0, le=3_600_000)
    hops: list[HopIn] = Field(min_length=1, max_length=MAX_HOPS)

    @field_validator("dst_address")
    @classmethod
    def _address(cls, v: str) -> str:
        try:
            return str(ipaddress.ip_address(v))
        except ValueError:
            raise ValueError(f"{v!r} is not an IP address") from None

    @model_validator(mode="after")
    def _hops_in_order(self) -> TraceIn:
        for i, h in enumerate(self.hops, start=1):
            if h.ttl != i:
                raise ValueError(f"hops are TTL 1, 2, ... in order; hop {i} says ttl {h.ttl}")
        if any(h.reached for h in self.hops[:-1]):
            raise ValueError("only the last hop may have reached the destination")
        if self.reached != self.hops[-1].reached:
            raise ValueError("reached is the last hop's reached")
        return self


class TracesIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    traces: list[TraceIn] = Field(min_length=1, max_length=500)


class TracesAccepted(BaseModel):
    stored: int
    duplicates: int = Field(description="traces of this batch already stored (a retry)")
    path_changes: int = Field(description="traces that opened a new path of their pair")


class HopPublic(BaseModel):
    ttl: int
    addrs: list[str]
    sent: int
    lost: int
    rtt_min_us: int | None
    rtt_med_us: int | None
    rtt_max_us: int | None
    reached: bool


class TracePublic(BaseModel):
    id: uuid.UUID
    src_agent_id: uuid.UUID
    dst_agent_id: uuid.UUID
    dst_address: str
    started_at: datetime
    proto: str
    trigger: str
    reached: bool
    elapsed_ms: int
    path_id: uuid.UUID | None = Field(description="the pair path this trace was counted in; "
                                      "null for a late trace that matched no path of its time")
    hops: list[HopPublic]


class TracesResponse(BaseModel):
    traces: list[TracePublic]


class PathPublic(BaseModel):
    id: uuid.UUID
    src_agent_id: uuid.UUID
    dst_agent_id: uuid.UUID
    first_seen: datetime
    last_seen: datetime
    traces: int
    reached: bool
    hops: list[HopPublic] = Field(description="the hops of every trace counted in the path: "
                                  "ECMP siblings joined, unknown hops filled")


class CurrentPathResponse(BaseModel):
    path: PathPublic | None = Field(description="null before the pair's first trace")


class PathChangePublic(BaseModel):
    at: datetime = Field(description="when the first trace of the new path started")
    src_agent_id: uuid.UUID
    dst_agent_id: uuid.UUID
    from_path: PathPublic
    to_path: PathPublic
    diff_ttl: int = Field(description="the first TTL where the paths part")
    differing_ttls: list[int] = Field(description="every TTL where the two paths differ")
    parting_after: list[str] = Field(description="the last hop both paths share before they "
                                     "part (its addresses); empty when they part at TTL 1")
    added_rtt_us: int | None = Field(description="the new path's median RTT at the first "
                                     "differing TTL less the old path's there; null where "
                                     "either did not answer")


class PathChangesResponse(BaseModel):
    changes: list[PathChangePublic]


class TraceDiffResponse(BaseModel):
    a: uuid.UUID
    b: uuid.UUID
    same_path: bool
    diff_ttl: int | None
    differing_ttls: list[int]
    added_rtt_us: int | None


class TraceRequestIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    src: uuid.UUID = Field(description="the agent that traces")
    dst: uuid.UUID = Field(description="the agent traced to")


class TraceRequestAccepted(BaseModel):
    id: uuid.UUID = Field(description="the pair's pending request (an earlier one still "
                          "waiting is the same request)")
    expires_at: datetime
