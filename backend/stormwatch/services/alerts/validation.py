"""Whether a rule can work, checked before it is stored or backtested: every problem is a
RuleInvalid naming the field (the API answers 422 with that location)."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.models.org import DEFAULT_MESH_SETTINGS
from stormwatch.services.alerts.metrics import METRICS, MetricKind, samples_needed
from stormwatch.services.alerts.scope import (
    EXTRA_COLUMNS,
    check_applicable,
    fleet_series,
    matcher,
    to_filters,
)
from stormwatch.services.alerts.values import pair_floors
from stormwatch.services.analytics.filters import KIND_SPECS, Fleet, QueryError, load_fleet
from stormwatch.services.analytics.zones import first_zone_problem, zone_key
from stormwatch.services.geography.catalog import MIN_STRETCH_KM

DEFAULT_STORAGE_INTERVAL_S = 600
# Windows a rollup level can answer in a backtest (whole minutes), besides seed 003's 30 s.
RAW_ONLY_WINDOW_S = 30


class RuleInvalid(ValueError):
    def __init__(self, loc: list[str | int], msg: str) -> None:
        super().__init__(msg)
        self.loc = loc
        self.msg = msg


def _bad(field: str | list[str | int], msg: str) -> RuleInvalid:
    loc: list[str | int] = ["body", *([field] if isinstance(field, str) else field)]
    return RuleInvalid(loc, msg)


async def samples_per_s(session: AsyncSession, org_id: uuid.UUID, metric: MetricKind) -> float:
    """How many samples one series gets per second, from the org's own settings."""
    if metric.kind in ("mesh", "quorum"):
        ms = (await session.execute(text("SELECT mesh_settings FROM orgs WHERE id = :o"),
                                    {"o": org_id})).scalar() or {}
        rate = float({**DEFAULT_MESH_SETTINGS, **ms}.get("rate_hz") or 0)
        return rate
    if metric.kind == "storage":
        interval = (await session.execute(text(
            "SELECT min(interval_s) FROM storage_targets WHERE org_id = :o AND enabled"),
            {"o": org_id})).scalar()
        return 1.0 / float(interval or DEFAULT_STORAGE_INTERVAL_S)
    if metric.kind == "throughput":
        return 1.0  # one sample per second while an experiment runs
    return 0.0


async def missing_channels(session: AsyncSession, org_id: uuid.UUID,
                           ids: list[uuid.UUID]) -> list[uuid.UUID]:
    """Channel ids that are not the org's (notifications own the channel table)."""
    if not ids:
        return []
    try:
        from stormwatch.services.notify.channels import missing_channel_ids
    except ImportError:  # notifications not installed: no channel can be named
        return list(ids)
    return list(await missing_channel_ids(session, org_id, ids))


async def validate_rule(session: AsyncSession, org_id: uuid.UUID, d: dict[str, Any],
                        fleet: Fleet | None = None) -> Fleet:
    """Raises RuleInvalid for the first problem found; returns the org's fleet."""
    metric = METRICS.get(d["metric"])
    if metric is None:
        raise _bad("metric", f"unknown metric {d['metric']!r}; one of {', '.join(METRICS)}")
    stat = d["statistic"]
    if not metric.offers(stat):
        offered = [*metric.statistics, *(["p50 ... p99.999"] if metric.percentiles else [])]
        raise _bad("statistic", f"{metric.name} has no statistic {stat!r}; it offers "
                   + ", ".join(offered))
    cond = d["condition"]
    if cond["type"] not in metric.conditions:
        raise _bad(["condition", "type"], f"{metric.name} takes "
                   + " or ".join(repr(c) for c in metric.conditions) + " conditions"
                   + (f" (in {metric.unit})" if metric.unit in ("s", "count", "x") else ""))
    if d["x"] > d["y"]:
        raise _bad("x", f"x ({d['x']}) cannot exceed y ({d['y']}): X of Y consecutive windows")
    if d.get("m") is not None and d["n"] > d["m"]:
        raise _bad("n", f"n ({d['n']}) cannot exceed m ({d['m']}): N of M series")
    w = d["window_s"]
    if w != RAW_ONLY_WINDOW_S and w % 60:
        raise _bad("window_s", "window_s must be 30 or whole minutes (60 ... 3600): rollups "
                   "answer older windows minute by minute")
    rate = await samples_per_s(session, org_id, metric)
    if metric.kind is not None:
        need = samples_needed(stat)
        have = rate * w
        if have < need:
            raise _bad("window_s", f"{stat} needs at least {need} samples per window and a "
                       f"{w} s window of one series holds about {have:g} here; "
                       + _window_hint(need, rate))
    if cond["type"] == "level_shift" and cond.get("lookback_windows", 60) * w > 7 * 86400:
        raise _bad(["condition", "lookback_windows"], "the lookback cannot exceed 7 days")
    fleet = fleet or await load_fleet(session, org_id)
    await _validate_scope(session, org_id, metric, d["scope"] or {}, fleet, d)
    missing = await missing_channels(session, org_id, list(d.get("channel_ids") or []))
    if missing:
        raise _bad("channel_ids", f"no such notification channel: {missing[0]}")
    return fleet


