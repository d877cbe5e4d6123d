"""Live evaluation: one cycle reads the newest complete windows of every enabled rule (raw
samples, one query per metric kind and window size for all orgs and rules), applies the
conditions and states of conditions.py, and writes each rule's transitions in one
transaction guarded by compare-and-set on the rule's eval_version (and on each alert's
version), with the alert_events rows notifications read."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from stormwatch.services.alerts.baselines import baselines
from stormwatch.services.alerts.conditions import (
    DEFAULT_LOOKBACK,
    Breaches,
    SeriesState,
    evaluate_windows,
    first_breach,
    step_group,
    step_series,
)
from stormwatch.services.alerts.metrics import METRICS, MetricKind
from stormwatch.services.alerts.scope import (
    SeriesKey,
    dashboard_path,
    describe,
    key_to_str,
    matcher,
    to_filters,
)
from stormwatch.services.alerts.values import (
    Windows,
    agent_last_heard,
    epoch,
    from_epoch,
    percentiles_of,
    raw_windows,
    rollup_windows,
    silence_windows,
)
from stormwatch.services.analytics.queries import Fleet, QueryError, load_fleet

log = logging.getLogger("stormwatch.alerts")

# A window is evaluated this long after it closes: agents ship batches every few seconds.
SETTLE_S = 5
# At most this much raw data per rule and cycle when catching up (one window at least).
CATCH_UP_S = 600
GROUP_KEY = "rule"  # group key of a rule's single alert when N of M > 1


@dataclass
class Rule:
    id: uuid.UUID
    org_id: uuid.UUID
    name: str
    severity: str
    labels: dict[str, str]
    metric: str
    statistic: str
    scope: dict[str, Any]
    window_s: int
    condition: dict[str, Any]
    x: int
    y: int
    n: int
    m: int | None
    evaluated_until: datetime | None
    eval_version: int

    @property
    def kind(self) -> MetricKind:
        return METRICS[self.metric]


RULE_COLUMNS = ("id, org_id, name, severity, labels, metric, statistic, scope, window_s, "
                "condition, x, y, n, m, evaluated_until, eval_version")


@dataclass
class SeriesEval:
    """One series' values and breaches over the windows being evaluated."""

    key: SeriesKey
    values: np.ndarray
    breaches: Breaches
    baseline: np.ndarray | None = None


@dataclass
class CycleResult:
    rules: int = 0
    evaluated: int = 0
    conflicts: int = 0  # rules another evaluation had already advanced
    series: int = 0
    events: int = 0
    errors: dict[str, str] = field(default_factory=dict)
    elapsed_ms: float = 0.0


