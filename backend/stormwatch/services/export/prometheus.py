"""Measured distributions as Prometheus histograms, read from the rollups' DDSketches.

What a scrape returns (docs/integrations.md is the user's version):

* One histogram per exported series (`stormwatch_mesh_rtt_seconds`,
  `stormwatch_quorum_latency_seconds`, `stormwatch_storage_latency_seconds`,
  `stormwatch_throughput_bytes_per_second`) and a counter of the samples without a value
  (`stormwatch_mesh_lost_total`, `stormwatch_quorum_failures_total`,
  `stormwatch_storage_failures_total`), labelled from the agents' metadata.
* Every value is a counter: the total over the series' rollup rows whose bucket starts at or
  after the export origin, the most recent Monday 00:00 UTC. Rows only ever gain samples
  (late samples re-roll their minute upwards), so between two scrapes no counter goes down
  and `increase(...[5m])` is what was measured in those five minutes. Once a week the
  origin moves and every counter falls to what was measured since: Prometheus reads that as
  a counter reset, as after an exporter restart. The origin is never older than 7 days, the
  shortest rollup retention an org may set, so retention never deletes a counted row.
* Counters follow the minute rollups, about a minute behind the samples (the rollup pass
  leaves 30 s for late samples); samples of the last minute before the weekly origin move
  that are rolled after it are not exported.
* The total is cheap: day rows for the whole days since the origin, hour rows for today's
  whole hours, minute rows for the current hour (at most 6 + 23 + 60 rows per series). The
  rollup pass rewrites a minute and its hour and day in one transaction, so the three levels
  always add up to the same total.
* Buckets: the upper boundary of every LADDER_STEP-th DDSketch bin (gamma**k, k a multiple
  of LADDER_STEP), converted exactly to base units, over a fixed range per kind. A bin never
  straddles a boundary, so each bucket's count is exact for the sketch; the buckets are
  BUCKET_RELATIVE_WIDTH (10.5%) wide, which bounds how far `histogram_quantile` can be from
  the percentile Stormwatch reports. Every series carries the whole ladder, so the `le` set
  never changes.
* Formats: the Prometheus text format or OpenMetrics (prometheus_client's encoders, chosen
  by the Accept header), or the protobuf with native histograms (protobuf.py).
* Cardinality: `level="region"` (default) groups agents by provider and region, leaving
  self-loops out (they would pull a region's cell down to microseconds, as in the heatmap);
  `level="pair"` exports every agent pair. A scrape of more label sets than the limit is
  refused (ExportError) rather than truncated.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from numpy.typing import NDArray
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.services.analytics.filters import Fleet, load_fleet
from stormwatch.services.analytics.sketches import GAMMA, LOG_GAMMA, GroupedBins, decode_many

LADDER_STEP = 5
BUCKET_RELATIVE_WIDTH = GAMMA**LADDER_STEP - 1.0
LEVELS = ("region", "pair")
KINDS = ("mesh", "quorum", "storage", "throughput")
# 1970-01-05 was a Monday: origins fall on Mondays 00:00 UTC.
_MONDAY = datetime(1970, 1, 5, tzinfo=UTC)
ORIGIN_PERIOD = timedelta(days=7)


class ExportError(ValueError):
    """A request the export refuses; `param` names the query parameter at fault."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class Ladder:
    """Bucket boundaries: DDSketch keys (bin upper bounds gamma**key, in stored units) and
    the factor from stored units to the exported base unit."""

    keys: NDArray[np.int64]
    scale: float

    @classmethod
    def between(cls, lo: float, hi: float, scale: float) -> Ladder:
        """Every LADDER_STEP-th bin boundary from `lo` to `hi` (stored units)."""
        first = math.ceil(math.log(lo) / LOG_GAMMA / LADDER_STEP) * LADDER_STEP
        last = math.floor(math.log(hi) / LOG_GAMMA / LADDER_STEP) * LADDER_STEP
        return cls(np.arange(first, last + 1, LADDER_STEP, dtype=np.int64), scale)

    def bounds(self) -> NDArray[np.float64]:
        """Upper boundaries in base units: the sketch maps v to key ceil(log_gamma v), so
        bin `key` holds exactly the values in (gamma**(key-1), gamma**key]."""
        return np.exp(self.keys.astype(np.float64) * LOG_GAMMA) * self.scale

    def cumulative(self, offset: int, matrix: NDArray[np.float64],
                   zero: NDArray[np.float64]) -> NDArray[np.float64]:
        """(groups x len(keys)+1): the count at or below each boundary, then the total."""
        n_groups = matrix.shape[0]
        if matrix.shape[1] == 0:
            cum = np.zeros((n_groups, 1))
        else:
            cum = np.concatenate([np.zeros((n_groups, 1)), np.cumsum(matrix, axis=1)], axis=1)
        # Column j of `cum` is the count of bins with key < offset + j.
        idx = np.clip(self.keys + 1 - offset, 0, cum.shape[1] - 1)
        below = cum[:, idx]
        total = cum[:, -1:]
        return np.concatenate([below, total], axis=1) + zero[:, None]


