"""Response shapes of the analysis API (`/api/v1/analytics/...`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class SourceInfo(BaseModel):
    resolution: Literal["raw", "1m", "1h", "1d"] = Field(
        description="raw samples (exact) or the rollup level that answered")
    start: datetime = Field(description="range actually covered (aligned to the resolution)")
    end: datetime
    exact: bool = Field(description="true for raw samples; sketches are within 1% otherwise")


class Summary(BaseModel):
    model_config = ConfigDict(extra="allow")
    group: Any = None
    samples: int = Field(description="every sample, including losses and failures")
    count: int = Field(description="samples with a value")
    failures: int
    loss_rate: float | None
    mean: float | None
    std: float | None
    cov: float | None = Field(description="std / mean")
    min: float | None
    max: float | None
    percentiles: dict[str, float | None] = Field(description="p5 ... p99_999 keyed p<pct>")
    p99_99_over_mean: float | None
    max_over_mean: float | None
    exact: bool


class SummaryResponse(BaseModel):
    source: SourceInfo
    kind: str
    group_by: str
    groups: list[Summary]


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


class SeriesGroup(BaseModel):
    group: Any
    windows: list[Window]


class SeriesResponse(BaseModel):
    source: SourceInfo
    kind: str
    window_s: int
    percentiles: list[str]
    groups: list[SeriesGroup]


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


class Box(BaseModel):
    group: Any
    count: int
    p5: float | None
    p25: float | None
    p50: float | None
    p75: float | None
    p95: float | None
    mean: float | None
    loss_rate: float | None


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


class HeatmapResponse(BaseModel):
    source: SourceInfo
    kind: str
    level: str
    stat: str
    rows: list[str]
    columns: list[str]
    cells: list[HeatmapCell]


class LevelShift(BaseModel):
    time: datetime
    window_index: int
    step: float
    level_before: float
    level_after: float


class Segment(BaseModel):
    start: datetime
    end: datetime
    level: float
    step: float | None


class WindowMedian(BaseModel):
    start: datetime
    p50: float | None


class LevelShiftResponse(BaseModel):
    source: SourceInfo
    kind: str
    window_s: int
    noise: float = Field(description="robust noise sigma of the windowed medians")
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


class AnalysisResponse(BaseModel):
    """Analyses with kind-specific rows (storage, quorum, cycles, asymmetry, detours)."""

    model_config = ConfigDict(extra="allow")
    source: SourceInfo | None
