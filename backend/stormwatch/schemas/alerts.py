"""Alert rules, backtests and alerts over the API."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer

Severity = Literal["critical", "warning", "info"]
Label = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z_][A-Za-z0-9_.\-]*$")]
Names = Annotated[list[Annotated[str, Field(min_length=1, max_length=200)]], Field(max_length=200)]
Ids = Annotated[list[uuid.UUID], Field(max_length=1000)]
Ints = Annotated[list[int], Field(max_length=100)]


class AlertScope(BaseModel):
    """The analysis API's filters: one rule watches every series they match."""

    model_config = ConfigDict(extra="forbid")

    agents: Ids | None = Field(None, description="every agent of a series must be one of these")
    src: Ids | None = Field(None, description="source agents (the agent of quorum/storage)")
    dst: Ids | None = Field(None, description="destination agents (pair series)")
    regions: Names | None = None
    zones: Names | None = Field(None, description=(
        "zones as provider/region/zone keys (the zone heatmap's, e.g. 'azure/westeurope/1')"))
    providers: Names | None = None
    topology_class: Names | None = None
    payload_bytes: Ints | None = None
    target: Ids | None = Field(None, description="storage target ids")
    op: Names | None = None
    variant: Names | None = None
    content: Names | None = None
    size_bytes: Ints | None = None
    copies: Ints | None = None
    concurrency: Ints | None = None
    group_name: Names | None = None
    proto: Names | None = None
    direction: Names | None = None


class ThresholdCondition(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["above", "below"]
    value: float = Field(description="in the metric's unit (us, a 0-1 rate, bytes/s, s)")


class BaselineCondition(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["baseline"]
    k: float = Field(gt=0, le=1000, description="fires above k x the baseline")
    baseline: Literal["prev_24h", "week_ago"] = Field(
        "prev_24h", description="the statistic over the 24 h before the window's hour, or "
        "over the same hour one week earlier")


class LevelShiftCondition(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["level_shift"]
    min_step: float = Field(gt=0, description="smallest step between levels, metric's unit")
    direction: Literal["up", "down", "either"] = "up"
    lookback_windows: int = Field(60, ge=10, le=500, description=(
        "windows the change-point detector sees; a shift stays a breach this many windows"))


Condition = Annotated[ThresholdCondition | BaselineCondition | LevelShiftCondition,
                      Field(discriminator="type")]


class AlertRuleDraft(BaseModel):
    """A rule's definition (what POST /alert-rules and the backtest take)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field("", max_length=200)
    description: str = Field("", max_length=4000)
    severity: Severity = "warning"
    labels: dict[Label, Annotated[str, Field(max_length=200)]] = Field(default_factory=dict,
                                                                        max_length=30)
    enabled: bool = True
    metric: str = Field(description="see GET /alert-rules/metrics")
    statistic: str = Field(description="p50 ... p99.999, mean, std, loss_rate, ...")
    scope: AlertScope = Field(default_factory=AlertScope)
    window_s: int = Field(ge=30, le=3600)
    condition: Condition
    x: int = Field(1, ge=1, le=100, description="breaching windows needed ...")
    y: int = Field(1, ge=1, le=100, description="... among the last y consecutive windows")
    n: int = Field(1, ge=1, le=10000, description="series that must agree before it fires")
    m: int | None = Field(None, ge=1, le=10000, description="series expected in scope")
    channel_ids: list[uuid.UUID] = Field(default_factory=list, max_length=50)
    reminder_interval_s: int | None = Field(None, ge=60, le=7 * 86400)


class AlertRuleCreate(AlertRuleDraft):
    name: str = Field(min_length=1, max_length=200)


class AlertRuleUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, min_length=1, max_length=200)
    description: str | None = Field(None, max_length=4000)
    severity: Severity | None = None
    labels: dict[Label, Annotated[str, Field(max_length=200)]] | None = None
    enabled: bool | None = None
    metric: str | None = None
    statistic: str | None = None
    scope: AlertScope | None = None
    window_s: int | None = Field(None, ge=30, le=3600)
    condition: Condition | None = None
    x: int | None = Field(None, ge=1, le=100)
    y: int | None = Field(None, ge=1, le=100)
    n: int | None = Field(None, ge=1, le=10000)
    m: int | None = Field(None, ge=1, le=10000)
    channel_ids: list[uuid.UUID] | None = Field(None, max_length=50)
    reminder_interval_s: int | None = Field(None, ge=60, le=7 * 86400)


class AlertRulePublic(AlertRuleDraft):
    id: uuid.UUID
    org_id: uuid.UUID
    created_by: uuid.UUID | None = Field(description="the user who created the rule in a session")
    created_by_key_id: uuid.UUID | None = Field(
        None, description="the API key the rule was created with (created_by is then null)")
    created_at: datetime
    updated_at: datetime
    evaluated_until: datetime | None
    firing: int = Field(0, description="alerts of this rule firing now")

    @field_serializer("scope")
    def _scope(self, scope: AlertScope) -> dict[str, Any]:
        """Only the filters the rule sets."""
        return scope.model_dump(mode="json", exclude_none=True)


class BacktestRequest(AlertRuleDraft):
    from_: datetime | None = Field(None, alias="from", description=(
        "UTC; default to - 7 days, or where the org's data begins when that is later"))
    to: datetime | None = Field(None, description="UTC; default now")

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class BacktestWindow(BaseModel):
    start: datetime
    value: float | None
    threshold: float | None
    breach: bool


class BacktestSeries(BaseModel):
    key: str
    name: str
    labels: dict[str, Any]
    windows: list[BacktestWindow]
    breaches: int


class BacktestFiring(BaseModel):
    start: datetime
    end: datetime | None = Field(description="None: still firing at the end of the range")
    series: list[dict[str, Any]]
    peak: float | None


class BacktestResult(BaseModel):
    from_: datetime = Field(serialization_alias="from")
    to: datetime
    window_s: int
    draw_step_s: int = Field(description="each drawn point covers this span (its worst value)")
    count: int
    firings: list[BacktestFiring]
    series: list[BacktestSeries]
    series_total: int
    source: dict[str, Any]
    notes: list[str]
    elapsed_ms: float


class AlertEventPublic(BaseModel):
    id: uuid.UUID
    kind: Literal["firing", "resolved"]
    at: datetime
    created_at: datetime
    evidence: dict[str, Any]


class AlertPublic(BaseModel):
    id: uuid.UUID
    rule_id: uuid.UUID
    rule_name: str
    severity: Severity
    labels: dict[str, str]
    metric: str
    statistic: str
    group_key: str
    state: Literal["firing", "resolved"]
    started_at: datetime
    resolved_at: datetime | None
    unit: str = Field(description="unit of the statistic's values (us, ratio, bytes/s, s)")
    series: list[dict[str, Any]] = Field(description="agreeing series: agents, pair, target")
    dashboard_path: str | None
    evidence: dict[str, Any]


class AlertDetail(AlertPublic):
    events: list[AlertEventPublic]


class MetricInfo(BaseModel):
    name: str
    title: str
    unit: str
    statistics: list[str]
    units: dict[str, str] = Field(description="each statistic's unit (rates are ratios)")
    filters: list[str]
    conditions: list[str]


class MetricsCatalog(BaseModel):
    metrics: list[MetricInfo]
    conditions: list[str]
    baselines: list[str]
    directions: list[str]
    severities: list[str]
    window_s: dict[str, int]
