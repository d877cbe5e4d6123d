"""The metric kinds a rule can watch: each knows its raw table, series key, the statistics it
offers and the scope filters that apply. Adding a kind (throughput did) is one entry here."""

from __future__ import annotations

import math
from dataclasses import dataclass

from stormwatch.services.alerts.conditions import CONDITION_TYPES
from stormwatch.services.analytics.filters import KIND_SPECS, KindSpec

# Percentiles the editor offers; any pX with 0 < X < 100 is accepted.
PERCENTILES = ("p50", "p75", "p90", "p95", "p99", "p99.9", "p99.99", "p99.999")
# Filters of the analysis API that every kind takes; kind-specific ones are listed per kind.
COMMON_FILTERS = ("agents", "src", "regions", "zones", "providers")
PAIR_FILTERS = ("dst", "topology_class")
PATH_KEY = ("src_agent_id", "dst_agent_id")


@dataclass(frozen=True)
class MetricKind:
    name: str
    title: str
    kind: str | None  # analytics kind (table, series key); None: agent silence
    statistics: tuple[str, ...]  # besides percentiles when `percentiles`
    percentiles: bool
    filters: tuple[str, ...]
    unit: str
    adjusted: bool = False  # storage: latency minus the RTT to the endpoint
    # Where window values come from: the kind's samples, the agents' last contact
    # (values.silence_windows) or the pairs' path changes (values.path_change_windows).
    source: str = "samples"
    # Values divided by the pair's physical floor (values.per_floor): RTT stretch.
    per_floor: bool = False
    conditions: tuple[str, ...] = CONDITION_TYPES

    @property
    def spec(self) -> KindSpec | None:
        return KIND_SPECS[self.kind] if self.kind else None

    @property
    def pair(self) -> bool:
        """Series are (src, dst) pairs of agents."""
        return self.source == "path_changes" or (self.spec is not None and self.spec.pair)

    @property
    def series_key(self) -> tuple[str, ...]:
        if self.source == "path_changes":
            return PATH_KEY
        return ("agent_id",) if self.kind is None else KIND_SPECS[self.kind].keys

    @property
    def key_types(self) -> tuple[str, ...]:
        if self.kind is None:
            return ("uuid",) * len(self.series_key)
        return KIND_SPECS[self.kind].key_types

    def offers(self, statistic: str) -> bool:
        if statistic in self.statistics:
            return True
        return self.percentiles and parse_percentile(statistic) is not None


METRICS: dict[str, MetricKind] = {m.name: m for m in (
    MetricKind("mesh_rtt", "Mesh round-trip time", "mesh", ("mean", "std", "loss_rate"), True,
               (*COMMON_FILTERS, *PAIR_FILTERS, "payload_bytes"), "us"),
    MetricKind("quorum_latency", "Quorum latency (k-th fastest reply)", "quorum",
               ("mean", "std", "failure_rate"), True, (*COMMON_FILTERS, "group_name"), "us"),
    MetricKind("storage_latency", "Storage operation latency", "storage",
               ("mean", "std", "failure_rate"), True,
               (*COMMON_FILTERS, "target", "op", "size_bytes", "variant", "content", "copies",
                "concurrency"), "us"),
    MetricKind("storage_latency_adjusted", "Storage latency minus RTT to the endpoint",
               "storage", ("mean", "std"), True,
               (*COMMON_FILTERS, "target", "op", "size_bytes", "variant", "content", "copies",
                "concurrency"), "us", adjusted=True),
    MetricKind("throughput", "Throughput", "throughput", ("mean", "std", "min"), True,
               (*COMMON_FILTERS, *PAIR_FILTERS, "proto", "direction"), "bytes/s"),
    MetricKind("agent_silence", "Agent silence (no samples and no config poll)", None,
               ("silence_s",), False, COMMON_FILTERS, "s", source="silence",
               conditions=("above",)),
    # docs/paths.md: a change counts in the window the server learned of it.
    MetricKind("path_changed", "Path changes (hop-by-hop route of a pair)", None,
               ("changes",), False, (*COMMON_FILTERS, *PAIR_FILTERS), "count",
               source="path_changes", conditions=("above",)),
    # docs/analysis.md "Geography": RTT over the physical floor between the pair's places;
    # pairs under MIN_STRETCH_KM apart or in unplaced regions have no value.
    MetricKind("mesh_stretch", "Mesh RTT stretch (RTT / physical floor of the pair)", "mesh",
               ("mean", "min"), True, (*COMMON_FILTERS, *PAIR_FILTERS, "payload_bytes"), "x",
               per_floor=True, conditions=("above", "below")),
)}


def statistic_unit(metric: str | MetricKind, statistic: str) -> str:
    """The unit of a statistic's values: rates are ratios whatever the metric measures;
    "" for a metric not in METRICS. The one definition: evidence, messages and the UI
    (through the vocabularies) take it from here."""
    if statistic.endswith("_rate"):
        return "ratio"
    m = METRICS.get(metric) if isinstance(metric, str) else metric
    return m.unit if m is not None else ""


def parse_percentile(statistic: str) -> float | None:
    """'p99.99' -> 99.99; None when not a percentile in (0, 100)."""
    if not statistic.startswith("p"):
        return None
    try:
        p = float(statistic[1:].replace("_", "."))
    except ValueError:
        return None
    if not 0 < p < 100 or math.isnan(p):
        return None
    return p


def samples_needed(statistic: str) -> int:
    """Samples a window must hold for the statistic to mean something: a p99.9 needs a
    thousand (below that it is the window's maximum), a mean or rate a handful."""
    p = parse_percentile(statistic)
    if p is None:
        return 2 if statistic == "std" else 1
    return math.ceil(100 / (100 - p) - 1e-9)
