"""The analyses of the seeds on top of `grouped` and `levels`: summaries, windowed series,
histograms, box plots, heatmaps, quorum vs node-to-node, storage comparisons, level shifts,
cycles, asymmetry, detours, Welch's t-test and CV_RMSE. Return plain JSON-able dicts."""

from __future__ import annotations

import csv
import io
import re
import uuid
from collections.abc import Callable, Hashable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.models.org import DEFAULT_MESH_SETTINGS, Org
from stormwatch.models.samples import MESH_STATUSES
from stormwatch.services.analytics.changepoints import cyclical_pattern, level_shifts
from stormwatch.services.analytics.coverage import data_start
from stormwatch.services.analytics.detours import PathRtt, find_detours, path_key
from stormwatch.services.analytics.filters import (
    KIND_SPECS,
    Filters,
    Fleet,
    QueryError,
    load_fleet,
    target_providers,
)
from stormwatch.services.analytics.grouped import load_grouped
from stormwatch.services.analytics.grouping import group_fn
from stormwatch.services.analytics.levels import load_levels
from stormwatch.services.analytics.raw import mesh_status_counts
from stormwatch.services.analytics.sketches import Sketch, merge_sketches
from stormwatch.services.analytics.stats import (
    Distribution,
    Moments,
    beyond_count,
    cv_rmse,
    pct_label,
    welch_t_test,
)
from stormwatch.services.geography.catalog import (
    FIBRE_RTT_US_PER_KM,
    MIN_STRETCH_KM,
    distance_km,
    floor_rtt_us,
)
from stormwatch.services.geography.places import load_geography
from stormwatch.services.paths import store as path_store

MAX_WINDOWS = 20_000
# Level shifts and cycles return one median per window: two weeks of 30 s windows.
MAX_LEVEL_WINDOWS = 2 * 7 * 2880


def _label(g: Hashable) -> Any:
    if isinstance(g, tuple):
        return [_label(x) for x in g]
    if isinstance(g, uuid.UUID):
        return str(g)
    return g


def _agent_names(fleet: Fleet, group_by: str, groups: Iterable[Hashable]) -> dict[str, str]:
    """Groups by agent carry ids: their display names ride along, "<name> (deleted)" for a
    deleted agent, so no view falls back to a bare id."""
    if group_by not in ("pair", "src", "dst", "agent"):
        return {}
    return {str(part): fleet.level_of(uuid.UUID(str(part)), "node")
            for grp in groups for part in (grp if isinstance(grp, tuple) else (grp,))}


async def _grouping(session: AsyncSession, org_id: uuid.UUID, kind: str, group_by: str,
                    fleet: Fleet):
    tp = await target_providers(session, org_id) if kind == "storage" else None
    return group_fn(kind, group_by, fleet, tp)


async def summary(session: AsyncSession, org_id: uuid.UUID, kind: str, f: Filters,
                  group_by: str = "all", percentiles: Sequence[float] | None = None
                  ) -> dict[str, Any]:
    fleet = await load_fleet(session, org_id)
    g = await load_grouped(session, org_id, kind, f, await _grouping(session, org_id, kind,
                                                                     group_by, fleet), fleet)
    kw = {} if percentiles is None else {"percentiles": percentiles}
    groups = [{"group": _label(k), **d.summary(**kw)} for k, d in sorted(
        g.groups.items(), key=lambda kv: str(kv[0]))]
    return {"source": g.source.as_dict(), "kind": kind, "group_by": group_by, "groups": groups}


def _check_window(f: Filters, window_s: int) -> None:
    if window_s <= 0:
        raise QueryError("window_s", "window_s must be positive")
    if (f.end - f.start).total_seconds() / window_s > MAX_WINDOWS:
        raise QueryError("window_s", f"more than {MAX_WINDOWS} windows: widen window_s")


def _range_stat(dists: Sequence[Distribution], stat: str) -> float | None:
    """A statistic of the union of a group's windows: their samples or merged sketches."""
    m = Moments()
    for d in dists:
        m.add(d.moments)
    if not stat.startswith("p") or stat in HEATMAP_STATS:
        return _stat_value(Distribution(m), stat)
    q = _parse_pct_stat(stat, "rank_by") / 100
    if all(d.values is not None for d in dists):
        merged = Distribution.exact(
            np.concatenate([d.values for d in dists if d.values is not None]))
    else:
        sk = merge_sketches(d.sketch if d.sketch is not None else Sketch.from_values(
            d.values if d.values is not None else []) for d in dists)
        merged = Distribution.sketched(sk, m)
    return merged.quantiles([q])[0]