def windows_to_evaluate(rule: Rule, now: datetime) -> list[int]:
    w = rule.window_s
    newest_end = (epoch(now) - SETTLE_S) // w * w
    first = newest_end - max(1, CATCH_UP_S // w) * w
    if rule.evaluated_until is not None:
        first = max(first, epoch(rule.evaluated_until))
    return list(range(first, newest_end, w))


async def load_rules(session: AsyncSession, rule_ids: Sequence[uuid.UUID] | None = None,
                     org_ids: Sequence[uuid.UUID] | None = None) -> list[Rule]:
    sql = f"SELECT {RULE_COLUMNS} FROM alert_rules WHERE enabled"
    params: dict[str, Any] = {}
    if rule_ids is not None:
        sql += " AND id = ANY(:ids)"
        params["ids"] = list(rule_ids)
    if org_ids is not None:
        sql += " AND org_id = ANY(:orgs)"
        params["orgs"] = list(org_ids)
    rows = (await session.execute(text(sql + " ORDER BY id"), params)).all()
    return [Rule(*r) for r in rows]


async def series_values(session: AsyncSession, rule: Rule, fleet: Fleet, data: Windows,
                        starts: list[int], tracked: set[SeriesKey]) -> list[SeriesEval]:
    """The rule's in-scope series over `starts`, with breaches (level shifts and baselines
    read what they need beyond the batched windows)."""
    metric = rule.kind
    f = to_filters(rule.scope, metric.adjusted)
    match = matcher(metric, f, fleet)
    keys = {k for (o, k) in data if o == rule.org_id and match(k)} | {
        k for k in tracked if match(k)}
    cond = rule.condition
    w = rule.window_s
    lookback: Windows = {}
    n_before = 0
    if cond["type"] == "level_shift" and starts:
        n_before = int(cond.get("lookback_windows", DEFAULT_LOOKBACK))
        f_lb = to_filters(rule.scope, metric.adjusted, from_epoch(starts[0] - n_before * w),
                          from_epoch(starts[0]))
        lookback = await rollup_windows(session, rule.org_id, metric, f_lb, fleet, w,
                                        percentiles_of([rule.statistic]))
        keys |= {k for (_, k) in lookback if match(k)}
    base: dict[SeriesKey, np.ndarray] = {}
    if cond["type"] == "baseline" and starts:
        base = await baselines(session, rule.org_id, metric, f, fleet, rule.statistic,
                               cond.get("baseline", "prev_24h"), starts)
    out = []
    for k in sorted(keys, key=key_to_str):
        by_w = data.get((rule.org_id, k), {})
        vals = np.array([np.nan if (s := by_w.get(t)) is None or (v := s.value(rule.statistic))
                         is None else v for t in starts], dtype=np.float64)
        if n_before:
            lb = lookback.get((rule.org_id, k), {})
            prev = np.array([np.nan if (s := lb.get(t)) is None or (v := s.value(
                rule.statistic)) is None else v for t in range(starts[0] - n_before * w,
                                                                 starts[0], w)])
            b = evaluate_windows(cond, np.concatenate([prev, vals]))
            br = Breaches(b.breach[n_before:], b.threshold[n_before:], b.detail[n_before:])
            out.append(SeriesEval(k, vals, br))
            continue
        bl = base.get(k) if cond["type"] == "baseline" else None
        if cond["type"] == "baseline" and bl is None:
            bl = np.full(len(starts), np.nan)
        out.append(SeriesEval(k, vals, evaluate_windows(cond, vals, bl), bl))
    return out


async def evaluate_cycle(sessionmaker: async_sessionmaker[AsyncSession],
                         now: datetime | None = None,
                         rule_ids: Sequence[uuid.UUID] | None = None,
                         org_ids: Sequence[uuid.UUID] | None = None) -> CycleResult:
    """One evaluation cycle over every enabled rule (or the ones given)."""
    t0 = time.perf_counter()
    now = now or datetime.now(UTC)
    res = CycleResult()
    async with sessionmaker() as session:
        rules = await load_rules(session, rule_ids, org_ids)
        res.rules = len(rules)
        plan = {r.id: windows_to_evaluate(r, now) for r in rules}
        todo = [r for r in rules if plan[r.id]]
        fleets: dict[uuid.UUID, Fleet] = {}
        for org in sorted({r.org_id for r in todo}):
            fleets[org] = await load_fleet(session, org)
        # One raw read per (metric, window size) for every org and rule that needs it.
        groups: dict[tuple[str, int], list[Rule]] = {}
        for r in todo:
            groups.setdefault((r.metric, r.window_s), []).append(r)
        data: dict[tuple[str, int], Windows] = {}
        for (metric_name, w), rs in groups.items():
            metric = METRICS[metric_name]
            start = min(plan[r.id][0] for r in rs)
            end = max(plan[r.id][-1] for r in rs) + w
            orgs = sorted({r.org_id for r in rs})
            if metric.kind is None:
                heard = await agent_last_heard(session, orgs)
                data[(metric_name, w)] = silence_windows(heard, w, list(range(start, end, w)))
            else:
                data[(metric_name, w)] = await raw_windows(
                    session, orgs, metric, w, from_epoch(start), from_epoch(end),
                    percentiles_of(r.statistic for r in rs))
        stored = await load_stored(session, [r.id for r in todo])
        computed: list[tuple[Rule, list[SeriesEval]]] = []
        for r in todo:
            fleet = fleets[r.org_id]
            try:
                keys = {_parse_key(r.kind, k) for k in stored[r.id].states if k != GROUP_KEY}
                evals = await series_values(session, r, fleet, data[(r.metric, r.window_s)],
                                            plan[r.id], {k for k in keys if k is not None})
            except QueryError as exc:
                res.errors[str(r.id)] = str(exc)
                log.warning("alert rule %s not evaluated: %s", r.id, exc)
                continue
            computed.append((r, evals))
            res.series += len(evals)
    plans = [(r, plan_rule(r, plan[r.id], evals, fleets[r.org_id], stored[r.id]))
             for r, evals in computed]
    quiet = [(r, plan[r.id][-1] + r.window_s) for r, p in plans if p.quiet]
    async with sessionmaker() as session:
        advanced = await advance_quiet(session, quiet)
    res.evaluated += len(advanced)
    res.conflicts += len(quiet) - len(advanced)
    for r, p in plans:
        if p.quiet:
            continue
        async with sessionmaker() as session:
            events = await apply_plan(session, r, plan[r.id][-1] + r.window_s, p, stored[r.id])
        if events is None:
            res.conflicts += 1
        else:
            res.evaluated += 1
            res.events += events
    res.elapsed_ms = (time.perf_counter() - t0) * 1000
    return res


def _parse_key(metric: MetricKind, s: str) -> SeriesKey | None:
    """A stored series key back into typed values (uuid, int or str per key column)."""
    parts = s.split("|")
    cols = metric.series_key
    if len(parts) != len(cols):
        return None
    types = metric.spec.key_types if metric.spec else ("uuid",)
    out: list[Any] = []
    for p, t in zip(parts, types, strict=True):
        if t == "uuid":
            out.append(uuid.UUID(p))
        elif t in ("integer", "smallint", "bigint"):
            out.append(int(p))
        else:
            out.append(p)
    return tuple(out)


def _iso(t: float) -> str:
    return from_epoch(t).isoformat()


def _num(v: float | None) -> float | None:
    return None if v is None or not np.isfinite(v) else float(v)


def _evidence(rule: Rule, fleet: Fleet, evals: dict[str, SeriesEval],
              states: dict[str, SeriesState], agreeing: list[str], starts: list[int], i: int,
              began: int) -> dict[str, Any]:
    """Why a group fired (or how it stood when it resolved): each agreeing series' values
    against the threshold or baseline over its last Y windows, and where to look."""
    w = rule.window_s
    metric = rule.kind
    t = starts[i]
    series = []
    for k in agreeing:
        e, st = evals[k], states[k]
        d = describe(metric, e.key, fleet)
        d["value"] = _num(e.values[i])
        d["threshold"] = _num(e.breaches.threshold[i])
        d["baseline"] = None if e.baseline is None else _num(e.baseline[i])
        n = len(st.history)
        d["values"] = [{"start": _iso(t - (n - 1 - j) * w), "value": _num(v),
                        "threshold": _num(th), "breach": b}
                       for j, (b, v, th) in enumerate(zip(st.history, st.values, st.thresholds,
                                                          strict=False))]
        if e.breaches.detail and e.breaches.detail[i] is not None:
            d["level_shift"] = e.breaches.detail[i]
        series.append(d)
    head = series[0] if series else {}
    keys = [evals[k].key for k in agreeing]
    return {"rule_name": rule.name, "metric": rule.metric, "statistic": rule.statistic,
            "unit": metric.unit, "window_s": w, "condition": rule.condition,
            "x": rule.x, "y": rule.y, "n": rule.n, "m": rule.m,
            "value": head.get("value"), "threshold": head.get("threshold"),
            "baseline": head.get("baseline"), "series": series, "agreeing": len(series),
            "time_range": {"from": _iso(began), "to": _iso(t + w)},
            "dashboard_path": dashboard_path(metric, keys, fleet,
                                             from_epoch(began - 10 * w),
                                             from_epoch(t + 11 * w))}


class Conflict(Exception):
    """Another evaluation changed the alert first: this rule's transaction rolls back."""


@dataclass
class Stored:
    """A rule's running state as read before its compare-and-set."""

    states: dict[str, SeriesState] = field(default_factory=dict)
    open_alerts: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)


