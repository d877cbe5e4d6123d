"""Backtest: a draft rule over stored data (by default the last 7 days, or from where the
data begins when that is later), with the same condition and state code as live evaluation
(conditions.py) driven from scratch: how many times it would have fired, when, on which
series, at what peak, and the windows to draw.

Older windows come from rollups (mergeable sketches, 1% relative accuracy) and the newest
quarter hour, which rollups may not hold yet, from raw samples. 30 s windows cannot be built
from minute rollups, so they come from raw samples only, at most RAW_BACKTEST_ROWS of them:
the range is shortened to fit and the answer says so."""

from __future__ import annotations

import math
import time
import uuid
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.services.alerts.baselines import baselines
from stormwatch.services.alerts.conditions import evaluate_windows, replay
from stormwatch.services.alerts.metrics import METRICS
from stormwatch.services.alerts.scope import describe, key_to_str, matcher, to_filters
from stormwatch.services.alerts.validation import samples_per_s, validate_rule
from stormwatch.services.alerts.values import (
    Windows,
    agent_activity,
    epoch,
    from_epoch,
    pair_floors,
    path_change_windows,
    per_floor,
    percentiles_of,
    raw_windows,
    replayed_silence,
    rollup_windows,
)
from stormwatch.services.analytics.coverage import data_start
from stormwatch.services.analytics.filters import KIND_SPECS, Filters, where_clauses

RAW_BACKTEST_ROWS = 2_000_000
RAW_TAIL = timedelta(minutes=15)
MAX_DRAW_POINTS = 1500
MAX_DRAWN_SERIES = 12