LATENCY_LADDER = Ladder.between(10.0, 60e6, 1e-6)  # 10 µs to 60 s, stored in µs
THROUGHPUT_LADDER = Ladder.between(1e3, 1e11, 1.0)  # 1 kB/s to 100 GB/s


@dataclass(frozen=True)
class _AgentLabels:
    name: str
    provider: str
    region: str
    zone: str


def _agent(fleet: Fleet, agent_id: uuid.UUID) -> _AgentLabels:
    a = fleet.agents.get(agent_id)
    if a is not None:
        return _AgentLabels(a.name, a.provider, a.region, a.zone)
    gone = fleet.deleted.get(agent_id)
    if gone is not None:
        return _AgentLabels(f"{gone.name} (deleted)", gone.provider, gone.region, gone.zone)
    return _AgentLabels(str(agent_id), "", "", "")


@dataclass(frozen=True)
class ExportKind:
    name: str
    table: str
    keys: tuple[str, ...]
    prefix: str
    metric: str
    help: str
    ladder: Ladder
    failures: str | None
    failures_help: str


EXPORT_KINDS = {
    "mesh": ExportKind(
        "mesh", "mesh_rollups", ("src_agent_id", "dst_agent_id"), "rtt_us",
        "stormwatch_mesh_rtt_seconds", "TCP echo round-trip time between agents",
        LATENCY_LADDER, "stormwatch_mesh_lost", "Mesh probes without a reply (lost or failed)"),
    "quorum": ExportKind(
        "quorum", "quorum_rollups", ("agent_id", "group_name", "k", "n"), "latency_us",
        "stormwatch_quorum_latency_seconds", "k-th fastest reply among a group of n peers",
        LATENCY_LADDER, "stormwatch_quorum_failures", "Quorum rounds without k replies"),
    "storage": ExportKind(
        "storage", "storage_rollups",
        ("agent_id", "target_id", "op", "variant", "content", "size_bytes", "copies",
         "concurrency"), "latency_us",
        "stormwatch_storage_latency_seconds", "Object-storage operation latency",
        LATENCY_LADDER, "stormwatch_storage_failures", "Object-storage operations that failed"),
    "throughput": ExportKind(
        "throughput", "throughput_rollups", ("src_agent_id", "dst_agent_id", "proto",
                                             "direction"), "bytes_per_s",
        "stormwatch_throughput_bytes_per_second", "Per-second throughput between agents",
        THROUGHPUT_LADDER, None, ""),
}

_PAIR_AGENT_LABELS = ("agent", "provider", "region", "zone")


def label_names(kind: str, level: str) -> tuple[str, ...]:
    """The labels of a kind's series at a level (docs/integrations.md lists them)."""
    if kind in ("mesh", "throughput"):
        if level == "pair":
            names: tuple[str, ...] = (
                *(f"src_{n}" for n in _PAIR_AGENT_LABELS),
                *(f"dst_{n}" for n in _PAIR_AGENT_LABELS), "topology_class")
        else:
            names = ("src_provider", "src_region", "dst_provider", "dst_region")
        return names + (("proto", "direction") if kind == "throughput" else ())
    agent: tuple[str, ...] = (_PAIR_AGENT_LABELS if level == "pair"
                              else ("provider", "region"))
    if kind == "quorum":
        return (*agent, "group", "quorum")
    return (*agent, "target", "target_provider", "op", "variant", "content", "size_bytes",
            "copies", "concurrency")