@dataclass
class Transition:
    group_key: str
    kind: str  # firing | resolved
    at: int  # end of the window that decided it (epoch s)
    first: int  # start of the first breaching window behind it
    evidence: dict[str, Any]


@dataclass
class RulePlan:
    upserts: list[dict[str, Any]]
    deletes: list[str]
    transitions: list[Transition]

    @property
    def quiet(self) -> bool:
        return not (self.upserts or self.deletes or self.transitions)


def _idle(s: SeriesState) -> bool:
    return s.state == "ok" and not any(s.history)


def plan_rule(rule: Rule, starts: list[int], evals: list[SeriesEval], fleet: Fleet,
              stored: Stored) -> RulePlan:
    """The rule's transitions over `starts` (pure). Idle series (ok, no breach in their last
    Y windows) keep no state row, so a quiet fleet costs no writes."""
    w = rule.window_s
    open_alerts = dict(stored.open_alerts)
    by_key = {key_to_str(e.key): e for e in evals}
    states: dict[str, SeriesState] = {}
    for k in by_key:
        st = stored.states.get(k, SeriesState())
        if rule.n == 1:
            # The open alert is the truth about a group (e.g. after an edit reset states).
            st = SeriesState("firing" if k in open_alerts else
                             ("pending" if st.state == "firing" else st.state), st.history,
                             st.values, st.thresholds)
        states[k] = st
    group = stored.states.get(GROUP_KEY, SeriesState()).state
    group = "firing" if GROUP_KEY in open_alerts else ("ok" if group == "firing" else group)
    group_before = group
    out: list[Transition] = []
    for i, t in enumerate(starts):
        met: list[str] = []
        for k, e in by_key.items():
            states[k], tr = step_series(states[k], bool(e.breaches.breach[i]), rule.x, rule.y)
            states[k].push(e.values[i], e.breaches.threshold[i], rule.y)
            if states[k].state == "firing":
                met.append(k)
            if rule.n == 1 and tr is not None and (tr == "firing") != (k in open_alerts):
                first = first_breach(states[k], t, w)
                ev = _evidence(rule, fleet, by_key, states, [k], starts, i, first)
                out.append(Transition(k, tr, t + w, first, ev))
                if tr == "firing":
                    open_alerts[k] = (uuid.UUID(int=0), 0)
                else:
                    open_alerts.pop(k, None)
        if rule.n > 1:
            group, tr = step_group(group, len(met), rule.n)
            if tr is not None:
                agreeing = met if tr == "firing" else [k for k in by_key if any(
                    by_key[k].breaches.breach[max(0, i - rule.y + 1): i + 1])] or list(by_key)
                first = min((first_breach(states[k], t, w) for k in agreeing), default=t)
                ev = _evidence(rule, fleet, by_key, states, agreeing, starts, i, first)
                ev["m_matched"] = len(by_key)
                out.append(Transition(GROUP_KEY, tr, t + w, first, ev))
    end = from_epoch(starts[-1] + w)
    upserts = [{"r": rule.id, "k": k, "o": rule.org_id, "s": st.state, "h": st.history,
                "rv": st.values, "rt": st.thresholds, "v": _num(by_key[k].values[-1]),
                "e": end}
               for k, st in states.items() if not _idle(st)]
    deletes = [k for k, st in states.items() if _idle(st) and k in stored.states]
    deletes += [k for k in stored.states if k not in by_key and k != GROUP_KEY]
    if rule.n > 1 and (group != "ok" or group_before != group):
        upserts.append({"r": rule.id, "k": GROUP_KEY, "o": rule.org_id, "s": group, "h": [],
                        "rv": [], "rt": [], "v": None, "e": end})
    elif rule.n > 1 and GROUP_KEY in stored.states and group == "ok":
        deletes.append(GROUP_KEY)
    return RulePlan(upserts, deletes, out)