def rank_groups(stats: dict[Any, float | None], limit: int) -> list[Any]:
    """The most telling groups: half (rounded up) with the highest statistic, the rest with
    the lowest, highest first; groups without a value are left out."""
    ranked = sorted((k for k, v in stats.items() if v is not None),
                    key=lambda k: (-(stats[k] or 0.0), str(k)))
    if len(ranked) <= limit:
        return ranked
    top = (limit + 1) // 2
    return ranked[:top] + ranked[len(ranked) - (limit - top):]


async def series(session: AsyncSession, org_id: uuid.UUID, kind: str, f: Filters,
                 window_s: int, percentiles: Sequence[float], group_by: str = "all",
                 rank_by: str | None = None, limit: int | None = None) -> dict[str, Any]:
    """Windowed statistics; percentiles of each window come from its samples or sketch.
    With `limit`, only the groups with data whose `rank_by` statistic over the whole range
    is highest (half) or lowest (the rest), in that order."""
    _check_window(f, window_s)
    if rank_by is not None and rank_by not in HEATMAP_STATS:
        _parse_pct_stat(rank_by, "rank_by")
    fleet = await load_fleet(session, org_id)
    grouping = await _grouping(session, org_id, kind, group_by, fleet)
    g = await load_grouped(session, org_id, kind, f, grouping, fleet, window_s=window_s)
    by_group: dict[Any, list[dict[str, Any]]] = {}
    qs = [p / 100 for p in percentiles]
    labels = [pct_label(p) for p in percentiles]
    keys = sorted(g.groups, key=lambda k: (str(k[0]), k[1]))
    if limit is not None:
        windows: dict[Any, list[Distribution]] = {}
        for k in keys:
            windows.setdefault(k[0], []).append(g.groups[k])
        chosen = rank_groups({grp: _range_stat(ds, rank_by or "p50")
                              for grp, ds in windows.items()}, limit)
        order = {grp: i for i, grp in enumerate(chosen)}
        keys = sorted((k for k in keys if k[0] in order), key=lambda k: (order[k[0]], k[1]))
    qv = g.quantiles(keys, qs)
    for i, (grp, w) in enumerate(keys):
        m = g.groups[(grp, w)].moments
        row: dict[str, Any] = {"start": datetime.fromtimestamp(w, UTC), "samples": m.samples,
                               "count": m.count, "loss_rate": m.failure_rate, "mean": m.mean,
                               "std": m.std, "min": m.minimum if m.count else None,
                               "max": m.maximum if m.count else None}
        row.update((lab, None if not np.isfinite(v) else float(v))
                   for lab, v in zip(labels, qv[i], strict=True))
        row["beyond"] = {lab: beyond_count(m.count, q) for lab, q in zip(labels, qs,
                                                                          strict=True)}
        # Keyed by the group itself: the label of a tuple group (a pair) is a list.
        by_group.setdefault(grp, []).append(row)
    return {"source": g.source.as_dict(), "kind": kind, "window_s": window_s,
            "percentiles": labels, "names": _agent_names(fleet, group_by, by_group),
            "groups": [{"group": _label(k), "windows": v} for k, v in by_group.items()]}


async def distribution(session: AsyncSession, org_id: uuid.UUID, kind: str, f: Filters,
                       bucket_width: float, tail_fraction: float | None) -> dict[str, Any]:
    g = await load_grouped(session, org_id, kind, f, lambda k: "all")
    d = g.groups.get("all") or Distribution.exact([])
    try:
        hist = d.histogram(bucket_width)
    except ValueError as exc:
        raise QueryError("bucket_width", str(exc)) from exc
    return {"source": g.source.as_dict(), "kind": kind, "count": d.count,
            "bucket_width": bucket_width, "histogram": hist, "cdf": d.cdf(),
            "tail_fraction": tail_fraction,
            "tail_cdf": d.cdf(tail_fraction) if tail_fraction else None}


async def boxplots(session: AsyncSession, org_id: uuid.UUID, kind: str, f: Filters,
                   group_by: str) -> dict[str, Any]:
    fleet = await load_fleet(session, org_id)
    g = await load_grouped(session, org_id, kind, f, await _grouping(session, org_id, kind,
                                                                     group_by, fleet), fleet)
    return {"source": g.source.as_dict(), "kind": kind, "group_by": group_by,
            "boxes": [{"group": _label(k), **d.box()} for k, d in
                      sorted(g.groups.items(), key=lambda kv: str(kv[0]))]}