LabelFn = Callable[[tuple[Any, ...]], tuple[str, ...] | None]


def _labeller(kind: str, level: str, fleet: Fleet,
              targets: dict[uuid.UUID, tuple[str, str]]) -> LabelFn:
    pair = level == "pair"

    def place(a: _AgentLabels) -> tuple[str, ...]:
        return (a.name, a.provider, a.region, a.zone) if pair else (a.provider, a.region)

    def labels(key: tuple[Any, ...]) -> tuple[str, ...] | None:
        if kind in ("mesh", "throughput"):
            src, dst = key[0], key[1]
            if not pair and src == dst:
                return None
            out = (*place(_agent(fleet, src)), *place(_agent(fleet, dst)))
            if pair:
                out += (fleet.topology.get((src, dst), "self" if src == dst else ""),)
            return out + (tuple(str(k) for k in key[2:4]) if kind == "throughput" else ())
        where = place(_agent(fleet, key[0]))
        if kind == "quorum":
            return (*where, str(key[1]), f"Q{key[2]}/{key[3]}")
        target, target_provider = targets.get(key[1], (str(key[1]), ""))
        return (*where, target, target_provider, *(str(k) for k in key[2:]))

    return labels


def export_origin(now: datetime) -> datetime:
    """The most recent Monday 00:00 UTC at or before `now`: counters count from here."""
    periods = (now - _MONDAY) // ORIGIN_PERIOD
    return _MONDAY + periods * ORIGIN_PERIOD


@dataclass
class SeriesTotals:
    """A kind's exported series: label values, cumulative bucket counts (last column +Inf),
    value sums in base units and failure counts, one row per label set."""

    kind: ExportKind
    label_names: tuple[str, ...]
    labels: list[tuple[str, ...]]
    buckets: NDArray[np.float64]
    sums: NDArray[np.float64]
    failures: NDArray[np.float64]
    # The merged sketches themselves: bins from `offset` per row, and zero counts.
    offset: int = 0
    matrix: NDArray[np.float64] = field(default_factory=lambda: np.zeros((0, 0)))
    zero: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))