async def load_stored(session: AsyncSession, rule_ids: list[uuid.UUID]
                      ) -> dict[uuid.UUID, Stored]:
    """States and open alerts of many rules (read after the rules themselves, so a newer
    state always comes with a newer eval_version and loses nothing to the compare-and-set)."""
    out: dict[uuid.UUID, Stored] = {r: Stored() for r in rule_ids}
    if not rule_ids:
        return out
    for r, k, st, h, v, th in (await session.execute(text(
            "SELECT rule_id, series_key, state, history, recent_values, recent_thresholds "
            "FROM alert_series_state "
            "WHERE rule_id = ANY(:r)"), {"r": rule_ids})).all():
        out[r].states[k] = SeriesState(st, list(h), list(v), list(th))
    for r, g, a, v in (await session.execute(text(
            "SELECT rule_id, group_key, id, version FROM alerts WHERE rule_id = ANY(:r) "
            "AND state = 'firing'"), {"r": rule_ids})).all():
        out[r].open_alerts[g] = (a, v)
    return out


async def advance_quiet(session: AsyncSession, rules: list[tuple[Rule, int]]) -> set[uuid.UUID]:
    """Rules with nothing to write: their cursors advance in one statement, each row still
    compare-and-set on its eval_version. Returns the ids that advanced."""
    if not rules:
        return set()
    async with session.begin():
        rows = (await session.execute(text(
            "UPDATE alert_rules r SET evaluated_until = x.u, eval_version = r.eval_version + 1 "
            "FROM unnest(CAST(:ids AS uuid[]), CAST(:vs AS int[]), CAST(:us AS timestamptz[])) "
            "AS x(id, v, u) WHERE r.id = x.id AND r.eval_version = x.v AND r.enabled "
            "RETURNING r.id"), {"ids": [r.id for r, _ in rules],
                                "vs": [r.eval_version for r, _ in rules],
                                "us": [from_epoch(u) for _, u in rules]})).all()
    return {r[0] for r in rows}