HEATMAP_STATS = ("count", "loss_rate", "mean", "std", "cov", "min", "max")


def _stat_value(d: Distribution, stat: str) -> float | None:
    m = d.moments
    if stat == "count":
        return float(m.count)
    if stat == "loss_rate":
        return m.failure_rate
    if stat == "mean":
        return m.mean
    if stat == "std":
        return m.std
    if stat == "cov":
        return (m.std / m.mean) if (m.mean and m.std is not None) else None
    if stat == "min":
        return m.minimum if m.count else None
    if stat == "max":
        return m.maximum if m.count else None
    p = _parse_pct_stat(stat)
    return d.quantiles([p / 100])[0]


def _parse_pct_stat(stat: str, param: str = "stat") -> float:
    try:
        p = float(stat.lstrip("pP").replace("_", "."))
    except ValueError:
        raise QueryError(param, f"{param} must be one of {', '.join(HEATMAP_STATS)} or a "
                         "percentile such as p50, p99, p99.99") from None
    if not stat.lower().startswith("p") or not 0 <= p <= 100:
        raise QueryError(param, "percentile stats look like p50, p99.9")
    return p


async def heatmap(session: AsyncSession, org_id: uuid.UUID, kind: str, f: Filters, level: str,
                  stat: str) -> dict[str, Any]:
    """A statistic for every (src, dst) at node, zone or region level. Above node level a
    cell holds pairs of distinct agents: a self-loop (an agent probing itself) is not a
    path inside a region or zone, and mixed in it would pull the diagonal down to µs."""
    spec = KIND_SPECS[kind]
    if not spec.pair:
        raise QueryError("kind", "heatmaps are for pair series (mesh, throughput)")
    if level not in ("node", "zone", "region", "provider"):
        raise QueryError("level", "level must be node, zone, region or provider")
    if stat not in HEATMAP_STATS:
        _parse_pct_stat(stat)
    fleet = await load_fleet(session, org_id)
    g = await load_grouped(session, org_id, kind, f,
                           lambda k: ((fleet.level_of(k[0], level), fleet.level_of(k[1], level))
                                      if level == "node" or k[0] != k[1] else None),
                           fleet)
    keys = sorted(g.groups, key=str)
    if stat.startswith("p") and stat not in HEATMAP_STATS:
        q = g.quantiles(keys, [_parse_pct_stat(stat) / 100])[:, 0]
        values: list[float | None] = [None if not np.isfinite(v) else float(v) for v in q]
    else:
        values = [_stat_value(g.groups[k], stat) for k in keys]
    rows = sorted({k[0] for k in keys})
    cols = sorted({k[1] for k in keys})
    q_stat = _parse_pct_stat(stat) / 100 if stat not in HEATMAP_STATS else None
    cells = [{"src": k[0], "dst": k[1], "value": v, "count": g.groups[k].moments.count,
              "samples": g.groups[k].moments.samples,
              "beyond": None if q_stat is None else beyond_count(g.groups[k].moments.count,
                                                                 q_stat)}
             for k, v in zip(keys, values, strict=True)]
    return {"source": g.source.as_dict(), "kind": kind, "level": level, "stat": stat,
            "rows": rows, "columns": cols, "cells": cells}


async def quorum_vs_pairs(session: AsyncSession, org_id: uuid.UUID, f: Filters,
                          members: list[uuid.UUID] | None) -> dict[str, Any]:
    """Seed 003 §4.3.5 / Fig. 12: quorum latency (Qk/n) beside node-to-node (NQ) RTT from
    the same senders."""
    fleet = await load_fleet(session, org_id)
    # Pair-only filters (topology class, payload size) narrow the node-to-node side only.
    qf = Filters(**{**f.__dict__, "dst": None, "topology_class": None, "payload_bytes": None})
    q = await load_grouped(session, org_id, "quorum", qf,
                           lambda k: (str(k[0]), k[1], f"Q{k[2]}/{k[3]}"), fleet)
    out = []
    senders = sorted({uuid.UUID(k[0]) for k in q.groups})
    nq_filters = Filters(**{**f.__dict__, "extra": {}, "src": senders or f.src,
                            "dst": members if members else f.dst})
    nq = await load_grouped(session, org_id, "mesh", nq_filters,
                            lambda k: str(k[0]) if k[0] != k[1] else None, fleet)
    for k, d in sorted(q.groups.items(), key=lambda kv: str(kv[0])):
        out.append({"agent_id": k[0], "group_name": k[1], "quorum": k[2], **d.summary(),
                    "box": d.box()})
    pairs = [{"agent_id": k, "quorum": "NQ", **d.summary(), "box": d.box()}
             for k, d in sorted(nq.groups.items())]
    return {"source": q.source.as_dict(), "quorums": out, "node_to_node": pairs}


