"""Window statistics per series, from raw samples (the newest windows; exact percentiles
computed by PostgreSQL's percentile_cont) or from rollups (older windows; merged DDSketches
through the analytics loader). Both give `WinStat`s, so one condition code serves both."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.services.alerts.metrics import MetricKind, parse_percentile
from stormwatch.services.alerts.scope import SeriesKey
from stormwatch.services.analytics.filters import KIND_SPECS, Filters, Fleet
from stormwatch.services.analytics.grouped import load_grouped
from stormwatch.services.analytics.raw import ADJUSTED_RAW, MESH_RAW_FROM, mesh_series_ids
from stormwatch.services.analytics.sketches import merge_sketches
from stormwatch.services.analytics.stats import Distribution, Moments
from stormwatch.services.geography.places import load_geography


@dataclass
class WinStat:
    """Mergeable facts about one series in one window, plus the percentiles asked for."""

    samples: int = 0
    count: int = 0
    failures: int = 0
    total: float = 0.0
    total_sq: float = 0.0
    minimum: float = math.inf
    maximum: float = -math.inf
    pcts: dict[float, float | None] = field(default_factory=dict)

    def value(self, statistic: str) -> float | None:
        if statistic in ("loss_rate", "failure_rate"):
            return self.failures / self.samples if self.samples else None
        if statistic in ("silence_s", "changes"):
            return self.total if self.samples else None
        if self.count == 0:
            return None
        if statistic == "mean":
            return self.total / self.count
        if statistic == "std":
            if self.count < 2:
                return 0.0
            var = (self.total_sq - self.total * self.total / self.count) / (self.count - 1)
            return math.sqrt(max(var, 0.0))
        if statistic == "min":
            return self.minimum
        if statistic == "max":
            return self.maximum
        p = parse_percentile(statistic)
        if p is None:
            raise ValueError(f"unknown statistic {statistic!r}")
        return self.pcts.get(p)

    def scaled(self, k: float) -> WinStat:
        """The same window with every value multiplied by k > 0 (counts unchanged)."""
        return WinStat(self.samples, self.count, self.failures, self.total * k,
                       self.total_sq * k * k, self.minimum * k, self.maximum * k,
                       {p: None if v is None else v * k for p, v in self.pcts.items()})

    @classmethod
    def of(cls, d: Distribution, percentiles: Sequence[float]) -> WinStat:
        m = d.moments
        qs = d.quantiles([p / 100 for p in percentiles]) if percentiles else []
        return cls(m.samples, m.count, m.failures, m.total, m.total_sq, m.minimum, m.maximum,
                   dict(zip(percentiles, qs, strict=True)))


# (org, series key) -> window start (epoch s) -> stats
Windows = dict[tuple[uuid.UUID, SeriesKey], dict[int, WinStat]]


def percentiles_of(statistics: Iterable[str]) -> list[float]:
    return sorted({p for s in statistics if (p := parse_percentile(s)) is not None})


async def raw_windows(session: AsyncSession, orgs: Sequence[uuid.UUID], metric: MetricKind,
                      window_s: int, start: datetime, end: datetime,
                      percentiles: Sequence[float], where: Sequence[str] = (),
                      where_params: dict[str, Any] | None = None) -> Windows:
    """Every series of the orgs in [start, end), per window of window_s, straight from the raw
    samples: one query for all orgs, series and windows (percentile_cont is exact, with the
    same linear interpolation as numpy's)."""
    spec = KIND_SPECS[metric.kind or "mesh"]
    keys = ", ".join(spec.keys)
    value = ADJUSTED_RAW if metric.adjusted else spec.raw_value
    args: dict[str, Any] = {**(where_params or {}), "orgs": list(orgs), "w": window_s,
                            "s": start, "e": end, "qs": [p / 100 for p in percentiles]}
    if spec is KIND_SPECS["mesh"]:
        # Mesh rows by series id: the orgs' series in scope first (migration 0014).
        series = await mesh_series_ids(session, "org_id = ANY(:orgs)", where, args)
        if not series:
            return {}
        args["sids"] = list(series)
        source = f"{MESH_RAW_FROM} m"
    else:
        source = (f"{spec.raw_table} WHERE org_id = ANY(:orgs) AND time >= :s AND time < :e"
                  + "".join(f" AND {c}" for c in where))
    pct = ("percentile_cont(CAST(:qs AS float8[])) WITHIN GROUP (ORDER BY v)" if percentiles
           else "NULL::float8[]")
    # The percentiles sort each window's samples: a fleet's window (576 pairs x 300 samples,
    # ~50 MB to sort) spills to disk under the default 4 MB.
    await session.execute(text("SET LOCAL work_mem = '64MB'"))
    rows = (await session.execute(text(
        f"SELECT org_id, {keys}, ws, count(*), count(v), "
        f"count(*) FILTER (WHERE failed), sum(v), sum(v * v), min(v), max(v), {pct} "
        f"FROM (SELECT org_id, {keys}, "
        f"(floor(extract(epoch FROM time)::float8 / :w) * :w)::bigint AS ws, "
        f"({value})::float8 AS v, ({spec.raw_failure}) AS failed FROM {source}"
        f") t GROUP BY org_id, {keys}, ws"), args)).all()
    nk = len(spec.keys)
    out: Windows = {}
    for r in rows:
        key = (r[0], tuple(r[1:1 + nk]))
        c = r[1 + nk:]
        qv = c[8] or [None] * len(percentiles)
        out.setdefault(key, {})[int(c[0])] = WinStat(
            int(c[1]), int(c[2]), int(c[3]), float(c[4] or 0.0), float(c[5] or 0.0),
            math.inf if c[6] is None else float(c[6]),
            -math.inf if c[7] is None else float(c[7]),
            dict(zip(percentiles, (None if q is None else float(q) for q in qv), strict=True)))
    return out


async def rollup_windows(session: AsyncSession, org_id: uuid.UUID, metric: MetricKind,
                         f: Filters, fleet: Fleet, window_s: int,
                         percentiles: Sequence[float]) -> Windows:
    """Windows of the series in scope from the analytics loader (rollups with mergeable
    sketches, or raw for short ranges), for backtests over days."""
    assert metric.kind is not None
    g = await load_grouped(session, org_id, metric.kind, f, lambda k: k, fleet,
                           window_s=window_s)
    out: Windows = {}
    keys = list(g.groups)
    qv = g.quantiles(keys, [p / 100 for p in percentiles]) if percentiles and keys else None
    for i, (k, w) in enumerate(keys):
        d = g.groups[(k, w)]
        m = d.moments
        pcts: dict[float, float | None] = {}
        if qv is not None:
            pcts = {p: (float(v) if np.isfinite(v) else None)
                    for p, v in zip(percentiles, qv[i], strict=True)}
        out.setdefault((org_id, tuple(k)), {})[int(w)] = WinStat(
            m.samples, m.count, m.failures, m.total, m.total_sq, m.minimum, m.maximum, pcts)
    return out


async def hourly_distributions(session: AsyncSession, org_id: uuid.UUID, metric: MetricKind,
                               f: Filters, fleet: Fleet
                               ) -> dict[SeriesKey, dict[int, Distribution]]:
    """Hour-by-hour distributions per series (rollup sketches), to merge into baselines."""
    assert metric.kind is not None
    g = await load_grouped(session, org_id, metric.kind, f, lambda k: k, fleet, window_s=3600)
    out: dict[SeriesKey, dict[int, Distribution]] = {}
    for (k, w), d in g.groups.items():
        out.setdefault(tuple(k), {})[int(w)] = d
    return out


def merge_distributions(dists: Sequence[Distribution]) -> Distribution:
    """One distribution of several (sketches merged bin by bin, exact values concatenated)."""
    m = Moments()
    for d in dists:
        m.add(d.moments)
    if all(d.values is not None for d in dists):
        vals = np.concatenate([d.values for d in dists if d.values is not None]) if dists \
            else np.zeros(0)
        out = Distribution.exact(vals)
        out.moments = m
        return out
    sk = [d.sketch for d in dists if d.sketch is not None]
    return Distribution.sketched(merge_sketches(sk), m)


async def agent_last_heard(session: AsyncSession, orgs: Sequence[uuid.UUID]
                           ) -> dict[tuple[uuid.UUID, SeriesKey], datetime]:
    """When each agent last talked to the API: agents.last_seen moves on every batch and
    config poll (throttled to 15 s), first_seen stands in before either."""
    rows = (await session.execute(text(
        "SELECT org_id, id, coalesce(last_seen, first_seen) FROM agents "
        "WHERE org_id = ANY(:orgs)"), {"orgs": list(orgs)})).all()
    return {(r[0], (r[1],)): r[2] for r in rows}


def silence_windows(heard: dict[tuple[uuid.UUID, SeriesKey], datetime], window_s: int,
                    starts: Sequence[int], now: int) -> Windows:
    """Silence at each window's end (or now, for the open window), from the time each agent
    was last heard."""
    out: Windows = {}
    for key, last in heard.items():
        t_last = last.timestamp()
        out[key] = {w: WinStat(samples=1, count=1,
                               total=max(0.0, min(w + window_s, now) - t_last))
                    for w in starts}
    return out


async def agent_activity(session: AsyncSession, org_id: uuid.UUID, start: datetime,
                         end: datetime) -> dict[uuid.UUID, np.ndarray]:
    """Minutes (epoch s, sorted) in which each agent sent any sample, from minute rollups
    and, for the newest part not rolled yet, raw samples: the past silences a backtest of
    agent silence replays."""
    rows = (await session.execute(text(
        "SELECT agent, array_agg(DISTINCT m) FROM ("
        "SELECT src_agent_id AS agent, extract(epoch FROM bucket_start)::bigint AS m "
        "FROM mesh_rollups WHERE org_id = :o AND bucket_s = 60 AND bucket_start >= :s "
        "AND bucket_start < :e UNION ALL "
        "SELECT agent_id, extract(epoch FROM bucket_start)::bigint FROM quorum_rollups "
        "WHERE org_id = :o AND bucket_s = 60 AND bucket_start >= :s AND bucket_start < :e "
        "UNION ALL SELECT agent_id, extract(epoch FROM bucket_start)::bigint "
        "FROM storage_rollups WHERE org_id = :o AND bucket_s = 60 AND bucket_start >= :s "
        "AND bucket_start < :e UNION ALL "
        "SELECT DISTINCT s.src_agent_id, r.m FROM (SELECT DISTINCT series_id, "
        "(floor(extract(epoch FROM time) / 60) * 60)::bigint AS m FROM mesh_raw "
        "WHERE series_id IN (SELECT id FROM mesh_series WHERE org_id = :o) "
        "AND time >= greatest(:s, :e - interval '15 min') AND time < :e) r "
        "JOIN mesh_series s ON s.id = r.series_id) a GROUP BY agent"),
        {"o": org_id, "s": start, "e": end})).all()
    return {r[0]: np.sort(np.asarray(r[1], dtype=np.int64)) for r in rows}


def replayed_silence(activity: dict[uuid.UUID, np.ndarray], org_id: uuid.UUID,
                     agents: Iterable[uuid.UUID], window_s: int, starts: np.ndarray,
                     first_seen: dict[uuid.UUID, datetime]) -> Windows:
    """Silence at each window end from minute activity (a minute with samples counts as
    heard at its end): minute resolution, enough for silences of minutes."""
    out: Windows = {}
    for a in agents:
        mins = activity.get(a, np.zeros(0, np.int64))
        ends = starts + window_s
        heard_end = mins + 60
        idx = np.searchsorted(heard_end, ends, side="right") - 1
        fs = first_seen.get(a)
        base = fs.timestamp() if fs else float(starts[0]) if starts.size else 0.0
        last = np.where(idx >= 0, heard_end[np.maximum(idx, 0)] if mins.size else base, base)
        last = np.maximum(last, base)
        sil = np.maximum(ends - last, 0.0)
        out[(org_id, (a,))] = {int(w): WinStat(samples=1, count=1, total=float(s))
                               for w, s in zip(starts.tolist(), sil.tolist(), strict=True)
                               if w + window_s > base}
    return out


async def pair_floors(session: AsyncSession, org_id: uuid.UUID, fleet: Fleet
                      ) -> dict[tuple[uuid.UUID, uuid.UUID], float]:
    """The physical floor (µs) of every pair of the fleet whose places are known and at
    least MIN_STRETCH_KM apart (services/geography)."""
    geo = await load_geography(session, org_id)
    places = {a.id: (a.provider, a.region) for a in fleet.agents.values()}
    out: dict[tuple[uuid.UUID, uuid.UUID], float] = {}
    for s, ps in places.items():
        for d, pd in places.items():
            if s != d and (f := geo.floor_us(ps, pd)) is not None:
                out[(s, d)] = f
    return out


def per_floor(data: Windows, floors: dict[uuid.UUID, dict[tuple[uuid.UUID, uuid.UUID], float]]
              ) -> Windows:
    """Pair windows divided by the pair's floor (stretch); pairs without one are dropped."""
    out: Windows = {}
    for (org, key), by_w in data.items():
        f = floors.get(org, {}).get((key[0], key[1]))
        if f:
            out[(org, key)] = {t: ws.scaled(1.0 / f) for t, ws in by_w.items()}
    return out


async def path_change_windows(session: AsyncSession, orgs: Sequence[uuid.UUID], window_s: int,
                              start: int, end: int, fill: bool) -> Windows:
    """Path changes per pair and window, each counted in the window the server received the
    trace that opened it (a change is known only then, and live evaluation must not miss
    one that arrives after its window was judged). fill: every traced pair gets 0 in the
    windows without a change (live cycles: a few windows); else it is listed with only the
    windows that hold one."""
    args = {"orgs": list(orgs), "s": from_epoch(start), "e": from_epoch(end), "w": window_s}
    rows = (await session.execute(text(
        "SELECT p.org_id, p.src_agent_id, p.dst_agent_id, "
        "(floor(extract(epoch FROM min(t.received_at)) / :w) * :w)::bigint AS ws "
        "FROM pair_paths p JOIN path_traces t ON t.org_id = p.org_id "
        "AND t.src_agent_id = p.src_agent_id AND t.dst_agent_id = p.dst_agent_id "
        "AND t.started_at = p.first_seen AND t.path_id = p.id "
        "WHERE p.org_id = ANY(:orgs) AND p.prev_path_id IS NOT NULL "
        "AND p.diff_ttl IS NOT NULL AND p.first_seen >= CAST(:s AS timestamptz) - "
        "interval '1 day' AND p.first_seen < :e GROUP BY p.id, p.org_id, p.src_agent_id, "
        "p.dst_agent_id HAVING min(t.received_at) >= :s AND min(t.received_at) < :e"),
        args)).all()
    traced = (await session.execute(text(
        "SELECT DISTINCT org_id, src_agent_id, dst_agent_id FROM pair_paths "
        "WHERE org_id = ANY(:orgs)"), {"orgs": list(orgs)})).all()
    out: Windows = {(o, (s, d)): {w: WinStat(samples=1, count=1, total=0.0)
                                  for w in range(start, end, window_s)} if fill else {}
                    for o, s, d in traced}
    for o, s, d, ws in rows:
        by_w = out.setdefault((o, (s, d)), {})
        got = by_w.get(int(ws))
        by_w[int(ws)] = WinStat(samples=1, count=1, total=(got.total if got else 0.0) + 1)
    return out


def epoch(t: datetime) -> int:
    return int(t.timestamp())


def from_epoch(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def stat_percentiles(statistic: str) -> list[float]:
    p = parse_percentile(statistic)
    return [] if p is None else [p]


def merged_value(dists: Sequence[Distribution], statistic: str) -> float | None:
    if not dists:
        return None
    d = merge_distributions(dists)
    ps = stat_percentiles(statistic)
    return WinStat.of(d, ps).value(statistic)

