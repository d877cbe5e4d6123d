"""Response shapes of the analysis API (`/api/v1/analytics/...`)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class SourceInfo(BaseModel):
    resolution: Literal["raw", "1m", "5m", "1h", "1d"] = Field(
        description="raw samples (exact) or the rollup level that answered")
    start: datetime = Field(description="range actually covered (aligned to the resolution)")
    end: datetime
    exact: bool = Field(description="true for raw samples; sketches are within 1% otherwise")


class SummaryStats(BaseModel):
    samples: int = Field(description="every sample, including losses and failures")
    count: int = Field(description="samples with a value")
    failures: int
    loss_rate: float | None
    mean: float | None
    std: float | None
    cov: float | None = Field(description="std / mean")
    min: float | None
    max: float | None
    percentiles: dict[str, float | None] = Field(
        description="p5 ... p99_999 keyed p<pct>: the sample of rank floor(p/100 (count - 1))")
    beyond: dict[str, int] = Field(
        default_factory=dict, description="samples above each percentile (its support)")
    p99_99_over_mean: float | None
    max_over_mean: float | None
    exact: bool


class Summary(SummaryStats):
    model_config = ConfigDict(extra="allow")
    group: Any = None


class SummaryResponse(BaseModel):
    source: SourceInfo
    kind: str
    group_by: str
    groups: list[Summary]


class LossReason(BaseModel):
    status: int = Field(description="the sample status code (docs/api.md, Status codes)")
    reason: str = Field(description="timeout, refused, error, corrupt or wrong_peer")
    count: int


class LossReasonsResponse(BaseModel):
    start: datetime = Field(description="where the counts begin: the range's start, or later "
                            "when raw samples of its beginning are gone (raw retention) or it "
                            "spans more than 7 days")
    end: datetime
    complete: bool = Field(description="the counts cover the whole requested range")
    lost: int
    reasons: list[LossReason]


class Window(BaseModel):
    model_config = ConfigDict(extra="allow")  # one field per requested percentile, e.g. p99_9
    start: datetime
    samples: int
    count: int
    loss_rate: float | None
    mean: float | None
    std: float | None
    min: float | None
    max: float | None
    beyond: dict[str, int] = Field(
        default_factory=dict, description="samples above each percentile of the window")


class SeriesGroup(BaseModel):
    group: Any
    windows: list[Window]


class SeriesResponse(BaseModel):
    source: SourceInfo
    kind: str
    window_s: int
    percentiles: list[str]
    groups: list[SeriesGroup]
    names: dict[str, str] = Field(
        default_factory=dict, description="for groups by agent (pair, src, dst, agent): the "
        "name of each agent id in them, \"<name> (deleted)\" for a deleted agent")


class HistogramBucket(BaseModel):
    lower: float
    upper: float
    count: float


class CdfPoint(BaseModel):
    value: float
    fraction: float


class DistributionResponse(BaseModel):
    source: SourceInfo
    kind: str
    count: int
    bucket_width: float
    histogram: list[HistogramBucket]
    cdf: list[CdfPoint]
    tail_fraction: float | None
    tail_cdf: list[CdfPoint] | None


class BoxStats(BaseModel):
    count: int
    p5: float | None
    p25: float | None
    p50: float | None
    p75: float | None
    p95: float | None
    mean: float | None
    loss_rate: float | None


class Box(BoxStats):
    group: Any


class BoxplotResponse(BaseModel):
    source: SourceInfo
    kind: str
    group_by: str
    boxes: list[Box]


class HeatmapCell(BaseModel):
    src: str
    dst: str
    value: float | None
    count: int
    samples: int
    beyond: int | None = Field(
        default=None, description="for a percentile stat: samples above it in the cell")


class HeatmapResponse(BaseModel):
    source: SourceInfo
    kind: str
    level: str
    stat: str
    rows: list[str]
    columns: list[str]
    cells: list[HeatmapCell]


class ShiftPathChange(BaseModel):
    at: datetime = Field(description="when the first trace of the new path started")
    path_id: uuid.UUID
    diff_ttl: int = Field(description="the first TTL where the old and new paths part")
    parting_after: list[str] = Field(description="the last hop both paths share")
    added_rtt_us: int | None = Field(description="the new path's median RTT at diff_ttl less "
                                     "the old path's (null where either did not answer)")


class LevelShift(BaseModel):
    time: datetime = Field(description="start of the first window at the new level")
    window_index: int
    step: float = Field(description="size of the jump: level after minus level before")
    direction: Literal["up", "down"]
    level_before: float = Field(description="local trend just before the shift")
    level_after: float = Field(description="local trend just after the shift")
    z: float = Field(description="step in standard errors of the jump estimate")
    confidence: float = Field(description="1 - the Bonferroni-corrected two-sided p-value")
    path_change: ShiftPathChange | None = Field(default=None, description=(
        "mesh, one pair (src and dst filters of one agent each, or group_by=pair): the pair's "
        "path change nearest the shift, from one window before it to one trace interval and "
        "one window after (docs/paths.md); null when the route did not change"))


class Segment(BaseModel):
    start: datetime
    end: datetime
    level: float
    step: float | None


class WindowMedian(BaseModel):
    start: datetime
    p50: float | None


class GroupShifts(BaseModel):
    group: Any
    noise: float
    cycles_removed_s: list[float]
    shifts: list[LevelShift]


class LevelShiftResponse(BaseModel):
    source: SourceInfo
    kind: str
    window_s: int
    group_by: str = "all"
    groups: list[GroupShifts] | None = Field(
        default=None, description="with group_by other than all: each group's shifts")
    names: dict[str, str] = Field(
        default_factory=dict, description="for groups by agent (pair, src, dst, agent): the "
        "name of each agent id in them, \"<name> (deleted)\" for a deleted agent")
    noise: float = Field(description="robust noise sigma of the windowed medians")
    cycles_removed_s: list[float] = Field(
        default_factory=list, description="periods modelled as cycles before step detection")
    shifts: list[LevelShift]
    segments: list[Segment]
    medians: list[WindowMedian]


class WelchResponse(BaseModel):
    source: SourceInfo
    kind: str
    group_by: str
    a: str
    b: str
    mean_a: float
    mean_b: float
    std_a: float | None
    std_b: float | None
    count_a: int
    count_b: int
    t: float
    dof: float
    p_value: float
    difference: float


class CvRmseResponse(BaseModel):
    source: SourceInfo
    kind: str
    window_s: int
    windows: int
    cv_rmse: float | None


class Period(BaseModel):
    period_s: float
    variance_share: float = Field(description="share of the detrended variance at this period")
    amplitude: float = Field(description="amplitude of the sinusoid at this period")
    false_alarm_probability: float = Field(
        description="probability that noise alone gives a peak this strong")


class ProfilePoint(BaseModel):
    offset_s: float = Field(description="offset into the strongest period")
    mean: float


class CyclesResponse(BaseModel):
    source: SourceInfo
    kind: str
    window_s: int
    significant: bool = Field(description="whether any period passed the significance test")
    false_alarm_threshold: float
    periods: list[Period] = Field(description="significant periods, strongest first")
    profile: list[ProfilePoint] = Field(description="mean profile over the strongest period")


class AsymmetryPair(BaseModel):
    a: str
    b: str
    a_to_b: float | None
    b_to_a: float | None
    difference: float | None = Field(description="a_to_b - b_to_a")
    ratio: float | None = Field(description="larger direction / smaller direction")


class AsymmetryResponse(BaseModel):
    source: SourceInfo
    kind: str
    level: str
    stat: str
    pairs: list[AsymmetryPair] = Field(description="largest ratio first")


class DetourAlternative(BaseModel):
    src: str
    dst: str
    src_provider: str
    dst_provider: str


class Detour(BaseModel):
    src: str = Field(description="source region (or zone)")
    dst: str
    src_place: str = Field(description="the source's metro where the org's geography places "
                           "its region (services/geography), else the region (or zone)")
    dst_place: str
    via: str = Field(description="the middle place (metro, region or zone) whose route "
                     "matches the direct RTT")
    via_regions: list[str] = Field(description="provider/region of the fleet in that place")
    src_provider: str
    dst_provider: str
    direct_us: float = Field(description="p50 RTT of this path")
    via_us: float = Field(description="best p50 RTT src -> via plus via -> dst")
    legs_us: list[float] = Field(description="the two legs of via_us")
    via_ratio: float = Field(description="via_us / direct_us")
    evidence: list[Literal["comparison", "geography"]] = Field(
        description="comparison: another path between the same places is min_excess times "
        "faster; geography: the direct RTT is max_stretch times the physical floor")
    best_alternative_us: float | None = Field(
        description="best p50 RTT of another path between the same two places, if any")
    alternative: DetourAlternative | None
    excess: float | None = Field(description="direct_us / best_alternative_us")
    floor_us: float | None = Field(
        description="the physical floor between the two places (light in fibre over the "
        "great circle, there and back), where both are placed")
    stretch: float | None = Field(description="direct_us / floor_us")


class DetoursResponse(BaseModel):
    source: SourceInfo
    level: str
    tolerance: float
    min_excess: float
    max_stretch: float
    detours: list[Detour]


class StretchPair(BaseModel):
    src_provider: str
    src: str = Field(description="source region")
    dst_provider: str
    dst: str
    src_metro: str
    dst_metro: str
    distance_km: float = Field(description="great-circle distance between the two places")
    floor_us: float = Field(description="distance_km x fibre_rtt_us_per_km: the fastest round "
                            "trip physics allows")
    p50_us: float
    stretch: float | None = Field(description="p50_us / floor_us; null within one metro "
                                  "(under 50 km), where the floor says nothing")


class UnplacedRegion(BaseModel):
    provider: str
    region: str


class StretchResponse(BaseModel):
    source: SourceInfo
    fibre_rtt_us_per_km: float
    pairs: list[StretchPair] = Field(description="largest stretch first")
    unplaced: list[UnplacedRegion] = Field(
        description="regions of the fleet neither the catalog nor the org places "
        "(PUT /api/v1/geography/places/{provider}/{region})")


class QuorumLatency(SummaryStats):
    agent_id: str = Field(description="the sender")
    group_name: str | None = Field(default=None, description="absent for node-to-node rows")
    quorum: str = Field(description="Qk/n for a group, NQ for node-to-node")
    box: BoxStats


class QuorumCompareResponse(BaseModel):
    source: SourceInfo
    quorums: list[QuorumLatency] = Field(description="one row per sender and group")
    node_to_node: list[QuorumLatency] = Field(
        description="per sender: RTT to every other node (or the given members)")


class StorageComparisonRow(BaseModel):
    provider: str | None = Field(default=None, description="set when by=provider")
    target: str | None = Field(default=None, description="target id, set when by=target")
    op: str
    size_bytes: int
    samples: int
    failures: int
    failure_rate: float | None
    median_latency_ms: float | None
    median_adj_latency_ms: float | None = Field(description="median of latency minus RTT")
    p90_latency_ms: float | None
    median_latency_per_bit_ns: float | None
    median_adj_latency_per_bit_ns: float | None


class StorageComparisonResponse(BaseModel):
    source: SourceInfo
    by: Literal["provider", "target"]
    rows: list[StorageComparisonRow]


class DailyMedianDay(BaseModel):
    day: str = Field(description="UTC date, YYYY-MM-DD")
    samples: int
    median_latency_ms: float | None = None
    median_adj_latency_ms: float | None = None


class DailyMedianSeries(BaseModel):
    provider: str | None = Field(default=None, description="set when by=provider")
    target: str | None = Field(default=None, description="target id, set when by=target")
    op: str
    size_bytes: int
    days: list[DailyMedianDay]


class StorageDailyMediansResponse(BaseModel):
    source: SourceInfo | None = Field(description="absent when there is nothing to read")
    by: Literal["provider", "target"]
    series: list[DailyMedianSeries]


class ReplicationRow(BaseModel):
    op: str
    size_bytes: int
    copies: int = Field(description="first of this many parallel GETs")
    count: int
    std_ms: float | None
    p90_ms: float | None
    mean_ms: float | None


class StorageReplicationResponse(BaseModel):
    source: SourceInfo
    rows: list[ReplicationRow]