async def storage_comparison(session: AsyncSession, org_id: uuid.UUID, f: Filters,
                             by: str = "provider") -> dict[str, Any]:
    """Seed 000 Tables 1-2, Figs. 2 and 4: medians by provider (or target) x op x size,
    raw and RTT-adjusted, failure rates and median latency per bit."""
    if by not in ("provider", "target"):
        raise QueryError("by", "by must be provider or target")
    fleet = await load_fleet(session, org_id)
    grouping = await _grouping(session, org_id, "storage",
                               "provider_op_size" if by == "provider" else "target_op_size", fleet)
    raw = await load_grouped(session, org_id, "storage", f, grouping, fleet)
    adj = await load_grouped(session, org_id, "storage",
                             Filters(**{**f.__dict__, "adjusted": True}), grouping, fleet)
    rows = []
    for k in sorted(raw.groups, key=str):
        d = raw.groups[k]
        a = adj.groups.get(k)
        med = d.quantiles([0.5])[0]
        amed = a.quantiles([0.5])[0] if a is not None else None
        size = int(k[2])
        bits = size * 8
        rows.append({
            by: _label(k[0]), "op": k[1], "size_bytes": size, "samples": d.moments.samples,
            "failures": d.moments.failures, "failure_rate": d.moments.failure_rate,
            "median_latency_ms": None if med is None else med / 1000,
            "median_adj_latency_ms": None if amed is None else amed / 1000,
            "p90_latency_ms": (lambda x: None if x is None else x / 1000)(d.quantiles([0.9])[0]),
            "median_latency_per_bit_ns": None if med is None or not bits else med * 1000 / bits,
            "median_adj_latency_per_bit_ns": (None if amed is None or not bits
                                              else amed * 1000 / bits),
        })
    return {"source": raw.source.as_dict(), "by": by, "rows": rows}


async def storage_daily_medians(session: AsyncSession, org_id: uuid.UUID, f: Filters,
                                by: str = "provider") -> dict[str, Any]:
    """Seed 000 §5.2 / Figs. 5-6: the median of each UTC day, per provider x op x size."""
    fleet = await load_fleet(session, org_id)
    grouping = await _grouping(session, org_id, "storage",
                               "provider_op_size" if by == "provider" else "target_op_size", fleet)
    out: dict[Any, list[dict[str, Any]]] = {}
    src = None
    for adjusted in (False, True):
        g = await load_grouped(session, org_id, "storage",
                               Filters(**{**f.__dict__, "adjusted": adjusted}), grouping, fleet,
                               window_s=86400)
        src = g.source
        for (k, day), d in g.groups.items():
            key = (str(k[0]), k[1], int(k[2]))
            rows = out.setdefault(key, [])
            entry = next((r for r in rows if r["day"] == day), None)
            if entry is None:
                entry = {"day": day, "samples": d.moments.samples}
                rows.append(entry)
            med = d.quantiles([0.5])[0]
            entry["median_adj_latency_ms" if adjusted else "median_latency_ms"] = (
                None if med is None else med / 1000)
    series = []
    for key in sorted(out, key=str):
        days = sorted(out[key], key=lambda r: r["day"])
        for r in days:
            r["day"] = datetime.fromtimestamp(r["day"], UTC).date().isoformat()
        series.append({by: key[0], "op": key[1], "size_bytes": key[2], "days": days})
    return {"source": src.as_dict() if src else None, "by": by, "series": series}


async def storage_replication(session: AsyncSession, org_id: uuid.UUID, f: Filters
                              ) -> dict[str, Any]:
    """Seed 000 Figs. 9-10: std dev and p90 of GET latency by number of copies (first of k
    parallel GETs), per size."""
    f = Filters(**{**f.__dict__, "extra": {**f.extra, "variant": ["replicated"]}})
    fleet = await load_fleet(session, org_id)
    g = await load_grouped(session, org_id, "storage", f, lambda k: (k[2], k[5], k[6]), fleet)
    rows = []
    for (op, size, copies), d in sorted(g.groups.items()):
        p90 = d.quantiles([0.9])[0]
        rows.append({"op": op, "size_bytes": size, "copies": copies, "count": d.count,
                     "std_ms": None if d.moments.std is None else d.moments.std / 1000,
                     "p90_ms": None if p90 is None else p90 / 1000,
                     "mean_ms": None if d.moments.mean is None else d.moments.mean / 1000})
    return {"source": g.source.as_dict(), "rows": rows}


