"""Queries behind the analysis API: they pick raw samples or a rollup level for the range,
filter by the caller's org and the agents' metadata, and return exact or sketched
distributions per group (and per window). No FastAPI here."""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import numpy as np
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.models.agent import TOPOLOGY_CLASSES
from stormwatch.services.analytics.sketches import GroupedBins, Sketch, decode, grouped_quantiles
from stormwatch.services.analytics.stats import Distribution, Moments

Kind = Literal["mesh", "quorum", "storage", "throughput"]
Resolution = Literal["auto", "raw", "1m", "1h", "1d"]
RES_SECONDS = {"1m": 60, "1h": 3600, "1d": 86400}
# Raw answers are exact but cost a row per sample; beyond these ranges rollups answer.
RAW_MAX_FEW_SERIES = timedelta(hours=3)
RAW_MAX_FLEET = timedelta(minutes=15)
FEW_SERIES = 8
MINUTE_MAX = timedelta(days=3)
HOUR_MAX = timedelta(days=60)
RAW_ROW_LIMIT = 5_000_000
# Rollup rows a query may merge when the resolution is chosen automatically.
ROLLUP_ROW_BUDGET = 50_000
# Beyond this span, hourly answers merge day-to-date sketches rather than every hour's.
DAY_TO_DATE_MIN_SPAN = timedelta(hours=4)