async def apply_plan(session: AsyncSession, rule: Rule, until: int, plan: RulePlan,
                     stored: Stored) -> int | None:
    """Write one rule's plan in one transaction: compare-and-set on eval_version first (None
    when another evaluation got there first), then states, alerts and events. Returns the
    number of events written."""
    try:
        async with session.begin():
            won = (await session.execute(text(
                "UPDATE alert_rules SET evaluated_until = :u, eval_version = eval_version + 1 "
                "WHERE id = :id AND eval_version = :v AND enabled RETURNING eval_version"),
                {"u": from_epoch(until), "id": rule.id, "v": rule.eval_version})).first()
            if won is None:
                return None
            open_alerts = dict(stored.open_alerts)
            events = 0
            for tr in plan.transitions:
                events += await _transition(session, rule, tr, open_alerts)
            if plan.deletes:
                await session.execute(text(
                    "DELETE FROM alert_series_state WHERE rule_id = :r AND series_key = ANY(:k)"),
                    {"r": rule.id, "k": plan.deletes})
            if plan.upserts:
                await session.execute(text(
                    "INSERT INTO alert_series_state (rule_id, series_key, org_id, state, "
                    "history, recent_values, recent_thresholds, last_value, window_end) "
                    "VALUES (:r, :k, :o, :s, :h, :rv, :rt, :v, :e) "
                    "ON CONFLICT (rule_id, series_key) DO UPDATE SET state = excluded.state, "
                    "history = excluded.history, recent_values = excluded.recent_values, "
                    "recent_thresholds = excluded.recent_thresholds, "
                    "last_value = excluded.last_value, window_end = excluded.window_end"),
                    plan.upserts)
            return events
    except Conflict:
        return None


async def _transition(session: AsyncSession, rule: Rule, tr: Transition,
                      open_alerts: dict[str, tuple[uuid.UUID, int]]) -> int:
    """Open or resolve one alert and write its event, both compare-and-set."""
    ev = json.dumps(tr.evidence)
    if tr.kind == "firing":
        if tr.group_key in open_alerts:
            return 0
        alert_id = uuid.uuid4()
        await session.execute(text(
            "INSERT INTO alerts (id, org_id, rule_id, group_key, state, started_at, evidence, "
            "version) VALUES (:id, :o, :r, :g, 'firing', :s, CAST(:ev AS jsonb), 1)"),
            {"id": alert_id, "o": rule.org_id, "r": rule.id, "g": tr.group_key,
             "s": from_epoch(tr.first), "ev": ev})
        open_alerts[tr.group_key] = (alert_id, 1)
    else:
        if tr.group_key not in open_alerts:
            return 0
        alert_id, version = open_alerts.pop(tr.group_key)
        done = (await session.execute(text(
            "UPDATE alerts SET state = 'resolved', resolved_at = :t, version = version + 1, "
            "updated_at = now(), evidence = evidence || jsonb_build_object('resolution', "
            "CAST(:ev AS jsonb)) WHERE id = :id AND version = :v AND state = 'firing' "
            "RETURNING id"), {"t": from_epoch(tr.at), "id": alert_id, "v": version,
                              "ev": ev})).first()
        if done is None:
            raise Conflict(str(alert_id))
    await session.execute(text(
        "INSERT INTO alert_events (id, org_id, rule_id, alert_id, kind, at, evidence) "
        "VALUES (:id, :o, :r, :a, :k, :at, CAST(:ev AS jsonb))"),
        {"id": uuid.uuid4(), "o": rule.org_id, "r": rule.id, "a": alert_id, "k": tr.kind,
         "at": from_epoch(tr.at), "ev": ev})
    return 1