# Windows a fitted level-shift report chooses from, and how many of them it wants at most:
# enough medians for the detector, each over enough rounds to be steady (10 s at 10 Hz: 100).
FIT_WINDOWS_S = (10, 30, 60, 300, 900, 3600)
FIT_MAX_WINDOWS = 300


def fit_level_window(span: timedelta) -> int:
    """The smallest of FIT_WINDOWS_S giving at most FIT_MAX_WINDOWS windows over `span`."""
    for w in FIT_WINDOWS_S:
        if span.total_seconds() / w <= FIT_MAX_WINDOWS:
            return w
    return FIT_WINDOWS_S[-1]


def _check_level_windows(f: Filters, window_s: int) -> None:
    if window_s <= 0:
        raise QueryError("window_s", "window_s must be positive")
    if (f.end - f.start).total_seconds() / window_s > MAX_LEVEL_WINDOWS:
        raise QueryError("window_s", f"more than {MAX_LEVEL_WINDOWS} windows: widen window_s")


async def _windowed_medians(session: AsyncSession, org_id: uuid.UUID, kind: str, f: Filters,
                            window_s: int) -> tuple[Any, np.ndarray, np.ndarray]:
    """Window levels that are not quantised: exact medians from raw samples or from the
    rollups' median columns (`levels.load_levels`), never sketch bins."""
    _check_level_windows(f, window_s)
    lv = await load_levels(session, org_id, kind, f, window_s)
    if not lv.groups or not np.isfinite(lv.values[0]).any():
        return lv.source, np.zeros(0), np.zeros(0)
    return lv.source, lv.times, lv.values[0]


def _shift_rows(r: dict[str, Any], times: np.ndarray) -> list[dict[str, Any]]:
    return [{"time": datetime.fromtimestamp(int(times[s["index"]]), UTC),
             "window_index": s["index"], "step": s["step"],
             "direction": "up" if s["step"] > 0 else "down",
             "level_before": s["level_before"], "level_after": s["level_after"],
             "z": s["z"], "confidence": s["confidence"]} for s in r["shifts"]]


ShiftRows = list[dict[str, Any]]


async def _path_changes_near(session: AsyncSession, org_id: uuid.UUID, kind: str, f: Filters,
                             window_s: int, group_by: str,
                             ) -> Callable[[Hashable, ShiftRows], ShiftRows]:
    """What gives each mesh level shift of one pair the pair's nearest path change
    (docs/paths.md): a group of group_by=pair, or everything when the filters name one src
    and one dst. Other shifts are returned as they are."""
    def unchanged(_: Hashable, rows: ShiftRows) -> ShiftRows:
        return rows

    one_pair = f.src is not None and f.dst is not None and len(f.src) == 1 and len(f.dst) == 1
    if kind != "mesh" or not (group_by == "pair" or (group_by == "all" and one_pair)):
        return unchanged
    org = await session.get(Org, org_id)
    interval_s = int(((org.mesh_settings if org else None) or {}).get(
        "path_trace_interval_s", DEFAULT_MESH_SETTINGS["path_trace_interval_s"])) or 600
    before, after = timedelta(seconds=window_s), timedelta(seconds=interval_s + window_s)
    found = await path_store.changes(session, org_id, f.start - before, f.end + after,
                                     f.src, f.dst)
    by_pair: dict[tuple[uuid.UUID, uuid.UUID], list[path_store.Change]] = {}
    for c in found:
        by_pair.setdefault((c.path.src_agent_id, c.path.dst_agent_id), []).append(c)

    def attach(group: Hashable, rows: ShiftRows) -> ShiftRows:
        if group is None and f.src and f.dst:
            group = (f.src[0], f.dst[0])
        if not (isinstance(group, tuple) and len(group) == 2):
            return rows
        try:  # pair groups are (src, dst) ids as strings
            key = (uuid.UUID(str(group[0])), uuid.UUID(str(group[1])))
        except ValueError:
            return rows
        pair_changes = by_pair.get(key, [])
        for row in rows:
            c = path_store.nearest(pair_changes, row["time"], before, after)
            row["path_change"] = c.brief() if c else None
        return rows

    return attach


