"""The hand-off from evaluation to delivery: why an alert fired (or how it stood when it
resolved). Evaluation writes an `Evidence` into alert_events.evidence and alerts.evidence;
delivery, the alert API and the UI read it back.

Its JSON form carries `"v": 1`. Rows written before it had no version, in three shapes that
`Evidence.read` still takes:
- flat: one series named by a string (`series_name`, or `series` as a string), its value
  under `value` or `peak` (or the last of a top-level `values` list), the unit as given;
- one series as an object (`series: {"name": ..., "key": ...}`);
- evaluation's list (`series: [{key, name, labels..., value, values: [...]}]`), where rows
  from before the unit followed the statistic carry the metric's unit for a rate.
An alert's row adds the evidence of its resolution under `resolution`."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_serializer

from stormwatch.services.alerts.metrics import statistic_unit

EVIDENCE_VERSION = 1
# Names listed in a message for an N-of-M group before "…".
NAMES_SHOWN = 6


class WindowValue(BaseModel):
    """One of a series' last Y windows: its value against the threshold in force."""

    start: datetime | None = None
    value: float | None = None
    threshold: float | None = None
    breach: bool | None = None

    @field_serializer("start")
    def _iso(self, v: datetime | None) -> str | None:
        return None if v is None else v.isoformat()


class SeriesEvidence(BaseModel):
    """One agreeing series. Its labels (src/dst or agent, target, op, size, topology class...)
    depend on the metric kind and are kept as they come (see scope.describe)."""

    model_config = ConfigDict(extra="allow")

    key: str = ""
    name: str = ""
    value: float | None = None
    threshold: float | None = None
    baseline: float | None = None
    values: list[WindowValue] = Field(default_factory=list)
    level_shift: dict[str, Any] | None = None


class TimeRange(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    start: datetime = Field(alias="from")
    end: datetime = Field(alias="to")

    @field_serializer("start", "end")
    def _iso(self, v: datetime) -> str:
        return v.isoformat()


class Evidence(BaseModel):
    model_config = ConfigDict(extra="ignore")

    v: int = EVIDENCE_VERSION
    rule_name: str = ""
    metric: str = ""
    statistic: str = ""
    unit: str = ""
    window_s: int | None = None
    condition: dict[str, Any] = Field(default_factory=dict)
    x: int | None = None
    y: int | None = None
    n: int | None = None
    m: int | None = None
    series_name: str = ""
    value: float | None = None
    threshold: float | None = None
    baseline: float | None = None
    series: list[SeriesEvidence] = Field(default_factory=list)
    agreeing: int = 0
    time_range: TimeRange | None = None
    dashboard_path: str | None = None
    m_matched: int | None = None  # N of M: how many series the rule matched
    # Decided before its window could be judged closed (it ended less than SETTLE_S ago, or
    # is still open), on the samples in by then: a firing told early.
    decided_early: bool = False
    resolution: Evidence | None = None  # on an alert's row: how it stood when it resolved

    def to_json(self) -> dict[str, Any]:
        """The stored form: the fields given (a None given stays, as "no data"), versioned."""
        out = self.model_dump(mode="json", by_alias=True, exclude_unset=True, exclude={"v"})
        return {"v": EVIDENCE_VERSION, **out}

    @property
    def title(self) -> str:
        """One series' readable name, or "N series agree: a, b, ..." for an N-of-M group;
        "" when the evidence names none."""
        if self.series_name:
            return self.series_name
        names = [s.name or s.key or "?" for s in self.series]
        if len(names) <= 1:
            return names[0] if names else ""
        more = ", …" if len(names) > NAMES_SHOWN else ""
        return f"{len(names)} series agree: " + ", ".join(names[:NAMES_SHOWN]) + more

    @classmethod
    def read(cls, stored: Mapping[str, Any] | None) -> Evidence:
        """Any stored evidence, of this version or a historic shape; never raises on a row:
        what cannot be read is left out."""
        if not stored:
            return cls()
        if "v" in stored:
            try:
                return cls.model_validate(stored)
            except ValidationError:
                pass  # a row this reader cannot type: read what it can, as a historic one
        return cls._historic(stored)

    @classmethod
    def _historic(cls, ev: Mapping[str, Any]) -> Evidence:
        raw = ev.get("series")
        entries: list[Any] = ([raw] if isinstance(raw, str | dict) else
                              list(raw) if isinstance(raw, list) else [])
        series = [_series(s) for s in entries if s]
        value = _num(ev.get("value"))
        if value is None:
            value = _num(ev.get("peak"))
        values = ev.get("values")
        if value is None and isinstance(values, list) and values:
            last = values[-1]
            value = _num(last.get("value") if isinstance(last, dict) else last)
        metric, statistic = _str(ev.get("metric")), _str(ev.get("statistic"))
        # The unit follows the statistic where the row says which; else as stored.
        unit = (statistic_unit(metric, statistic) if statistic else "") or _str(ev.get("unit"))
        name = _str(ev.get("series_name")) or (raw if isinstance(raw, str) else "")
        fields: dict[str, Any] = {
            "rule_name": _str(ev.get("rule_name")), "metric": metric, "statistic": statistic,
            "unit": unit, "series_name": name, "value": value,
            "threshold": _num(ev.get("threshold")), "baseline": _num(ev.get("baseline")),
            "series": series, "agreeing": _int(ev.get("agreeing")) or len(series),
            "dashboard_path": ev.get("dashboard_path") if isinstance(
                ev.get("dashboard_path"), str) and ev.get("dashboard_path") else None}
        for k in ("window_s", "x", "y", "n", "m", "m_matched"):
            if _int(ev.get(k)) is not None:
                fields[k] = _int(ev.get(k))
        if isinstance(ev.get("condition"), dict):
            fields["condition"] = ev["condition"]
        with contextlib.suppress(ValidationError):
            fields["time_range"] = TimeRange.model_validate(ev.get("time_range"))
        if isinstance(ev.get("resolution"), dict):
            fields["resolution"] = cls.read(ev["resolution"])
        return cls(**fields)


def _series(s: Any) -> SeriesEvidence:
    if not isinstance(s, dict):
        return SeriesEvidence(name=str(s))
    try:
        return SeriesEvidence.model_validate(s)
    except ValidationError:  # odd windows or labels: keep what names the series
        return SeriesEvidence(key=_str(s.get("key")), name=_str(s.get("name")),
                              value=_num(s.get("value")))


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _str(v: Any) -> str:
    return v if isinstance(v, str) else ""