async def _validate_scope(session: AsyncSession, org_id: uuid.UUID, metric: MetricKind,
                          scope: dict[str, Any], fleet: Fleet, d: dict[str, Any]) -> None:
    allowed = set(metric.filters)
    for name, v in scope.items():
        if v and name not in allowed:
            raise _bad(["scope", name], f"{name} does not apply to {metric.name} series; "
                       f"its filters are {', '.join(metric.filters)}")
    for name in ("agents", "src", "dst"):
        unknown = [a for a in scope.get(name) or [] if uuid.UUID(str(a)) not in fleet.agents]
        if unknown:
            raise _bad(["scope", name], f"no agent {unknown[0]} in this org")
    zone_problem = first_zone_problem(
        scope.get("zones") or [],
        {zone_key(a.provider, a.region, a.zone) for a in fleet.agents.values()})
    if zone_problem is not None:
        raise _bad(["scope", "zones"], zone_problem)
    for name in ("regions", "providers"):
        attr = name[:-1]
        have = {getattr(a, attr) for a in fleet.agents.values()}
        unknown = [v for v in scope.get(name) or [] if v not in have]
        if unknown:
            raise _bad(["scope", name], f"no agent of this org is in {attr} {unknown[0]!r}")
    if scope.get("target"):
        rows = {r[0] for r in (await session.execute(text(
            "SELECT id FROM storage_targets WHERE org_id = :o"), {"o": org_id})).all()}
        unknown = [t for t in scope["target"] if uuid.UUID(str(t)) not in rows]
        if unknown:
            raise _bad(["scope", "target"], f"no storage target {unknown[0]} in this org")
    f = to_filters(scope, metric.adjusted)
    try:
        check_applicable(metric, f, fleet)
    except QueryError as exc:
        raise _bad(["scope", _scope_name(exc.param)], str(exc)) from exc
    match = matcher(metric, f, fleet)
    # The fleet defines pairs and agents; kind-specific columns (op, group, ...) come from
    # the data of the last 7 days.
    extra_cols = [c for c in f.extra] + (["payload_bytes"] if f.payload_bytes else [])
    if metric.kind is None or not extra_cols:
        base = fleet_series(metric, fleet)
        pair = metric.pair
        matched = [k for k in base if _fleet_match(match, k, pair, metric)]
    else:
        matched = await _data_series(session, org_id, metric, match)
    if not matched:
        what = "agent pairs" if metric.pair else "agents"
        field = _scope_name(extra_cols[0]) if extra_cols and metric.kind else "scope"
        raise _bad(["scope"] if field == "scope" else ["scope", field],
                   f"the scope matches none of this org's {what}"
                   + ("" if field == "scope" else " with data in the last 7 days"))
    if metric.per_floor:
        floors = await pair_floors(session, org_id, fleet)
        matched = [k for k in matched if (k[0], k[1]) in floors]
        if not matched:
            raise _bad(["scope"], "no pair in the scope has a physical floor to divide by: "
                       "both agents' regions must be placed (catalog or PUT "
                       f"/geography/places) and at least {MIN_STRETCH_KM:g} km apart")
    if d.get("m") is not None and d["m"] > len(matched):
        raise _bad("m", f"m ({d['m']}) exceeds the {len(matched)} series the scope matches")
    if d["n"] > len(matched) and metric.pair:
        raise _bad("n", f"n ({d['n']}) exceeds the {len(matched)} series the scope matches")
    if d["n"] > len(matched) and metric.source == "silence":
        raise _bad("n", f"n ({d['n']}) exceeds the {len(matched)} agents the scope matches")


def _window_hint(need: int, rate: float) -> str:
    least = math.ceil(need / rate) if rate > 0 else None
    if least is None or least > 3600:
        return "no window up to 1 h holds that many: pick a lower percentile"
    return f"use window_s >= {30 if least <= 30 else math.ceil(least / 60) * 60}"


def _scope_name(param: str) -> str:
    inverse = {v: k for k, v in EXTRA_COLUMNS.items()}
    return inverse.get(param, param)


def _fleet_match(match: Any, k: tuple[Any, ...], pair: bool, metric: MetricKind) -> bool:
    """A fleet-level key (pair or agent) padded to the kind's key for the scope test."""
    n = len(metric.series_key)
    return bool(match(tuple(k) + (None,) * (n - len(k))))


async def _data_series(session: AsyncSession, org_id: uuid.UUID, metric: MetricKind,
                       match: Any) -> list[tuple[Any, ...]]:
    assert metric.kind is not None
    spec = KIND_SPECS[metric.kind]
    keys = ", ".join(spec.keys)
    since = datetime.now(UTC) - timedelta(days=7)
    # Mesh rows carry a series id (migration 0014): a series with a raw row since :r.
    raw = (f"SELECT {keys} FROM mesh_series s WHERE org_id = :o AND EXISTS (SELECT FROM "
           "mesh_raw r WHERE r.series_id = s.id AND r.time >= :r)" if metric.kind == "mesh"
           else f"SELECT DISTINCT {keys} FROM {spec.raw_table} WHERE org_id = :o AND time >= :r")
    rows = (await session.execute(text(
        f"SELECT DISTINCT {keys} FROM {spec.table} WHERE org_id = :o AND bucket_s = 3600 "
        f"AND bucket_start >= :s UNION {raw}"),
        {"o": org_id, "s": since, "r": datetime.now(UTC) - timedelta(hours=2)})).all()
    return [tuple(r) for r in rows if match(tuple(r))]