async def level_shift_report(session: AsyncSession, org_id: uuid.UUID, kind: str, f: Filters,
                             window_s: int, min_step: float | None, group_by: str = "all",
                             fit_window: bool = False) -> dict[str, Any]:
    """Seed 003 Lesson 11: level shifts of the window medians, with the segment levels. With
    `group_by` other than `all`, each group (e.g. each pair) is analysed on its own and
    listed under `groups` (shifts and noise only). `fit_window`: the range starts where the
    org's data does and the window is fitted to the span left (fit_level_window)."""
    if fit_window:
        first = await data_start(session, org_id, kind, f.start)
        if first is not None and f.start < first < f.end:
            f.start = first
        window_s = fit_level_window(f.end - f.start)
    _check_level_windows(f, window_s)
    fleet = await load_fleet(session, org_id)
    grouping = await _grouping(session, org_id, kind, group_by, fleet)
    lv = await load_levels(session, org_id, kind, f, window_s, grouping, fleet)
    times = lv.times
    none: dict[str, Any] = {"breakpoints": [], "segments": [], "noise": 0.0, "shifts": [],
                            "cycles_removed": []}
    per_group = []
    for j, g in enumerate(lv.groups):
        vals = lv.values[j]
        r = level_shifts(vals, min_step=min_step) if np.isfinite(vals).any() else none
        per_group.append((g, vals, r))
    out: dict[str, Any] = {"source": lv.source.as_dict(), "kind": kind, "window_s": window_s,
                           "group_by": group_by, "noise": 0.0, "cycles_removed_s": [],
                           "shifts": [], "segments": [], "medians": []}
    near = await _path_changes_near(session, org_id, kind, f, window_s, group_by)
    if group_by != "all":
        out["names"] = _agent_names(fleet, group_by, (g for g, _, _ in per_group))
        out["groups"] = [{"group": _label(g), "noise": r["noise"],
                          "cycles_removed_s": [p * window_s for p in r["cycles_removed"]],
                          "shifts": near(g, _shift_rows(r, times))}
                         for g, _, r in sorted(per_group, key=lambda x: str(x[0]))]
        return out
    if not per_group:
        return out
    _, vals, r = per_group[0]

    def ts(i: int) -> datetime:
        return datetime.fromtimestamp(int(times[i]), UTC)

    out.update({
        "noise": r["noise"], "shifts": near(None, _shift_rows(r, times)),
        "cycles_removed_s": [p * window_s for p in r["cycles_removed"]],
        "segments": [{"start": ts(s["start_index"]),
                      "end": datetime.fromtimestamp(int(times[s["end_index"]]) + window_s, UTC),
                      "level": s["level"], "step": s["step"]} for s in r["segments"]],
        "medians": [{"start": ts(i), "p50": None if not np.isfinite(v) else float(v)}
                    for i, v in enumerate(vals)]})
    return out


async def cycles(session: AsyncSession, org_id: uuid.UUID, kind: str, f: Filters,
                 window_s: int, min_period_s: float) -> dict[str, Any]:
    source, times, vals = await _windowed_medians(session, org_id, kind, f, window_s)
    return {"source": source.as_dict(), "kind": kind, "window_s": window_s,
            **cyclical_pattern(vals, float(window_s), min_period_s=min_period_s)}


async def asymmetry(session: AsyncSession, org_id: uuid.UUID, kind: str, f: Filters, level: str,
                    stat: str) -> dict[str, Any]:
    """Direction asymmetry (seed 004 Fig. 4): the statistic A->B against B->A."""
    h = await heatmap(session, org_id, kind, f, level, stat)
    cell = {(c["src"], c["dst"]): c["value"] for c in h["cells"]}
    pairs = []
    for (a, b), v in cell.items():
        if a < b and (b, a) in cell:
            w = cell[(b, a)]
            ratio = (max(v, w) / min(v, w)) if (v and w) else None
            pairs.append({"a": a, "b": b, "a_to_b": v, "b_to_a": w,
                          "difference": None if v is None or w is None else v - w,
                          "ratio": ratio})
    pairs.sort(key=lambda p: -(p["ratio"] or 0))
    return {"source": h["source"], "kind": kind, "level": level, "stat": stat, "pairs": pairs}