class QueryError(ValueError):
    """Bad query parameters (reported as 422 naming the parameter)."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class KindSpec:
    raw_table: str
    table: str
    keys: tuple[str, ...]
    value_prefix: str
    raw_value: str
    raw_failure: str
    pair: bool  # series are (src, dst) pairs of agents


KIND_SPECS: dict[str, KindSpec] = {
    "mesh": KindSpec("mesh_samples", "mesh_rollups", ("src_agent_id", "dst_agent_id",
                     "payload_bytes"), "rtt_us", "CASE WHEN status = 0 THEN rtt_us END",
                     "status <> 0", True),
    "quorum": KindSpec("quorum_samples", "quorum_rollups", ("agent_id", "group_name", "k", "n"),
                       "latency_us", "CASE WHEN status = 0 THEN latency_us END", "status <> 0",
                       False),
    "storage": KindSpec("storage_samples", "storage_rollups",
                        ("agent_id", "target_id", "op", "variant", "content", "size_bytes",
                         "copies", "concurrency"), "latency_us",
                        "CASE WHEN status = 0 THEN latency_us END", "status <> 0", False),
    "throughput": KindSpec("throughput_samples", "throughput_rollups",
                           ("src_agent_id", "dst_agent_id", "proto", "direction"), "bytes_per_s",
                           "bytes_per_s", "false", True),
}
# Query parameter names of the kind-specific columns, for error messages.
PARAM_OF_COLUMN = {"target_id": "target"}
ADJUSTED_RAW = ("CASE WHEN status = 0 AND rtt_us IS NOT NULL "
                "THEN greatest(latency_us - rtt_us, 0) END")


@dataclass
class Filters:
    start: datetime
    end: datetime
    agents: list[uuid.UUID] | None = None  # every agent of the series must be one of these
    src: list[uuid.UUID] | None = None
    dst: list[uuid.UUID] | None = None
    regions: list[str] | None = None
    zones: list[str] | None = None
    providers: list[str] | None = None
    topology_class: list[str] | None = None
    payload_bytes: list[int] | None = None
    # kind-specific equality filters, e.g. {"op": ["put"], "size_bytes": [1024]}
    extra: dict[str, list[Any]] = field(default_factory=dict)
    resolution: Resolution = "auto"
    adjusted: bool = False  # storage: RTT-adjusted latency

    def validate(self) -> None:
        if self.start.tzinfo is None or self.end.tzinfo is None:
            raise QueryError("start", "start and end must carry a UTC offset")
        if self.end <= self.start:
            raise QueryError("end", "end must be after start")


@dataclass
class AgentInfo:
    id: uuid.UUID
    name: str
    provider: str
    region: str
    zone: str


@dataclass
class Fleet:
    agents: dict[uuid.UUID, AgentInfo]
    topology: dict[tuple[uuid.UUID, uuid.UUID], str]

    def level_of(self, agent: uuid.UUID, level: str) -> str:
        a = self.agents.get(agent)
        if a is None:
            return str(agent)
        if level == "node":
            return a.name
        if level == "zone":
            return a.zone or f"{a.region}/?"
        if level == "region":
            return a.region or "?"
        if level == "provider":
            return a.provider or "?"
        raise QueryError("level", f"unknown level {level!r}")

    def topology_of(self, src: uuid.UUID, dst: uuid.UUID) -> str:
        if src == dst:
            return "self"
        return self.topology.get((src, dst), "unknown")


async def load_fleet(session: AsyncSession, org_id: uuid.UUID) -> Fleet:
    rows = (await session.execute(
        text("SELECT id, name, provider, region, zone FROM agents WHERE org_id = :o"),
        {"o": org_id})).all()
    agents = {r.id: AgentInfo(r.id, r.name, r.provider, r.region, r.zone) for r in rows}
    topo = {(r.src_agent_id, r.dst_agent_id): r.topology_class for r in (await session.execute(
        text("SELECT src_agent_id, dst_agent_id, topology_class FROM agent_pairs "
             "WHERE org_id = :o"), {"o": org_id})).all()}
    return Fleet(agents, topo)


@dataclass
class Source:
    resolution: Literal["raw", "1m", "1h", "1d"]
    start: datetime
    end: datetime

    @property
    def bucket_s(self) -> int | None:
        return RES_SECONDS.get(self.resolution)

    def as_dict(self) -> dict[str, Any]:
        return {"resolution": self.resolution, "start": self.start, "end": self.end,
                "exact": self.resolution == "raw"}


def _floor(t: datetime, s: int) -> datetime:
    ts = math.floor(t.timestamp())
    return datetime.fromtimestamp(ts - ts % s, UTC)


def _ceil(t: datetime, s: int) -> datetime:
    ts = math.ceil(t.timestamp())
    return datetime.fromtimestamp(ts + (-ts) % s, UTC)


def choose_source(f: Filters, few_series: bool, window_s: int | None = None,
                  n_series: int | None = None) -> Source:
    """Raw for short ranges; otherwise the finest rollup level whose row count for the
    selected series stays within ROLLUP_ROW_BUDGET (and no coarser than the window)."""
    span = f.end - f.start
    res: str = f.resolution
    if res == "auto":
        raw_max = RAW_MAX_FEW_SERIES if few_series else RAW_MAX_FLEET
        if span <= raw_max:
            res = "raw"
        else:
            series = max(n_series or 1, 1)
            res = "1d"
            for cand in ("1m", "1h", "1d"):
                if series * span.total_seconds() / RES_SECONDS[cand] <= ROLLUP_ROW_BUDGET:
                    res = cand
                    break
        # Windows narrower than the rollup step would be empty or uneven.
        while window_s is not None and res != "raw" and (
                RES_SECONDS[res] > window_s or window_s % RES_SECONDS[res]):
            res = {"1d": "1h", "1h": "1m", "1m": "raw"}[res]
        # Aligned windows built from a coarser level hold exactly the same samples: use the
        # coarsest level that divides the window (fewer rows for the same answer).
        if window_s is not None and res not in ("raw", "1d"):
            for cand in ("1d", "1h"):
                step = RES_SECONDS[cand]
                if RES_SECONDS[res] < step <= window_s and window_s % step == 0:
                    res = cand
                    break
    if res == "raw":
        return Source("raw", f.start, f.end)
    s = RES_SECONDS[res]
    if window_s is not None and window_s % s:
        raise QueryError("window_s", f"window_s must be a multiple of {s} s at resolution {res}")
    return Source(res, _floor(f.start, s), _ceil(f.end, s))  # type: ignore[arg-type]


def _selected_agents(fleet: Fleet, f: Filters) -> set[uuid.UUID] | None:
    """Agents allowed by the metadata filters (None: no restriction)."""
    if not (f.agents or f.regions or f.zones or f.providers):
        return None
    out = set()
    for a in fleet.agents.values():
        if f.agents and a.id not in f.agents:
            continue
        if f.regions and a.region not in f.regions:
            continue
        if f.zones and a.zone not in f.zones:
            continue
        if f.providers and a.provider not in f.providers:
            continue
        out.add(a.id)
    return out


def _restrict(allowed: set[uuid.UUID] | None, ids: list[uuid.UUID] | None
              ) -> set[uuid.UUID] | None:
    if ids is None:
        return allowed
    return set(ids) if allowed is None else set(ids) & allowed


def _where(spec: KindSpec, fleet: Fleet, f: Filters, params: dict[str, Any]
           ) -> tuple[list[str], int]:
    """SQL conditions for the filters, and an estimate of how many series they select."""
    _check_applicable(spec, f)
    clauses: list[str] = []
    n_agents = max(len(fleet.agents), 1)
    n_series = n_agents
    allowed = _selected_agents(fleet, f)
    if spec.pair:
        srcs = _restrict(allowed, f.src)
        dsts = _restrict(allowed, f.dst)
        n_series = (n_agents if srcs is None else len(srcs)) * (
            n_agents if dsts is None else len(dsts))
        if srcs is not None:
            clauses.append("src_agent_id = ANY(:srcs)")
            params["srcs"] = list(srcs)
        if dsts is not None:
            clauses.append("dst_agent_id = ANY(:dsts)")
            params["dsts"] = list(dsts)
        if f.topology_class:
            pairs = [(s, d) for s in fleet.agents for d in fleet.agents
                     if fleet.topology_of(s, d) in f.topology_class]
            params["tc_src"] = [p[0] for p in pairs]
            params["tc_dst"] = [p[1] for p in pairs]
            clauses.append("(src_agent_id, dst_agent_id) IN (SELECT * FROM unnest("
                           "CAST(:tc_src AS uuid[]), CAST(:tc_dst AS uuid[])))")
            n_series = min(n_series, len(pairs))
    else:
        agents = allowed
        if f.src is not None:
            agents = set(f.src) if agents is None else agents & set(f.src)
        if agents is not None:
            clauses.append("agent_id = ANY(:agents)")
            params["agents"] = list(agents)
            n_series = len(agents)
        # several series per agent (groups, targets x ops x sizes)
        n_series *= 4 if kind_is_quorum(spec) else 24
    if f.payload_bytes and "payload_bytes" in spec.keys:
        clauses.append("payload_bytes = ANY(:payload)")
        params["payload"] = f.payload_bytes
    for i, (col, vals) in enumerate(sorted(f.extra.items())):
        if col not in spec.keys:
            name = PARAM_OF_COLUMN.get(col, col)
            raise QueryError(name, f"{name} does not apply to this kind of series")
        clauses.append(f"{col} = ANY(:x{i})")
        params[f"x{i}"] = vals
    return clauses, n_series


def _check_applicable(spec: KindSpec, f: Filters) -> None:
    """A filter that cannot select anything of this kind is a mistake, not an empty answer."""
    if not spec.pair:
        if f.dst:
            raise QueryError("dst", "dst applies to pair series (mesh, throughput); use src "
                             "for the agent of quorum and storage series")
        if f.topology_class:
            raise QueryError("topology_class",
                             "topology_class applies to pair series (mesh, throughput) only")
    if f.payload_bytes and "payload_bytes" not in spec.keys:
        raise QueryError("payload_bytes", "payload_bytes applies to mesh series only")
    unknown = sorted(set(f.topology_class or ()) - set(TOPOLOGY_CLASSES))
    if unknown:
        raise QueryError("topology_class", f"unknown topology class {unknown[0]!r}; one of "
                         + ", ".join(TOPOLOGY_CLASSES))


def kind_is_quorum(spec: KindSpec) -> bool:
    return spec.raw_table == "quorum_samples"


def few_series(spec: KindSpec, f: Filters) -> bool:
    if spec.pair:
        return bool(f.src and f.dst and len(f.src) * len(f.dst) <= FEW_SERIES)
    return bool(f.src and len(f.src) <= FEW_SERIES)


GroupFn = Callable[[tuple[Any, ...]], Any]


@dataclass
class Grouped:
    """Distributions per group key (and per window start when windowed)."""

    source: Source
    groups: dict[Any, Distribution]

    def quantiles(self, keys: Sequence[Any], qs: Sequence[float]) -> np.ndarray:
        """Quantiles for many groups at once (groups x qs), NaN where empty. Sketched groups
        share one count matrix, so this is one vectorised pass instead of a loop."""
        out = np.full((len(keys), len(qs)), np.nan)
        dists = [self.groups[k] for k in keys]
        sk = [d.sketch for d in dists]
        if dists and all(s is not None for s in sk):
            lo = min(s.offset for s in sk)  # type: ignore[union-attr]
            hi = max(s.offset + s.counts.size for s in sk)  # type: ignore[union-attr]
            mat = np.zeros((len(sk), max(hi - lo, 1)))
            zero = np.zeros(len(sk))
            for i, s in enumerate(sk):
                assert s is not None
                if s.counts.size:
                    mat[i, s.offset - lo : s.offset - lo + s.counts.size] = s.counts
                zero[i] = s.zero_count
            out = grouped_quantiles(lo, mat, zero, qs)
            mins = np.array([d.moments.minimum for d in dists])[:, None]
            maxs = np.array([d.moments.maximum for d in dists])[:, None]
            return np.where(np.isfinite(out), np.clip(out, mins, maxs), np.nan)
        for i, d in enumerate(dists):
            out[i] = [np.nan if v is None else v for v in d.quantiles(qs)]
        return out


async def load_grouped(session: AsyncSession, org_id: uuid.UUID, kind: str, f: Filters,
                       group: GroupFn, fleet: Fleet | None = None,
                       window_s: int | None = None) -> Grouped:
    """Distributions per group(series key) — or per (group, window start) with window_s."""
    f.validate()
    spec = KIND_SPECS[kind]
    fleet = fleet or await load_fleet(session, org_id)
    params: dict[str, Any] = {"org": org_id}
    where, n_series = _where(spec, fleet, f, params)
    source = choose_source(f, few_series(spec, f), window_s, n_series)
    params.update(s=source.start, e=source.end)
    nk = len(spec.keys)
    keys_sql = ", ".join(spec.keys)
    prefix = spec.value_prefix
    if kind == "storage" and f.adjusted:
        prefix = "adj_latency_us"
    if source.resolution == "raw":
        value_sql = ADJUSTED_RAW if (kind == "storage" and f.adjusted) else spec.raw_value
        sql = (f"SELECT {keys_sql}, extract(epoch FROM time)::float8 AS t, "
               f"({value_sql})::float8 AS v, ({spec.raw_failure}) AS failed "
               f"FROM {spec.raw_table} WHERE org_id = :org AND time >= :s AND time < :e"
               + "".join(f" AND {c}" for c in where) + f" LIMIT {RAW_ROW_LIMIT + 1}")
        rows = (await session.execute(text(sql), params)).all()
        if len(rows) > RAW_ROW_LIMIT:
            raise QueryError("resolution", "more than 5 million raw samples in range: narrow "
                             "the range or filters, or use a rollup resolution")
        return Grouped(source, _group_raw(rows, nk, group, window_s))
    if (source.resolution == "1h" and window_s is None
            and source.end - source.start > DAY_TO_DATE_MIN_SPAN):
        dtd = await _load_day_to_date(session, spec, prefix, params, where, group, source)
        if dtd is not None:
            return Grouped(source, dtd)
    sql = (f"SELECT {keys_sql}, extract(epoch FROM bucket_start)::float8 AS t, sample_count, "
           f"failure_count, {prefix}_count, {prefix}_min, {prefix}_max, {prefix}_sum, "
           f"{prefix}_sum_sq, {prefix}_sketch FROM {spec.table} WHERE org_id = :org "
           f"AND bucket_s = :bs AND bucket_start >= :s AND bucket_start < :e"
           + "".join(f" AND {c}" for c in where))
    params["bs"] = source.bucket_s
    rows = (await session.execute(text(sql), params)).all()
    return Grouped(source, _group_rollups(rows, nk, group, window_s))


async def _load_day_to_date(session: AsyncSession, spec: KindSpec, prefix: str,
                            params: dict[str, Any], where: list[str], group: GroupFn,
                            source: Source) -> dict[Any, Distribution] | None:
    """Hourly answer from day-to-date sketches: per series and UTC day, the latest hour's
    day-to-date sketch in range, minus (on the first day) the latest one before the range.
    Moments are summed from the hourly rows in SQL. None when a sketch is missing."""
    keys_sql = ", ".join(spec.keys)
    nk = len(spec.keys)
    cond = "".join(f" AND {c}" for c in where)
    base = f"FROM {spec.table} WHERE org_id = :org AND bucket_s = 3600{cond}"
    moments = (await session.execute(text(
        f"SELECT {keys_sql}, sum(sample_count), sum(failure_count), sum({prefix}_count), "
        f"min({prefix}_min), max({prefix}_max), sum({prefix}_sum), sum({prefix}_sum_sq) "
        f"{base} AND bucket_start >= :s AND bucket_start < :e GROUP BY {keys_sql}"),
        params)).all()
    latest = (f"SELECT DISTINCT ON ({keys_sql}, d) {keys_sql}, {prefix}_dtd_sketch FROM ("
              f"SELECT {keys_sql}, bucket_start, {prefix}_dtd_sketch, "
              f"floor(extract(epoch FROM bucket_start) / 86400) AS d {base} "
              f"AND bucket_start >= :a AND bucket_start < :b) x "
              f"ORDER BY {keys_sql}, d, bucket_start DESC")
    # Usually every series has a row in the last hour of each day part: fetch exactly those
    # rows by key; the DISTINCT ON scan is for series with gaps.
    day0 = _floor(source.start, 86400)
    plus_hours = []
    d = day0
    while d < source.end:
        plus_hours.append(min(d + timedelta(days=1), source.end) - timedelta(hours=1))
        d += timedelta(days=1)
    minus_hour = source.start - timedelta(hours=1) if day0 < source.start else None
    exact_hours = plus_hours + ([minus_hour] if minus_hour else [])
    exact = (await session.execute(text(
        f"SELECT {keys_sql}, bucket_start, {prefix}_dtd_sketch {base} "
        f"AND bucket_start = ANY(:hours)"), {**params, "hours": exact_hours})).all()
    by_hour: dict[datetime, list[Any]] = {}
    for r in exact:
        by_hour.setdefault(r[nk], []).append(r)
    series = {tuple(r[:nk]) for r in moments}
    complete = all({tuple(r[:nk]) for r in by_hour.get(h, [])} >= series for h in plus_hours)
    plus: list[Any]
    if complete:
        plus = [(*r[:nk], r[nk + 1]) for h in plus_hours for r in by_hour.get(h, [])]
    else:
        plus = list((await session.execute(text(latest), {**params, "a": source.start,
                                                           "b": source.end})).all())
    minus: list[Any] = []
    if minus_hour is not None:
        at_minus = by_hour.get(minus_hour, [])
        if {tuple(r[:nk]) for r in at_minus} >= series:
            minus = [(*r[:nk], r[nk + 1]) for r in at_minus]
        else:
            minus = list((await session.execute(text(latest), {**params, "a": day0,
                                                                "b": source.start})).all())
    index: dict[Any, int] = {}
    cache: dict[tuple[Any, ...], Any] = {}
    for r in moments:
        g = _group_key(group, tuple(r[:nk]), 0.0, None, cache)
        if g is not None and g not in index:
            index[g] = len(index)
    n = len(index)
    if n == 0:
        return {}
    bins = GroupedBins(n)
    for rows, sign in ((plus, 1.0), (minus, -1.0)):
        for item in rows:
            blob = item[nk]
            if blob is None:
                return None
            g = _group_key(group, tuple(item[:nk]), 0.0, None, cache)
            if g is None or g not in index:
                continue
            bins.add(index[g], decode(blob), sign)
    offset, matrix = bins.matrix()
    np.maximum(matrix, 0.0, out=matrix)
    zero = np.maximum(bins.zero, 0.0)
    acc = np.zeros((n, 5))
    lo = np.full(n, np.inf)
    hi = np.full(n, -np.inf)
    for r in moments:
        g = cache.get(tuple(r[:nk]))
        if g is None:
            continue
        j = index[g]
        acc[j] += [float(r[nk + i] or 0) for i in (0, 1, 2, 5, 6)]
        if r[nk + 3] is not None:
            lo[j] = min(lo[j], r[nk + 3])
        if r[nk + 4] is not None:
            hi[j] = max(hi[j], r[nk + 4])
    out: dict[Any, Distribution] = {}
    for g, j in index.items():
        m = Moments(samples=int(acc[j, 0]), failures=int(acc[j, 1]), count=int(acc[j, 2]),
                    total=float(acc[j, 3]), total_sq=float(acc[j, 4]), minimum=float(lo[j]),
                    maximum=float(hi[j]))
        row = matrix[j] if matrix.shape[1] else np.zeros(0)
        out[g] = Distribution.sketched(Sketch(offset, row, float(zero[j])), m)
    return out


def _group_key(group: GroupFn, keys: tuple[Any, ...], t: float, window_s: int | None,
               cache: dict[tuple[Any, ...], Any]) -> Any:
    g = cache.get(keys, ...)
    if g is ...:
        g = cache[keys] = group(keys)
    if g is None or window_s is None:
        return g
    return (g, int(t // window_s) * window_s)


def _group_raw(rows: Sequence[Any], nk: int, group: GroupFn, window_s: int | None
               ) -> dict[Any, Distribution]:
    index: dict[Any, int] = {}
    cache: dict[tuple[Any, ...], Any] = {}
    gid = np.full(len(rows), -1, dtype=np.int64)
    vals = np.empty(len(rows))
    failed = np.zeros(len(rows), dtype=bool)
    for i, r in enumerate(rows):
        g = _group_key(group, tuple(r[:nk]), r[nk], window_s, cache)
        if g is None:
            continue
        j = index.get(g)
        if j is None:
            j = index[g] = len(index)
        gid[i] = j
        v = r[nk + 1]
        vals[i] = np.nan if v is None else v
        failed[i] = bool(r[nk + 2])
    keep = gid >= 0
    gid, vals, failed = gid[keep], vals[keep], failed[keep]
    order = np.argsort(gid, kind="stable")
    gid, vals, failed = gid[order], vals[order], failed[order]
    bounds = np.searchsorted(gid, np.arange(len(index) + 1))
    out: dict[Any, Distribution] = {}
    for g, j in index.items():
        a, b = bounds[j], bounds[j + 1]
        v = vals[a:b]
        ok = np.isfinite(v)
        d = Distribution.exact(v[ok], failures=int(failed[a:b].sum()))
        # Samples without a value that did not fail (none today) still count as samples.
        d.moments.samples = int(b - a)
        out[g] = d
    return out


def _group_rollups(rows: Sequence[Any], nk: int, group: GroupFn, window_s: int | None
                   ) -> dict[Any, Distribution]:
    index: dict[Any, int] = {}
    cache: dict[tuple[Any, ...], Any] = {}
    gids: list[int] = []
    kept: list[Any] = []
    for r in rows:
        g = _group_key(group, tuple(r[:nk]), r[nk], window_s, cache)
        if g is None:
            continue
        j = index.get(g)
        if j is None:
            j = index[g] = len(index)
        gids.append(j)
        kept.append(r)
    n = len(index)
    if n == 0:
        return {}
    gid = np.asarray(gids, dtype=np.int64)
    b = nk + 1
    cols = np.array([[r[b], r[b + 1], r[b + 2], r[b + 5], r[b + 6]] for r in kept],
                    dtype=np.float64)
    mins = np.array([np.inf if r[b + 3] is None else r[b + 3] for r in kept])
    maxs = np.array([-np.inf if r[b + 4] is None else r[b + 4] for r in kept])
    samples = np.bincount(gid, weights=cols[:, 0], minlength=n)
    failures = np.bincount(gid, weights=cols[:, 1], minlength=n)
    counts = np.bincount(gid, weights=cols[:, 2], minlength=n)
    sums = np.bincount(gid, weights=cols[:, 3], minlength=n)
    sums_sq = np.bincount(gid, weights=cols[:, 4], minlength=n)
    lo = np.full(n, np.inf)
    hi = np.full(n, -np.inf)
    np.minimum.at(lo, gid, mins)
    np.maximum.at(hi, gid, maxs)
    bins = GroupedBins(n)
    for j, r in zip(gids, kept, strict=True):
        bins.add(j, decode(r[b + 7]))
    offset, matrix = bins.matrix()
    out: dict[Any, Distribution] = {}
    for g, j in index.items():
        m = Moments(samples=int(samples[j]), failures=int(failures[j]), count=int(counts[j]),
                    total=float(sums[j]), total_sq=float(sums_sq[j]), minimum=float(lo[j]),
                    maximum=float(hi[j]))
        row = matrix[j] if matrix.shape[1] else np.zeros(0)
        out[g] = Distribution.sketched(Sketch(offset, row, float(bins.zero[j])), m)
    return out


# --- group functions ------------------------------------------------------------------

PAIR_GROUPINGS = ("all", "pair", "src", "dst", "topology_class", "payload_bytes", "zone_pair",
                  "region_pair", "provider_pair")
OTHER_GROUPINGS = {
    "quorum": ("all", "agent", "group", "quorum"),
    "storage": ("all", "agent", "target", "op", "size_bytes", "variant", "content", "copies",
                "target_op_size", "provider_op_size"),
}


def group_fn(kind: str, group_by: str, fleet: Fleet,
             target_provider: dict[uuid.UUID, str] | None = None) -> GroupFn:
    spec = KIND_SPECS[kind]
    if group_by == "all":
        return lambda k: "all"
    if spec.pair:
        if group_by not in PAIR_GROUPINGS and not (kind == "throughput" and group_by == "proto"):
            raise QueryError("group_by", f"group_by must be one of {', '.join(PAIR_GROUPINGS)}")
        if group_by == "pair":
            return lambda k: (str(k[0]), str(k[1]))
        if group_by == "src":
            return lambda k: str(k[0])
        if group_by == "dst":
            return lambda k: str(k[1])
        if group_by == "topology_class":
            return lambda k: fleet.topology_of(k[0], k[1])
        if group_by == "payload_bytes":
            return lambda k: k[2] if kind == "mesh" else None
        if group_by == "proto":
            return lambda k: k[2]
        level = group_by.split("_")[0]
        return lambda k: (fleet.level_of(k[0], level), fleet.level_of(k[1], level))
    allowed = OTHER_GROUPINGS[kind]
    if group_by not in allowed:
        raise QueryError("group_by", f"group_by must be one of {', '.join(allowed)}")
    if group_by == "agent":
        return lambda k: str(k[0])
    if kind == "quorum":
        if group_by == "group":
            return lambda k: k[1]
        return lambda k: f"Q{k[2]}/{k[3]}"
    col = {"target": 1, "op": 2, "variant": 3, "content": 4, "size_bytes": 5, "copies": 6}
    if group_by in col:
        i = col[group_by]
        return lambda k: str(k[i]) if i == 1 else k[i]
    if group_by == "target_op_size":
        return lambda k: (str(k[1]), k[2], k[5])
    tp = target_provider or {}
    return lambda k: (tp.get(k[1], str(k[1])), k[2], k[5])


async def target_providers(session: AsyncSession, org_id: uuid.UUID) -> dict[uuid.UUID, str]:
    """Provider of each storage target, when targets are configured as a resource."""
    exists = (await session.execute(text(
        "SELECT count(*) FROM information_schema.columns WHERE table_name = 'storage_targets' "
        "AND column_name IN ('provider', 'org_id')"))).scalar()
    if exists != 2:
        return {}
    rows = (await session.execute(text(
        "SELECT id, provider FROM storage_targets WHERE org_id = :o"), {"o": org_id})).all()
    return {r[0]: r[1] for r in rows}