async def backtest(session: AsyncSession, org_id: uuid.UUID, draft: dict[str, Any],
                   start: datetime, end: datetime, from_data: bool = False) -> dict[str, Any]:
    """from_data: start where the data begins when that is after `start` (the default range
    of a young install is minutes, not 7 days of empty windows drawn as flat lines)."""
    t0 = time.perf_counter()
    fleet = await validate_rule(session, org_id, draft)
    metric = METRICS[draft["metric"]]
    if from_data:
        first = await data_start(session, org_id, metric.kind, start)
        if first is not None and start < first < end:
            start = first
    w = int(draft["window_s"])
    stat = draft["statistic"]
    cond = draft["condition"]
    scope = draft.get("scope") or {}
    s_e = math.ceil(epoch(start) / w) * w
    e_e = epoch(end) // w * w
    notes: list[str] = []
    f = to_filters(scope, metric.adjusted)
    match = matcher(metric, f, fleet)
    ps = percentiles_of([stat])
    data: Windows = {}
    source: dict[str, Any]
    if metric.source == "path_changes":
        data = await path_change_windows(session, [org_id], w, s_e, e_e, fill=False)
        source = {"resolution": "exact", "exact": True,
                  "note": "each path change counted in the window its first trace was received"}
    elif metric.source == "silence":
        agents = [a for a in fleet.agents if match((a,))]
        activity = await agent_activity(session, org_id, from_epoch(s_e - 86400),
                                        from_epoch(e_e))
        first_seen: dict[uuid.UUID, datetime] = dict((await session.execute(text(
            "SELECT id, first_seen FROM agents WHERE org_id = :o"), {"o": org_id})).all())
        data = replayed_silence(activity, org_id, agents, w, np.arange(s_e, e_e, w),
                                first_seen)
        source = {"resolution": "1m", "exact": False,
                  "note": "silences replayed from minute rollups of the agents' samples"}
    else:
        assert metric.kind is not None
        spec = KIND_SPECS[metric.kind]
        params: dict[str, Any] = {}
        where, n_est = where_clauses(spec, fleet, Filters(start=start, end=end, **{
            k: v for k, v in f.__dict__.items() if k not in ("start", "end")}), params)
        if w % 60 == 0:
            tail = max(s_e, (epoch(end - RAW_TAIL)) // w * w)
            if tail > s_e:
                fr = Filters(**{**f.__dict__, "start": from_epoch(s_e), "end": from_epoch(tail)})
                data = await rollup_windows(session, org_id, metric, fr, fleet, w, ps)
            source = {"resolution": "rollups", "exact": False, "raw_from": from_epoch(tail)}
            raw_start = tail
        else:
            rate = await samples_per_s(session, org_id, metric)
            matched = sum(1 for a in fleet.agents for b in fleet.agents
                          if match((a, b) + (None,) * (len(spec.keys) - 2))) if spec.pair \
                else max(n_est, 1)
            max_span = RAW_BACKTEST_ROWS / max(matched * rate, 1e-9)
            raw_start = max(s_e, math.ceil((e_e - max_span) / w) * w)
            if raw_start > s_e:
                notes.append(f"{w} s windows come from raw samples only; to stay within "
                             f"{RAW_BACKTEST_ROWS:,} samples the backtest covers the last "
                             f"{(e_e - raw_start) / 3600:.1f} h; use whole-minute windows "
                             "to backtest the full range from rollups")
                s_e = raw_start
            source = {"resolution": "raw", "exact": True, "raw_from": from_epoch(raw_start)}
        if raw_start < e_e:
            raw = await raw_windows(session, [org_id], metric, w, from_epoch(raw_start),
                                    from_epoch(e_e), ps, where, params)
            for k, by_w in raw.items():
                data.setdefault(k, {}).update(by_w)
    if metric.per_floor:
        data = per_floor(data, {org_id: await pair_floors(session, org_id, fleet)})
    starts = list(range(s_e, e_e, w))
    keys = sorted((k for (o, k) in data if o == org_id and match(k)), key=key_to_str)
    values: dict[str, np.ndarray] = {}
    for k in keys:
        by_w = data[(org_id, k)]
        values[key_to_str(k)] = np.array(
            [np.nan if (ws := by_w.get(t)) is None or (v := ws.value(stat)) is None else v
             for t in starts], dtype=np.float64)
        if metric.source == "path_changes":  # a traced pair's quiet window: no change
            values[key_to_str(k)] = np.nan_to_num(values[key_to_str(k)], nan=0.0)
    base: dict[Any, np.ndarray] = {}
    if cond["type"] == "baseline" and starts and metric.kind is not None:
        base = await baselines(session, org_id, metric, f, fleet, stat,
                               cond.get("baseline", "prev_24h"), starts)
    breaches = {}
    thresholds = {}
    for k in keys:
        ks = key_to_str(k)
        bl = base.get(k, np.full(len(starts), np.nan)) if cond["type"] == "baseline" else None
        b = evaluate_windows(cond, values[ks], bl)
        breaches[ks] = b.breach
        thresholds[ks] = b.threshold
    episodes = replay(breaches, values, starts, w, int(draft["x"]), int(draft["y"]),
                      int(draft["n"]), lower_is_worse=cond["type"] == "below")
    by_str = {key_to_str(k): k for k in keys}
    firings = [{"start": from_epoch(ep.start), "end": None if ep.end is None
                else from_epoch(ep.end),
                "series": [describe(metric, by_str[s], fleet) for s in ep.series],
                "peak": ep.peak} for ep in episodes]
    involved = {s for ep in episodes for s in ep.series}
    ranked = sorted(values, key=lambda s: (s not in involved, -int(breaches[s].sum()), s))
    step = max(1, math.ceil(len(starts) / MAX_DRAW_POINTS))
    drawn = []
    for s in ranked[:MAX_DRAWN_SERIES]:
        drawn.append({**_draw(values[s], thresholds[s], breaches[s], starts, step,
                              cond["type"] == "below"),
                      "key": s, "name": describe(metric, by_str[s], fleet)["name"],
                      "labels": describe(metric, by_str[s], fleet),
                      "breaches": int(breaches[s].sum())})
    if len(ranked) > MAX_DRAWN_SERIES:
        notes.append(f"{len(ranked)} series matched; the {MAX_DRAWN_SERIES} drawn are those "
                     "that fired, then those with the most breaching windows")
    return {"from_": from_epoch(s_e), "to": from_epoch(e_e), "window_s": w,
            "draw_step_s": step * w, "count": len(episodes), "firings": firings,
            "series": drawn, "series_total": len(ranked), "source": source, "notes": notes,
            "elapsed_ms": (time.perf_counter() - t0) * 1000}


def _draw(v: np.ndarray, thr: np.ndarray, br: np.ndarray, starts: list[int], step: int,
          lower_is_worse: bool) -> dict[str, Any]:
    """Points to draw: every window, or each run of `step` windows as its worst value (the
    peaks a firing is about stay visible) with any breach in it."""
    out = []
    for i in range(0, len(starts), step):
        seg = v[i:i + step]
        ok = np.isfinite(seg)
        if ok.any():
            j = int(np.nanargmin(seg) if lower_is_worse else np.nanargmax(seg))
            val: float | None = float(seg[j])
        else:
            j, val = 0, None
        t = thr[i + j]
        out.append({"start": from_epoch(starts[i]), "value": val,
                    "threshold": float(t) if np.isfinite(t) else None,
                    "breach": bool(br[i:i + step].any())})
    return {"windows": out}