async def detours(session: AsyncSession, org_id: uuid.UUID, f: Filters, level: str,
                  tolerance: float, min_excess: float, max_stretch: float) -> dict[str, Any]:
    """Seed 004 §IV-B by physics, comparison and geography (`services/analytics/detours.py`):
    median RTTs per path (places at `level`, region or zone, and the two ends' providers);
    at region level each region stands in its metro where the org's geography places it."""
    if level not in ("region", "zone"):
        raise QueryError("level", "level must be region or zone")
    fleet = await load_fleet(session, org_id)
    g = await load_grouped(session, org_id, "mesh", f, lambda k: (
        fleet.level_of(k[0], level), fleet.level_of(k[1], level),
        fleet.level_of(k[0], "provider"), fleet.level_of(k[1], "provider")), fleet)
    keys = sorted(g.groups, key=str)
    p50 = g.quantiles(keys, [0.5])[:, 0]
    geo = await load_geography(session, org_id) if level == "region" else None
    paths = []
    for k, v in zip(keys, p50, strict=True):
        if not np.isfinite(v):
            continue
        src, dst, sp, dp = path_key(*k)
        places = ((geo.metro(sp, src), geo.metro(dp, dst)) if geo is not None else ("", ""))
        paths.append(PathRtt(src, dst, sp, dp, float(v), *places))
    floors = geo.metro_floors_us({x for p in paths for x in (p.a, p.b)}) if geo else None
    return {"source": g.source.as_dict(), "level": level, "tolerance": tolerance,
            "min_excess": min_excess, "max_stretch": max_stretch,
            "detours": find_detours(paths, tolerance=tolerance, min_excess=min_excess,
                                    floors_us=floors, max_stretch=max_stretch)}


async def stretch(session: AsyncSession, org_id: uuid.UUID, f: Filters) -> dict[str, Any]:
    """Every region path's distance, its physical floor (light in fibre over the great
    circle, there and back) and its stretch, p50 RTT / floor; regions the org's geography
    does not place are listed apart."""
    fleet = await load_fleet(session, org_id)
    g = await load_grouped(session, org_id, "mesh", f, lambda k: (
        fleet.level_of(k[0], "provider"), fleet.level_of(k[0], "region"),
        fleet.level_of(k[1], "provider"), fleet.level_of(k[1], "region")), fleet)
    keys = sorted(g.groups, key=str)
    p50 = g.quantiles(keys, [0.5])[:, 0]
    geo = await load_geography(session, org_id)
    pairs: list[dict[str, Any]] = []
    unplaced: set[tuple[str, str]] = set()
    for (sp, src, dp, dst), v in zip(keys, p50, strict=True):
        a, b = geo.place(str(sp), str(src)), geo.place(str(dp), str(dst))
        for prov, reg, p in ((sp, src, a), (dp, dst, b)):
            if p is None:
                unplaced.add((str(prov), str(reg)))
        if a is None or b is None or not np.isfinite(v):
            continue
        km = distance_km(a, b)
        floor = floor_rtt_us(km)
        pairs.append({"src_provider": str(sp), "src": str(src), "dst_provider": str(dp),
                      "dst": str(dst), "src_metro": a.metro, "dst_metro": b.metro,
                      "distance_km": km, "floor_us": floor, "p50_us": float(v),
                      # Within one metro the floor is a few µs: a ratio to it says nothing.
                      "stretch": float(v) / floor if km >= MIN_STRETCH_KM else None})
    pairs.sort(key=lambda p: -(p["stretch"] or 0))
    return {"source": g.source.as_dict(), "fibre_rtt_us_per_km": FIBRE_RTT_US_PER_KM,
            "pairs": pairs, "unplaced": [{"provider": p, "region": r}
                                         for p, r in sorted(unplaced)]}


async def welch(session: AsyncSession, org_id: uuid.UUID, kind: str, f: Filters, group_by: str,
                a: str, b: str) -> dict[str, Any]:
    fleet = await load_fleet(session, org_id)
    grouping = await _grouping(session, org_id, kind, group_by, fleet)
    g = await load_grouped(session, org_id, kind, f, grouping, fleet)
    by_label = {str(_label(k)) if not isinstance(k, tuple) else ",".join(map(str, _label(k))): d
                for k, d in g.groups.items()}
    for name, val in (("a", a), ("b", b)):
        if val not in by_label:
            raise QueryError(name, f"no samples for group {val!r}; groups: "
                             + ", ".join(sorted(by_label)[:20]))
    try:
        res = welch_t_test(by_label[a], by_label[b])
    except ValueError as exc:
        raise QueryError("a", str(exc)) from exc
    return {"source": g.source.as_dict(), "kind": kind, "group_by": group_by, "a": a, "b": b,
            **res}