async def series_totals(session: AsyncSession, org_id: uuid.UUID, kind_name: str, level: str,
                        now: datetime | None = None, fleet: Fleet | None = None
                        ) -> SeriesTotals:
    """Every series of a kind at a level, totalled from the export origin up to now."""
    kind = EXPORT_KINDS[kind_name]
    now = now or datetime.now(UTC)
    origin = export_origin(now)
    day = max(origin, now.replace(hour=0, minute=0, second=0, microsecond=0))
    hour = now.replace(minute=0, second=0, microsecond=0)
    fleet = fleet or await load_fleet(session, org_id)
    targets: dict[uuid.UUID, tuple[str, str]] = {}
    if kind_name == "storage":
        targets = {r[0]: (r[1], r[2]) for r in (await session.execute(text(
            "SELECT id, name, provider FROM storage_targets WHERE org_id = :o"),
            {"o": org_id})).all()}
    rows = (await session.execute(text(
        f"SELECT {', '.join(kind.keys)}, failure_count, {kind.prefix}_sum, "
        f"{kind.prefix}_sketch FROM {kind.table} WHERE org_id = :o AND ("
        "(bucket_s = 86400 AND bucket_start >= :origin AND bucket_start < :day) OR "
        "(bucket_s = 3600 AND bucket_start >= :day AND bucket_start < :hour) OR "
        "(bucket_s = 60 AND bucket_start >= :hour))"),
        {"o": org_id, "origin": origin, "day": day, "hour": hour})).all()
    names = label_names(kind_name, level)
    nk = len(kind.keys)
    labeller = _labeller(kind_name, level, fleet, targets)
    by_key: dict[tuple[Any, ...], int | None] = {}
    index: dict[tuple[str, ...], int] = {}
    group_of = np.empty(len(rows), dtype=np.int64)
    for i, r in enumerate(rows):
        key = tuple(r[:nk])
        if key not in by_key:
            lab = labeller(key)
            by_key[key] = None if lab is None else index.setdefault(lab, len(index))
        g = by_key[key]
        group_of[i] = -1 if g is None else g
    keep: list[int] = np.flatnonzero(group_of >= 0).tolist()
    groups = group_of[keep]
    n = len(index)
    failures = np.bincount(groups, weights=[float(rows[i][nk]) for i in keep],
                           minlength=n).astype(np.float64)
    sums = np.bincount(groups, weights=[float(rows[i][nk + 1]) for i in keep],
                       minlength=n).astype(np.float64) * kind.ladder.scale
    bins = GroupedBins(n)
    blobs = [bytes(rows[i][nk + 2]) for i in keep]
    dec = decode_many(b"".join(blobs), np.fromiter((len(b) for b in blobs), dtype=np.int64,
                                                   count=len(blobs)))
    bins.add_bins(groups[dec.sketch], dec.keys, dec.counts)
    zero = np.bincount(groups, weights=dec.zero, minlength=n).astype(np.float64)
    offset, matrix = bins.matrix()
    buckets = kind.ladder.cumulative(offset, matrix, zero)
    return SeriesTotals(kind, names, list(index), buckets, sums, failures, offset, matrix, zero)


def metric_families(totals: Sequence[SeriesTotals]) -> Iterator[Metric]:
    for t in totals:
        les = [floatToGoString(b) for b in t.kind.ladder.bounds()] + ["+Inf"]
        hist = HistogramMetricFamily(t.kind.metric, t.kind.help, labels=t.label_names)
        for labels, counts, total in zip(t.labels, t.buckets, t.sums, strict=True):
            hist.add_metric(labels, list(zip(les, counts.tolist(), strict=True)), float(total))
        yield hist
        if t.kind.failures is not None:
            lost = CounterMetricFamily(t.kind.failures, t.kind.failures_help,
                                       labels=t.label_names)
            for labels, value in zip(t.labels, t.failures.tolist(), strict=True):
                lost.add_metric(labels, value)
            yield lost


class _Families(Collector):
    def __init__(self, totals: Sequence[SeriesTotals]) -> None:
        self.totals = totals

    def collect(self) -> Iterator[Metric]:
        return metric_families(self.totals)


async def export_registry(session: AsyncSession, org_id: uuid.UUID, kinds: Sequence[str],
                          level: str, max_series: int, now: datetime | None = None
                          ) -> CollectorRegistry:
    """A registry holding the org's series of `kinds` at `level`, for one scrape. Refuses
    (ExportError) what `export_totals` refuses."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(await export_totals(session, org_id, kinds, level, max_series,
                                                    now)))
    return registry


async def export_totals(session: AsyncSession, org_id: uuid.UUID, kinds: Sequence[str],
                        level: str, max_series: int, now: datetime | None = None
                        ) -> list[SeriesTotals]:
    """The org's series of `kinds` at `level`; ExportError for an unknown level or kind, and
    for more than `max_series` label sets."""
    if level not in LEVELS:
        raise ExportError("level", f"level must be one of {', '.join(LEVELS)}")
    for k in kinds:
        if k not in EXPORT_KINDS:
            raise ExportError("kind", f"kind must be one of {', '.join(KINDS)}")
    fleet = await load_fleet(session, org_id)
    totals = [await series_totals(session, org_id, k, level, now, fleet) for k in kinds]
    count = sum(len(t.labels) for t in totals)
    if count > max_series:
        raise ExportError(
            "level", f"this export would hold {count} label sets, more than the limit of "
            f"{max_series} (PROMETHEUS_EXPORT_MAX_SERIES): scrape one kind at a time or "
            "use level=region")
    return totals
