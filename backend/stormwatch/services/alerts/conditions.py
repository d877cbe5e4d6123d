"""Conditions and states: pure functions that both drivers (live evaluation, backtest) call.

A window breaches when its value is above/below an absolute value, above k x a baseline, or
sits within `lookback` windows after a level shift of at least `min_step` that the analytics'
change-point detector finds in the windowed values. A series is met when at least X of its
last Y windows breach; a group fires when at least N of its series are met (N = 1: each series
is its own group)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from stormwatch.services.analytics.changepoints import level_shifts

CONDITION_TYPES = ("above", "below", "baseline", "level_shift")
BASELINES = ("prev_24h", "week_ago")
DIRECTIONS = ("up", "down", "either")
DEFAULT_LOOKBACK = 60


@dataclass
class Breaches:
    breach: NDArray[np.bool_]
    threshold: NDArray[np.float64]  # the value each window was compared with (NaN: none)
    detail: list[dict[str, Any] | None] = field(default_factory=list)


def evaluate_windows(condition: dict[str, Any], values: NDArray[np.float64],
                     baselines: NDArray[np.float64] | None = None) -> Breaches:
    """Breach flags of consecutive windows (NaN values: no data, never a breach)."""
    v = np.asarray(values, dtype=np.float64)
    kind = condition["type"]
    ok = np.isfinite(v)
    if kind in ("above", "below"):
        thr = np.full(v.size, float(condition["value"]))
        b = ok & ((v > thr) if kind == "above" else (v < thr))
        return Breaches(b, thr)
    if kind == "baseline":
        base = (np.full(v.size, np.nan) if baselines is None
                else np.asarray(baselines, dtype=np.float64))
        thr = float(condition["k"]) * base
        b = ok & np.isfinite(thr) & (v > thr)
        return Breaches(b, thr)
    if kind == "level_shift":
        return level_shift_breaches(v, float(condition["min_step"]),
                                    condition.get("direction", "up"),
                                    int(condition.get("lookback_windows", DEFAULT_LOOKBACK)))
    raise ValueError(f"unknown condition {kind!r}")


def level_shift_breaches(values: NDArray[np.float64], min_step: float, direction: str,
                         hold: int) -> Breaches:
    """Windows from a qualifying change point on, for `hold` windows (or until the next
    change point): the detector of services/analytics/changepoints.py on the values."""
    n = values.size
    breach = np.zeros(n, dtype=bool)
    thr = np.full(n, float(min_step))
    detail: list[dict[str, Any] | None] = [None] * n
    if np.isfinite(values).sum() < 6:
        return Breaches(breach, thr, detail)
    r = level_shifts(values, min_step=min_step)
    segs = r["segments"]
    for i in range(1, len(segs)):
        step = segs[i]["step"]
        if step is None or abs(step) < min_step:
            continue
        if (direction == "up" and step <= 0) or (direction == "down" and step >= 0):
            continue
        a = segs[i]["start_index"]
        end = segs[i + 1]["start_index"] if i + 1 < len(segs) else n
        b = min(end, a + hold)
        breach[a:b] = True
        info = {"step": step, "level_before": segs[i - 1]["level"], "level_after":
                segs[i]["level"], "shift_index": a}
        for j in range(a, b):
            detail[j] = info
    return Breaches(breach, thr, detail)


@dataclass
class SeriesState:
    state: str = "ok"  # ok | pending | firing
    history: list[bool] = field(default_factory=list)
    values: list[float] = field(default_factory=list)  # parallel to history (NaN: no data)
    thresholds: list[float] = field(default_factory=list)
    decided_until: int = 0  # end (epoch s) of the newest window stepped, early ones included

    def push(self, value: float, threshold: float, y: int) -> None:
        """Keep the value and threshold of the window just stepped (after step_series)."""
        self.values = (self.values + [float(value)])[-len(self.history):] if self.history else []
        self.thresholds = ((self.thresholds + [float(threshold)])[-len(self.history):]
                           if self.history else [])


def step_series(s: SeriesState, breach: bool, x: int, y: int) -> tuple[SeriesState, str | None]:
    """One window: X of the last Y windows breaching makes a series met ('firing'); fewer
    resolves it. Returns the new state and the transition ('firing'/'resolved'/None)."""
    hist = (s.history + [bool(breach)])[-y:]
    met = sum(hist) >= x
    calm = "pending" if any(hist) else "ok"
    if s.state == "firing":
        if met:
            return replace(s, history=hist), None
        return replace(s, state=calm, history=hist), "resolved"
    if met:
        return replace(s, state="firing", history=hist), "firing"
    return replace(s, state=calm, history=hist), None


def step_group(state: str, met: int, n: int) -> tuple[str, str | None]:
    """N of M: the rule's group fires when at least n of its series are met."""
    if state == "firing":
        return ("firing", None) if met >= n else (("pending" if met else "ok"), "resolved")
    if met >= n:
        return "firing", "firing"
    return ("pending" if met else "ok"), None


def first_breach(s: SeriesState, t: int, window_s: int) -> int:
    """Start of the oldest breaching window in a series' last Y (its history ends at t):
    when the trouble behind a firing began."""
    for j, b in enumerate(s.history):
        if b:
            return t - (len(s.history) - 1 - j) * window_s
    return t


@dataclass
class Episode:
    group: str
    start: int  # start (epoch s) of the first breaching window behind the firing
    end: int | None  # window end of the window that resolved it
    series: list[str]
    peak: float | None


def replay(series_breaches: dict[str, NDArray[np.bool_]], values: dict[str, NDArray[np.float64]],
           starts: Sequence[int], window_s: int, x: int, y: int, n: int,
           lower_is_worse: bool = False) -> list[Episode]:
    """Every firing over the windows, from scratch (the backtest's driver of the same state
    functions the live evaluation applies one window at a time)."""
    states = {k: SeriesState() for k in series_breaches}
    episodes: list[Episode] = []
    open_: dict[str, Episode] = {}
    group_state = "ok"
    for i, w in enumerate(starts):
        met = []
        for k, b in series_breaches.items():
            states[k], tr = step_series(states[k], bool(b[i]), x, y)
            if n == 1:
                if tr == "firing":
                    open_[k] = Episode(k, first_breach(states[k], w, window_s), None, [k], None)
                elif tr == "resolved" and k in open_:
                    ep = open_.pop(k)
                    ep.end = w + window_s
                    episodes.append(ep)
            if states[k].state == "firing":
                met.append(k)
        if n > 1:
            group_state, tr = step_group(group_state, len(met), n)
            if tr == "firing":
                first = min(first_breach(states[k], w, window_s) for k in met)
                open_["*"] = Episode("*", first, None, list(met), None)
            elif tr == "resolved" and "*" in open_:
                ep = open_.pop("*")
                ep.end = w + window_s
                episodes.append(ep)
            if "*" in open_:
                ep = open_["*"]
                ep.series = sorted(set(ep.series) | set(met))
        for ep in open_.values():
            for k in ep.series:
                v = values[k][i]
                if np.isfinite(v) and (ep.peak is None or (
                        v < ep.peak if lower_is_worse else v > ep.peak)):
                    ep.peak = float(v)
    episodes.extend(open_.values())
    return sorted(episodes, key=lambda e: (e.start, e.group))