async def cv_rmse_pairs(session: AsyncSession, org_id: uuid.UUID, kind: str, f: Filters,
                        a: tuple[uuid.UUID, uuid.UUID], b: tuple[uuid.UUID, uuid.UUID],
                        window_s: int) -> dict[str, Any]:
    """Seed 004 §IV-C: CV_RMSE between two pairs' windowed means."""
    _check_window(f, window_s)
    fa = Filters(**{**f.__dict__, "src": [a[0]], "dst": [a[1]]})
    fb = Filters(**{**f.__dict__, "src": [b[0]], "dst": [b[1]]})
    ga = await load_grouped(session, org_id, kind, fa, lambda k: "x", window_s=window_s)
    gb = await load_grouped(session, org_id, kind, fb, lambda k: "x", window_s=window_s)
    ma = {w: d.moments.mean for (_, w), d in ga.groups.items()}
    mb = {w: d.moments.mean for (_, w), d in gb.groups.items()}
    common = sorted(set(ma) & set(mb))
    x = np.array([np.nan if ma[w] is None else ma[w] for w in common], dtype=float)
    y = np.array([np.nan if mb[w] is None else mb[w] for w in common], dtype=float)
    return {"source": ga.source.as_dict(), "kind": kind, "window_s": window_s,
            "windows": len(common), "cv_rmse": cv_rmse(x, y)}


# The unit of each kind's values, for CSV column names (a spreadsheet has no schema to ask).
VALUE_UNITS = {"mesh": "us", "quorum": "us", "storage": "us", "throughput": "bytes_per_s"}


def series_csv(result: dict[str, Any]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    cols = ["start", "samples", "count", "loss_rate", "mean", "std", "min", "max",
            *result["percentiles"]]
    valued = {"mean", "std", "min", "max", *result["percentiles"]}
    unit = VALUE_UNITS[result["kind"]]
    beyond = [f"{p}_beyond" for p in result["percentiles"]]
    w.writerow(["group", *(f"{c}_{unit}" if c in valued else c for c in cols), *beyond])
    for grp in result["groups"]:
        label = grp["group"] if not isinstance(grp["group"], list) else "->".join(
            map(str, grp["group"]))
        for row in grp["windows"]:
            w.writerow([label] + [row["start"].isoformat() if c == "start" else
                                  ("" if row.get(c) is None else row.get(c)) for c in cols]
                       + [row.get("beyond", {}).get(p, "") for p in result["percentiles"]])
    return buf.getvalue()


def _place_of(fleet: Fleet, ids: list[uuid.UUID] | None) -> str:
    """What a set of agents is, for a file name: one agent's name, the zone, region or
    provider whose agents they all are, or how many they are."""
    if not ids:
        return "all"
    chosen = set(ids)
    if len(chosen) == 1:
        return fleet.level_of(next(iter(chosen)), "node")
    for level in ("zone", "region", "provider"):
        places = {fleet.level_of(i, level) for i in chosen}
        if len(places) == 1:
            (place,) = places
            if chosen == {i for i in fleet.agents if fleet.level_of(i, level) == place}:
                return place
    return f"{len(chosen)}-agents"


async def series_csv_filename(session: AsyncSession, org_id: uuid.UUID, kind: str,
                              f: Filters) -> str:
    """stormwatch-mesh-<src>-to-<dst>-<UTC start>-<UTC end>.csv: exports of different pairs
    and ranges land in different files."""
    fleet = await load_fleet(session, org_id)
    who = (f"{_place_of(fleet, f.src)}-to-{_place_of(fleet, f.dst)}" if KIND_SPECS[kind].pair
           else _place_of(fleet, f.src or f.agents))
    stamp = "-".join(t.astimezone(UTC).strftime("%Y%m%dT%H%MZ") for t in (f.start, f.end))
    return re.sub(r"[^A-Za-z0-9._-]+", "_", f"stormwatch-{kind}-{who}-{stamp}") + ".csv"


async def loss_reasons(session: AsyncSession, org_id: uuid.UUID, f: Filters) -> dict[str, Any]:
    """Why the selected pairs' lost rounds were lost: counts by status (timeout, refused,
    error, corrupt, wrong_peer), as the agents recorded them, over the part of the range raw samples
    hold."""
    counts, start, end = await mesh_status_counts(session, org_id, f)
    reasons = [{"status": code, "reason": name, "count": counts.get(code, 0)}
               for code, name in sorted(MESH_STATUSES.items()) if code]
    return {"start": start, "end": end, "complete": start <= f.start,
            "lost": sum(counts.values()), "reasons": reasons}
