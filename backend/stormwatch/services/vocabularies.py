"""Every closed list of names the API accepts, gathered from the one place each is defined,
so a client offers exactly what the API takes."""

from __future__ import annotations

from typing import Any

from stormwatch.models.agent import TOPOLOGY_CLASSES
from stormwatch.models.alerts import SEVERITIES
from stormwatch.models.samples import STORAGE_OPS, STORAGE_VARIANTS
from stormwatch.models.storage_target import STORAGE_PROVIDERS
from stormwatch.models.throughput import PROTOS
from stormwatch.notifications.registry import CHANNEL_KINDS, form_fields
from stormwatch.services.advisors.rankings import RANK_STATISTICS
from stormwatch.services.alerts.conditions import BASELINES, CONDITION_TYPES, DIRECTIONS
from stormwatch.services.alerts.metrics import (
    METRICS,
    PERCENTILES,
    MetricKind,
    statistic_unit,
)
from stormwatch.services.export.prometheus import KINDS as EXPORT_KINDS_ORDER
from stormwatch.services.export.prometheus import LEVELS as EXPORT_LEVELS

# The editor's window bounds; the rule validation enforces the same.
WINDOW_S = {"min": 30, "max": 3600, "step": 60}


def alert_metrics() -> dict[str, Any]:
    """What the rule editor can offer: metrics, their statistics, filters and conditions."""
    def stats(m: MetricKind) -> list[str]:
        return [*(PERCENTILES if m.percentiles else ()), *m.statistics]

    return {
        "metrics": [{"name": m.name, "title": m.title, "unit": m.unit, "statistics": stats(m),
                     "units": {s: statistic_unit(m, s) for s in stats(m)},
                     "filters": list(m.filters),
                     "conditions": list(m.conditions)}
                    for m in METRICS.values()],
        "conditions": list(CONDITION_TYPES), "baselines": list(BASELINES),
        "directions": list(DIRECTIONS), "severities": list(SEVERITIES), "window_s": WINDOW_S,
    }


def vocabularies() -> dict[str, Any]:
    return {
        "topology_classes": list(TOPOLOGY_CLASSES),
        "statistics": [*PERCENTILES, *RANK_STATISTICS],
        "storage_ops": list(STORAGE_OPS),
        "storage_variants": list(STORAGE_VARIANTS),
        "storage_providers": list(STORAGE_PROVIDERS),
        "protos": list(PROTOS),
        "channel_kinds": [{"name": k.name, "title": k.title, "fields": form_fields(k)}
                          for k in CHANNEL_KINDS.values()],
        "alert_metrics": alert_metrics(),
        "export_kinds": list(EXPORT_KINDS_ORDER),
        "export_levels": list(EXPORT_LEVELS),
    }
