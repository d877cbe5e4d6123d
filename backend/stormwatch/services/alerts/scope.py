"""A rule's scope: the analysis API's filters (services/analytics/filters.Filters), turned into
a test on series keys so one batched read serves every rule, plus what a series is called."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from stormwatch.services.alerts.metrics import MetricKind
from stormwatch.services.analytics.filters import KIND_SPECS, Filters, Fleet, where_clauses
from stormwatch.services.analytics.zones import zone_key

SeriesKey = tuple[Any, ...]
# Scope fields that are kind-specific columns, and their column names.
EXTRA_COLUMNS = {"target": "target_id", "op": "op", "variant": "variant", "content": "content",
                 "size_bytes": "size_bytes", "copies": "copies", "concurrency": "concurrency",
                 "group_name": "group_name", "proto": "proto", "direction": "direction"}


def to_filters(scope: dict[str, Any], adjusted: bool = False,
               start: datetime | None = None, end: datetime | None = None) -> Filters:
    def ids(name: str) -> list[uuid.UUID] | None:
        v = scope.get(name)
        return [uuid.UUID(str(x)) for x in v] if v else None

    extra: dict[str, list[Any]] = {}
    for name, col in EXTRA_COLUMNS.items():
        if scope.get(name):
            extra[col] = (ids(name) or []) if name == "target" else list(scope[name])
    end = end or datetime.now(UTC)
    return Filters(start=start or end - timedelta(hours=1), end=end, agents=ids("agents"),
                   src=ids("src"), dst=ids("dst"), regions=scope.get("regions") or None,
                   zones=scope.get("zones") or None, providers=scope.get("providers") or None,
                   topology_class=scope.get("topology_class") or None,
                   payload_bytes=scope.get("payload_bytes") or None, extra=extra,
                   adjusted=adjusted)


def check_applicable(metric: MetricKind, f: Filters, fleet: Fleet) -> None:
    """The analysis API's own checks (QueryError naming the filter)."""
    if metric.kind is not None:
        where_clauses(KIND_SPECS[metric.kind], fleet, f, {})


def matcher(metric: MetricKind, f: Filters, fleet: Fleet) -> Callable[[SeriesKey], bool]:
    """Whether a series key (in the kind's key order) is in scope."""
    agents_ok: set[uuid.UUID] | None = None
    if f.agents or f.regions or f.zones or f.providers:
        agents_ok = {a.id for a in fleet.agents.values()
                     if (not f.agents or a.id in f.agents)
                     and (not f.regions or a.region in f.regions)
                     and (not f.zones or zone_key(a.provider, a.region, a.zone) in f.zones)
                     and (not f.providers or a.provider in f.providers)}
    src = set(f.src) if f.src else None
    dst = set(f.dst) if f.dst else None
    tcs = set(f.topology_class) if f.topology_class else None
    keys = metric.series_key
    extra = [(keys.index(col), set(vals)) for col, vals in f.extra.items() if col in keys]
    payload = set(f.payload_bytes) if f.payload_bytes and "payload_bytes" in keys else None
    pair = metric.pair

    def match(k: SeriesKey) -> bool:
        if pair:
            s, d = k[0], k[1]
            if agents_ok is not None and (s not in agents_ok or d not in agents_ok):
                return False
            if (src is not None and s not in src) or (dst is not None and d not in dst):
                return False
            if tcs is not None and fleet.topology_of(s, d) not in tcs:
                return False
        else:
            a = k[0]
            if agents_ok is not None and a not in agents_ok:
                return False
            if src is not None and a not in src:
                return False
        if payload is not None and k[2] not in payload:
            return False
        return all(k[i] in vals for i, vals in extra)

    return match


def fleet_series(metric: MetricKind, fleet: Fleet) -> list[SeriesKey]:
    """Series the fleet defines by itself: pairs (with their default payload unknown, so
    without it) for pair kinds, agents otherwise. Used to check a scope matches something."""
    if metric.pair:
        return [(s, d) for s in fleet.agents for d in fleet.agents]
    return [(a,) for a in fleet.agents]


def key_to_str(k: SeriesKey) -> str:
    return "|".join(str(v) for v in k)


def describe(metric: MetricKind, k: SeriesKey, fleet: Fleet,
             target_names: dict[uuid.UUID, str] | None = None) -> dict[str, Any]:
    """The series' labels for evidence and messages: ids and names of its agents and more."""
    def agent(a: Any) -> dict[str, Any]:
        info = fleet.agents.get(a)
        return {"id": str(a), "name": info.name if info else str(a),
                "region": info.region if info else "", "zone": info.zone if info else "",
                "provider": info.provider if info else ""}

    out: dict[str, Any] = {"key": key_to_str(k)}
    if metric.pair:
        out["src"], out["dst"] = agent(k[0]), agent(k[1])
        out["topology_class"] = fleet.topology_of(k[0], k[1])
        out["name"] = f"{out['src']['name']} → {out['dst']['name']}"
    else:
        out["agent"] = agent(k[0])
        out["name"] = out["agent"]["name"]
    skip = 2 if metric.pair else 1
    for col, v in zip(metric.series_key[skip:], k[skip:], strict=False):
        out[col] = str(v) if isinstance(v, uuid.UUID) else v
    if "target_id" in out and target_names:
        out["target_name"] = target_names.get(uuid.UUID(str(out["target_id"])), "")
    if metric.kind == "quorum":
        out["name"] += f" {k[1]} Q{k[2]}/{k[3]}"
    elif metric.kind == "storage":
        out["name"] += f" {out.get('target_name') or k[1]} {k[2]} {k[5]} B"
    return out


def dashboard_path(metric: MetricKind, keys: list[SeriesKey], fleet: Fleet, start: datetime,
                   end: datetime) -> str:
    """The UI view that shows the series (frontend/src/App.tsx routes), over the alert's
    time range."""
    span = {"from": start.isoformat(), "to": end.isoformat()}
    k = keys[0] if keys else None
    if metric.pair and k is not None:
        s, d = fleet.agents.get(k[0]), fleet.agents.get(k[1])
        return "/pair?" + urlencode({"level": "node", "src": str(k[0]), "dst": str(k[1]),
                                     "srcLabel": s.name if s else str(k[0]),
                                     "dstLabel": d.name if d else str(k[1]), **span})
    if metric.kind == "storage" and k is not None:
        return "/storage?" + urlencode({"op": k[2], "size": k[5],
                                        **({"adjust": "rtt"} if metric.adjusted else {}),
                                        **span})
    if metric.kind == "quorum":
        return "/distributions?" + urlencode(span)
    return "/fleet"
