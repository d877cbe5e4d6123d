"""Live evaluation. One cycle:

1. reads every enabled rule, then the running state of those rules;
2. reads raw samples once per (metric, window size) for all orgs and rules: the complete
   windows since each rule's cursor and the window still open, per series, with exact
   percentiles (percentile_cont), into one (series x window) matrix per statistic;
3. per rule, slices its series out of the matrix and applies the condition (numpy), then
   steps the states (conditions.py) of the series that breach or were not idle: a quiet
   series of a quiet rule costs no Python work and no write;
4. writes every rule with something to write in one transaction of a few statements,
   compare-and-set on each rule's eval_version (and on each alert's version when resolving
   it), with the alert_events rows notifications read. Should that transaction fail for any
   reason but a lost compare-and-set, each rule is written again in its own transaction;
5. isolates failures: a rule (or an org) whose reads, evaluation or write fail is skipped,
   logged with its id and reason, retried next cycle and counted on its row
   (eval_failures_in_a_row, eval_last_error), which health reports; the others go on.

A rule judges from its cursor (evaluated_until): set to the start of the window holding its
creation or the last change of its definition, so the catch-up of CATCH_UP_S never replays
data from before it existed (its backtest shows the past).

The open window may be decided early: once it holds enough samples for the statistic and
already breaches, that series steps at once (a spike is told before its window closes);
otherwise the window waits until it has closed (plus SETTLE_S for late batches)."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
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
from stormwatch.services.alerts.definition import Rule, load_rules
from stormwatch.services.alerts.evidence import (
    Evidence,
    SeriesEvidence,
    TimeRange,
    WindowValue,
)
from stormwatch.services.alerts.metrics import (
    METRICS,
    MetricKind,
    samples_needed,
    statistic_unit,
)
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
    pair_floors,
    path_change_windows,
    per_floor,
    percentiles_of,
    raw_windows,
    rollup_windows,
    silence_windows,
)
from stormwatch.services.analytics.filters import Fleet, QueryError, load_fleet

log = logging.getLogger("stormwatch.alerts")

# A window is evaluated this long after it closes: agents ship batches every few seconds.
SETTLE_S = 5
# At most this much raw data per rule and cycle when catching up (one window at least).
CATCH_UP_S = 600
# The open window is decided early only with at least this many samples of the series.
EARLY_MIN_SAMPLES = 30
GROUP_KEY = "rule"  # group key of a rule's single alert when N of M > 1


@dataclass
class Due:
    """The windows a rule evaluates this cycle: complete ones, then the open one (if any)."""

    starts: list[int]
    open_start: int | None  # the last of `starts` when it is the open window
    closed_until: int | None  # the cursor after this cycle (None: unchanged)


@dataclass
class SeriesEval:
    """One series' values and breaches over the windows being evaluated."""

    key: SeriesKey
    values: np.ndarray
    breaches: Breaches
    baseline: np.ndarray | None = None
    early_ok: bool = False  # the open window holds enough samples to be decided early


@dataclass
class CycleResult:
    rules: int = 0
    evaluated: int = 0
    conflicts: int = 0  # rules another evaluation had already advanced
    series: int = 0  # (rule, series) pairs evaluated
    stepped: int = 0  # of which not idle: their states were stepped
    events: int = 0
    errors: dict[str, str] = field(default_factory=dict)
    elapsed_ms: float = 0.0


def due_windows(rule: Rule, now: datetime) -> Due:
    w = rule.window_s
    t = epoch(now)
    newest_end = (t - SETTLE_S) // w * w
    first = newest_end - max(1, CATCH_UP_S // w) * w
    if rule.evaluated_until is not None:
        first = max(first, epoch(rule.evaluated_until))
    closed = list(range(first, newest_end, w))
    # A rule created (or changed) within the open window starts judging at the next one.
    open_start = newest_end if first <= newest_end < t else None
    starts = closed + ([open_start] if open_start is not None else [])
    return Due(starts, open_start, closed[-1] + w if closed else None)


class Batch:
    """One raw read: every series of the orgs over consecutive windows, as matrices."""

    def __init__(self, data: Windows, first: int, end: int, window_s: int) -> None:
        self.data = data
        self.first = first
        self.window_s = window_s
        self.n_windows = max(0, (end - first) // window_s)
        self.keys = list(data)
        self.row = {k: i for i, k in enumerate(self.keys)}
        self.key_str = [key_to_str(k[1]) for k in self.keys]
        self._by_org: dict[uuid.UUID, list[int]] = {}
        for i, (o, _) in enumerate(self.keys):
            self._by_org.setdefault(o, []).append(i)
        self._mats: dict[str, np.ndarray] = {}
        self._counts: np.ndarray | None = None
        self._scoped: dict[tuple[uuid.UUID, str], np.ndarray] = {}

    def rows_in_scope(self, rule: Rule, fleet: Fleet) -> np.ndarray:
        ck = (rule.org_id, json.dumps([rule.metric, rule.scope], sort_keys=True))
        got = self._scoped.get(ck)
        if got is None:
            match = matcher(rule.kind, to_filters(rule.scope, rule.kind.adjusted), fleet)
            got = np.asarray([i for i in self._by_org.get(rule.org_id, [])
                              if match(self.keys[i][1])], dtype=np.int64)
            self._scoped[ck] = got
        return got

    def matrix(self, statistic: str) -> np.ndarray:
        m = self._mats.get(statistic)
        if m is None:
            m = np.full((len(self.keys), self.n_windows), np.nan)
            w = self.window_s
            for i, k in enumerate(self.keys):
                for t, s in self.data[k].items():
                    j = (t - self.first) // w
                    if 0 <= j < self.n_windows:
                        v = s.value(statistic)
                        if v is not None:
                            m[i, j] = v
            self._mats[statistic] = m
        return m

    def counts(self) -> np.ndarray:
        if self._counts is None:
            c = np.zeros((len(self.keys), self.n_windows))
            for i, k in enumerate(self.keys):
                for t, s in self.data[k].items():
                    j = (t - self.first) // self.window_s
                    if 0 <= j < self.n_windows:
                        c[i, j] = s.samples
            self._counts = c
        return self._counts


async def rule_series(session: AsyncSession, rule: Rule, fleet: Fleet, batch: Batch,
                      due: Due, stored: Stored) -> tuple[list[SeriesEval], int]:
    """The rule's series that breach in a due window or were not idle, with their values
    and breaches; and how many series the rule watched."""
    metric = rule.kind
    w = rule.window_s
    starts = due.starts
    cols = (np.asarray(starts, dtype=np.int64) - batch.first) // w
    rows = batch.rows_in_scope(rule, fleet)
    cond = rule.condition
    vals = batch.matrix(rule.statistic)[rows][:, cols] if rows.size else np.zeros((0, len(cols)))
    # Series with state or an open alert are stepped even when quiet: after an edit cleared
    # the states, an open alert still resolves once the new definition no longer holds.
    held = set(stored.states) | set(stored.open_alerts)
    known = {batch.key_str[i] for i in rows} if held else set()
    parsed = [(k, _parse_key(metric, k)) for k in sorted(held)
              if k != GROUP_KEY and k not in known]
    tracked = [k for k, p in parsed if p is not None]
    extra_keys = [p for _, p in parsed if p is not None]
    if extra_keys:  # series with state but no samples now: their windows have no data
        vals = np.vstack([vals, np.full((len(extra_keys), len(cols)), np.nan)])
    keys: list[SeriesKey] = [batch.keys[i][1] for i in rows] + extra_keys
    early_ok = np.zeros(len(keys), dtype=bool)
    if due.open_start is not None and rows.size:
        need = max(samples_needed(rule.statistic), EARLY_MIN_SAMPLES if metric.kind else 1)
        early_ok[: rows.size] = batch.counts()[rows, cols[-1]] >= need
    n_watched = len(keys)
    if cond["type"] in ("above", "below"):
        thr = float(cond["value"])
        with np.errstate(invalid="ignore"):
            br = (vals > thr) if cond["type"] == "above" else (vals < thr)
        br &= np.isfinite(vals)
        if due.open_start is not None:
            br[:, -1] &= early_ok
        has_state = np.zeros(len(keys), dtype=bool)
        if held:
            names = [batch.key_str[i] for i in rows] + tracked
            has_state = np.asarray([k in held for k in names], dtype=bool)
        pick = np.flatnonzero(br.any(axis=1) | has_state)
        thr_row = np.full(len(cols), thr)
        return [SeriesEval(keys[i], vals[i], Breaches(br[i], thr_row), None, bool(early_ok[i]))
                for i in pick], n_watched
    out: list[SeriesEval] = []
    if cond["type"] == "baseline":
        base = await cached_baselines(session, rule, fleet, starts)
        for i, k in enumerate(keys):
            bl = base.get(k)
            if bl is None:
                bl = np.full(len(cols), np.nan)
            b = evaluate_windows(cond, vals[i], bl)
            if due.open_start is not None and not early_ok[i]:
                b.breach[-1] = False
            if b.breach.any() or key_to_str(k) in held:
                out.append(SeriesEval(k, vals[i], b, bl, bool(early_ok[i])))
        return out, n_watched
    # level shift: the detector sees the lookback windows before the due ones too
    n_before = int(cond.get("lookback_windows", DEFAULT_LOOKBACK))
    f_lb = to_filters(rule.scope, metric.adjusted, from_epoch(starts[0] - n_before * w),
                      from_epoch(starts[0]))
    lookback = await rollup_windows(session, rule.org_id, metric, f_lb, fleet, w,
                                    percentiles_of([rule.statistic]))
    for i, k in enumerate(keys):
        lb = lookback.get((rule.org_id, k), {})
        prev = np.array([np.nan if (s := lb.get(t)) is None or (v := s.value(rule.statistic))
                         is None else v for t in range(starts[0] - n_before * w, starts[0], w)])
        b = evaluate_windows(cond, np.concatenate([prev, vals[i]]))
        br = Breaches(b.breach[n_before:], b.threshold[n_before:], b.detail[n_before:])
        if due.open_start is not None and not early_ok[i]:
            br.breach[-1] = False
        if br.breach.any() or key_to_str(k) in held:
            out.append(SeriesEval(k, vals[i], br, None, bool(early_ok[i])))
    return out, n_watched


# Baselines change with the window's hour only: kept a few minutes across cycles.
_BASELINE_TTL_S = 300.0
_baseline_cache: dict[tuple[Any, ...], tuple[float, dict[SeriesKey, np.ndarray], list[int]]] = {}


async def cached_baselines(session: AsyncSession, rule: Rule, fleet: Fleet,
                           starts: list[int]) -> dict[SeriesKey, np.ndarray]:
    hours = sorted({t // 3600 * 3600 for t in starts})
    ck = (rule.org_id, rule.metric, rule.statistic, rule.condition.get("baseline", "prev_24h"),
          json.dumps(rule.scope, sort_keys=True), tuple(hours))
    now = time.monotonic()
    hit = _baseline_cache.get(ck)
    if hit is None or now - hit[0] > _BASELINE_TTL_S:
        per_hour_starts = hours
        got = await baselines(session, rule.org_id, rule.kind,
                              to_filters(rule.scope, rule.kind.adjusted), fleet, rule.statistic,
                              rule.condition.get("baseline", "prev_24h"), per_hour_starts)
        if len(_baseline_cache) > 10_000:
            _baseline_cache.clear()
        hit = _baseline_cache[ck] = (now, got, hours)
    _, by_hour, hs = hit
    idx = np.asarray([hs.index(t // 3600 * 3600) for t in starts], dtype=np.int64)
    return {k: v[idx] for k, v in by_hour.items()}


async def evaluate_cycle(sessionmaker: async_sessionmaker[AsyncSession],
                         now: datetime | None = None,
                         rule_ids: Sequence[uuid.UUID] | None = None,
                         org_ids: Sequence[uuid.UUID] | None = None) -> CycleResult:
    """One evaluation cycle over every enabled rule (or the ones given)."""
    t0 = time.perf_counter()
    now = now or datetime.now(UTC)
    res = CycleResult()
    async with sessionmaker() as session:
        rules = await load_rules(session, rule_ids, org_ids, enabled_only=True)
        res.rules = len(rules)
        due = {r.id: due_windows(r, now) for r in rules}
        todo = [r for r in rules if due[r.id].starts]
        # States are read after the rules: a newer state always comes with a newer
        # eval_version, so nothing read here can be applied over a newer cycle.
        stored = await load_stored(session, [r.id for r in todo])
        fleets: dict[uuid.UUID, Fleet] = {}
        for org in sorted({r.org_id for r in todo}):
            try:
                fleets[org] = await load_fleet(session, org)
            except Exception as exc:  # one org's failure stops only its rules
                await session.rollback()
                _fail(res, [r for r in todo if r.org_id == org], exc)
        todo = [r for r in todo if r.org_id in fleets]
        # One raw read per (metric, window size) for every org and rule that needs it.
        groups: dict[tuple[str, int], list[Rule]] = {}
        for r in todo:
            groups.setdefault((r.metric, r.window_s), []).append(r)
        batches: dict[tuple[str, int], Batch] = {}
        t_now = epoch(now)
        for (metric_name, w), rs in groups.items():
            metric = METRICS[metric_name]
            start = min(due[r.id].starts[0] for r in rs)
            end = max(due[r.id].starts[-1] for r in rs) + w
            orgs = sorted({r.org_id for r in rs})
            try:
                if metric.source == "silence":
                    heard = await agent_last_heard(session, orgs)
                    data = silence_windows(heard, w, list(range(start, end, w)), t_now)
                elif metric.source == "path_changes":
                    data = await path_change_windows(session, orgs, w, start, end, fill=True)
                else:
                    data = await raw_windows(session, orgs, metric, w, from_epoch(start),
                                             from_epoch(min(end, t_now + 1)),
                                             percentiles_of(r.statistic for r in rs))
                if metric.per_floor:
                    data = per_floor(data, {o: await pair_floors(session, o, fleets[o])
                                            for o in orgs})
            except Exception as exc:  # the rules of this read fail; the other reads go on
                await session.rollback()
                _fail(res, rs, exc)
                continue
            batches[(metric_name, w)] = Batch(data, start, end, w)
        plans: list[tuple[Rule, RulePlan]] = []
        for r in todo:
            batch = batches.get((r.metric, r.window_s))
            if batch is None:
                continue
            fleet = fleets[r.org_id]
            try:
                evals, watched = await rule_series(session, r, fleet, batch, due[r.id],
                                                   stored[r.id])
                plan = plan_rule(r, due[r.id], evals, fleet, stored[r.id])
            except Exception as exc:  # one rule's failure must not stop the others
                await session.rollback()
                _fail(res, [r], exc)
                continue
            res.series += watched
            res.stepped += len(evals)
            plans.append((r, plan))
    failed_writes: dict[uuid.UUID, str] = {}
    async with sessionmaker() as session:
        written = await write_cycle(session, [(r, due[r.id].closed_until, p, stored[r.id])
                                              for r, p in plans], failed_writes)
    for r, _ in plans:
        got = written.get(r.id)
        if r.id in failed_writes:
            res.errors[str(r.id)] = failed_writes[r.id]
        elif got is None:
            res.conflicts += 1
        else:
            res.evaluated += 1
            res.events += got
    async with sessionmaker() as session, session.begin():
        await record_outcomes(session, [r.id for r in rules if str(r.id) not in res.errors],
                              {uuid.UUID(k): v for k, v in res.errors.items()})
    res.elapsed_ms = (time.perf_counter() - t0) * 1000
    return res


def _reason(exc: BaseException) -> str:
    msg = str(exc) if isinstance(exc, QueryError) else f"{type(exc).__name__}: {exc}"
    return msg[:500]


def _fail(res: CycleResult, rules: Sequence[Rule], exc: BaseException) -> None:
    reason = _reason(exc)
    for r in rules:
        res.errors[str(r.id)] = reason
        log.warning("alert rule %s (org %s) not evaluated, retried next cycle: %s",
                    r.id, r.org_id, reason, exc_info=not isinstance(exc, QueryError))


async def record_outcomes(session: AsyncSession, ok: Sequence[uuid.UUID],
                          failed: dict[uuid.UUID, str]) -> None:
    """Per-rule failures in a row (health names a rule at FAILING_AFTER); a success resets."""
    if ok:
        await session.execute(text(
            "UPDATE alert_rules SET eval_failures_in_a_row = 0 "
            "WHERE id = ANY(:ids) AND eval_failures_in_a_row > 0"), {"ids": list(ok)})
    if failed:
        await session.execute(text(
            "UPDATE alert_rules r SET eval_failures_in_a_row = r.eval_failures_in_a_row + 1, "
            "eval_last_error = x.e, eval_last_failure = now() FROM unnest("
            "CAST(:ids AS uuid[]), CAST(:es AS text[])) AS x(id, e) WHERE r.id = x.id"),
            {"ids": list(failed), "es": list(failed.values())})


# Health reports a rule that failed this many evaluations in a row.
FAILING_AFTER = 3
FAILING_RULES_SQL = (
    "SELECT id, org_id, name, eval_failures_in_a_row, eval_last_error, eval_last_failure "
    "FROM alert_rules WHERE enabled AND eval_failures_in_a_row >= :n ORDER BY id")


def _parse_key(metric: MetricKind, s: str) -> SeriesKey | None:
    """A stored series key back into typed values (uuid, int or str per key column)."""
    parts = s.split("|")
    if len(parts) != len(metric.series_key):
        return None
    types = metric.key_types
    out: list[Any] = []
    try:
        for p, t in zip(parts, types, strict=True):
            if t == "uuid":
                out.append(uuid.UUID(p))
            elif t in ("integer", "smallint", "bigint"):
                out.append(int(p))
            else:
                out.append(p)
    except ValueError:
        return None
    return tuple(out)


def _num(v: float | None) -> float | None:
    return None if v is None or not np.isfinite(v) else float(v)


def _evidence(rule: Rule, fleet: Fleet, evals: dict[str, SeriesEval],
              states: dict[str, SeriesState], agreeing: list[str], starts: list[int], i: int,
              began: int, m_matched: int | None = None, early: bool = False) -> Evidence:
    """Why a group fired (or how it stood when it resolved): each agreeing series' values
    against the threshold or baseline over its last Y windows, and where to look."""
    w = rule.window_s
    metric = rule.kind
    t = starts[i]
    series = []
    for k in agreeing:
        e, st = evals[k], states[k]
        n = len(st.history)
        d = SeriesEvidence(
            **describe(metric, e.key, fleet), value=_num(e.values[i]),
            threshold=_num(e.breaches.threshold[i]),
            baseline=None if e.baseline is None else _num(e.baseline[i]),
            values=[WindowValue(start=from_epoch(t - (n - 1 - j) * w), value=_num(v),
                                threshold=_num(th), breach=b)
                    for j, (b, v, th) in enumerate(zip(st.history, st.values, st.thresholds,
                                                       strict=False))])
        if e.breaches.detail and e.breaches.detail[i] is not None:
            d.level_shift = e.breaches.detail[i]
        series.append(d)
    head = series[0] if series else SeriesEvidence()
    keys = [evals[k].key for k in agreeing]
    name = head.name if len(series) == 1 else (
        f"{len(series)} series: " + ", ".join(s.name for s in series[:5])
        + (" ..." if len(series) > 5 else ""))
    ev = Evidence(
        rule_name=rule.name, metric=rule.metric, statistic=rule.statistic,
        unit=statistic_unit(metric, rule.statistic), window_s=w, condition=rule.condition,
        x=rule.x, y=rule.y, n=rule.n, m=rule.m, series_name=name, value=head.value,
        threshold=head.threshold, baseline=head.baseline, series=series,
        agreeing=len(series), time_range=TimeRange(start=from_epoch(began),
                                                   end=from_epoch(t + w)),
        dashboard_path=dashboard_path(metric, keys, fleet, from_epoch(began - 10 * w),
                                      from_epoch(t + 11 * w)), decided_early=early)
    if m_matched is not None:
        ev.m_matched = m_matched
    return ev


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
    evidence: Evidence


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


def plan_rule(rule: Rule, due: Due, evals: list[SeriesEval], fleet: Fleet,
              stored: Stored) -> RulePlan:
    """The rule's transitions over the due windows (pure). Idle series (ok, no breach in
    their last Y windows) keep no state row, so a quiet fleet costs no writes. A window a
    series already stepped early is not stepped again when it closes; the open window is
    stepped only by series it already breaches."""
    w = rule.window_s
    starts = due.starts
    open_alerts = dict(stored.open_alerts)
    by_key = {key_to_str(e.key): e for e in evals}
    states: dict[str, SeriesState] = {}
    for k in by_key:
        st = stored.states.get(k, SeriesState())
        if rule.n == 1:
            # The open alert is the truth about a group (e.g. after an edit reset states).
            st = replace(st, state="firing" if k in open_alerts else
                         ("pending" if st.state == "firing" else st.state))
        states[k] = st
    group = stored.states.get(GROUP_KEY, SeriesState()).state
    group = "firing" if GROUP_KEY in open_alerts else ("ok" if group == "firing" else group)
    group_before = group
    stepped: set[str] = set()
    out: list[Transition] = []
    for i, t in enumerate(starts):
        is_open = t == due.open_start
        met: list[str] = []
        for k, e in by_key.items():
            st = states[k]
            b = bool(e.breaches.breach[i])
            if t + w <= st.decided_until or (is_open and not (b and e.early_ok)):
                if st.state == "firing":
                    met.append(k)
                continue
            st, tr = step_series(st, b, rule.x, rule.y)
            st.push(e.values[i], e.breaches.threshold[i], rule.y)
            st.decided_until = t + w
            states[k] = st
            stepped.add(k)
            if st.state == "firing":
                met.append(k)
            if rule.n == 1 and tr is not None and (tr == "firing") != (k in open_alerts):
                first = first_breach(st, t, w)
                ev = _evidence(rule, fleet, by_key, states, [k], starts, i, first,
                               early=is_open)
                out.append(Transition(k, tr, t + w, first, ev))
                if tr == "firing":
                    open_alerts[k] = (uuid.UUID(int=0), 0)
                else:
                    open_alerts.pop(k, None)
        # The open window decides only early firings, as for a series: its missing samples
        # say nothing, and after an edit its cleared states would resolve the group at once.
        if rule.n > 1 and not (is_open and len(met) < rule.n):
            group, tr = step_group(group, len(met), rule.n)
            if tr is not None:
                agreeing = met if tr == "firing" else [k for k in by_key if any(
                    states[k].history)] or list(by_key)
                first = min((first_breach(states[k], t, w) for k in agreeing), default=t)
                ev = _evidence(rule, fleet, by_key, states, agreeing, starts, i, first,
                               m_matched=len(by_key), early=is_open)
                out.append(Transition(GROUP_KEY, tr, t + w, first, ev))
    end = from_epoch(starts[-1] + w)
    upserts = [{"r": rule.id, "k": k, "o": rule.org_id, "s": st.state, "h": st.history,
                "rv": st.values, "rt": st.thresholds, "v": _num(by_key[k].values[-1]),
                "e": from_epoch(st.decided_until) if st.decided_until else end}
               for k, st in states.items() if k in stepped and not _idle(st)]
    deletes = [k for k, st in states.items() if _idle(st) and k in stored.states]
    if rule.n > 1 and group != "ok" and (group != group_before
                                         or GROUP_KEY not in stored.states):
        upserts.append({"r": rule.id, "k": GROUP_KEY, "o": rule.org_id, "s": group, "h": [],
                        "rv": [], "rt": [], "v": None, "e": end})
    elif rule.n > 1 and GROUP_KEY in stored.states and group == "ok":
        deletes.append(GROUP_KEY)
    return RulePlan(upserts, deletes, out)


async def load_stored(session: AsyncSession, rule_ids: list[uuid.UUID]
                      ) -> dict[uuid.UUID, Stored]:
    """States and open alerts of many rules (read after the rules themselves, so a newer
    state always comes with a newer eval_version and loses to the compare-and-set)."""
    out: dict[uuid.UUID, Stored] = {r: Stored() for r in rule_ids}
    if not rule_ids:
        return out
    for r, k, st, h, v, th, we in (await session.execute(text(
            "SELECT rule_id, series_key, state, history, recent_values, recent_thresholds, "
            "window_end FROM alert_series_state WHERE rule_id = ANY(:r)"),
            {"r": rule_ids})).all():
        out[r].states[k] = SeriesState(st, list(h), list(v), list(th),
                                       epoch(we) if we is not None else 0)
    for r, g, a, v in (await session.execute(text(
            "SELECT rule_id, group_key, id, version FROM alerts WHERE rule_id = ANY(:r) "
            "AND state = 'firing'"), {"r": rule_ids})).all():
        out[r].open_alerts[g] = (a, v)
    return out


async def write_cycle(session: AsyncSession,
                      work: list[tuple[Rule, int | None, RulePlan, Stored]],
                      failed: dict[uuid.UUID, str] | None = None) -> dict[uuid.UUID, int]:
    """Write a cycle in one transaction; should it fail (not a lost compare-and-set), write
    each rule in its own, so one rule's bad write costs only that rule (its reason lands in
    `failed`). Returns the events written per rule applied."""
    work = [w for w in work if w[1] is not None or not w[2].quiet]
    try:
        return await _write(session, work)
    except Exception as exc:
        if len(work) == 1:
            if failed is not None:
                failed[work[0][0].id] = _reason(exc)
            log.warning("alert rule %s not written, retried next cycle: %s", work[0][0].id,
                        _reason(exc), exc_info=True)
            return {}
        log.warning("alert cycle write failed, writing rule by rule: %s", _reason(exc))
    out: dict[uuid.UUID, int] = {}
    for w in work:
        out.update(await write_cycle(session, [w], failed))
    return out


async def _write(session: AsyncSession,
                 work: list[tuple[Rule, int | None, RulePlan, Stored]]) -> dict[uuid.UUID, int]:
    """Write rules in one transaction and a handful of statements, whatever their number.
    The rules are locked in id order (two cycles cannot deadlock) and only those whose
    eval_version is still the one they were evaluated at are applied (compare-and-set),
    their versions moved on. Resolving an alert is compare-and-set on its version too; a
    miss rolls the whole cycle back (the next one redoes it). Returns the events written per
    rule applied (rules not applied are absent)."""
    out: dict[uuid.UUID, int] = {}
    if not work:
        return out
    try:
        async with session.begin():
            current: dict[uuid.UUID, int] = dict((await session.execute(text(
                "SELECT id, eval_version FROM alert_rules WHERE id = ANY(:ids) AND enabled "
                "ORDER BY id FOR UPDATE"), {"ids": [w[0].id for w in work]})).all())
            won = [w for w in work if current.get(w[0].id) == w[0].eval_version]
            if not won:
                return out
            await session.execute(text(
                "UPDATE alert_rules r SET evaluated_until = coalesce(x.u, r.evaluated_until), "
                "eval_version = r.eval_version + 1 FROM unnest(CAST(:ids AS uuid[]), "
                "CAST(:us AS timestamptz[])) AS x(id, u) WHERE r.id = x.id"),
                {"ids": [r.id for r, _, _, _ in won],
                 "us": [None if u is None else from_epoch(u) for _, u, _, _ in won]})
            alerts: list[dict[str, Any]] = []
            resolves: list[dict[str, Any]] = []
            events: list[dict[str, Any]] = []
            deletes: list[tuple[uuid.UUID, str]] = []
            upserts: list[dict[str, Any]] = []
            for rule, _, plan, stored in won:
                out[rule.id] = _transition_rows(rule, plan.transitions, dict(stored.open_alerts),
                                                alerts, resolves, events)
                deletes += [(rule.id, k) for k in plan.deletes]
                upserts += plan.upserts
            if resolves:
                done = (await session.execute(text(
                    "UPDATE alerts a SET state = 'resolved', resolved_at = x.t, "
                    "version = a.version + 1, updated_at = now(), evidence = a.evidence || "
                    "jsonb_build_object('resolution', CAST(x.ev AS jsonb)) "
                    "FROM unnest(CAST(:ids AS uuid[]), CAST(:vs AS int[]), "
                    "CAST(:ts AS timestamptz[]), CAST(:evs AS text[])) AS x(id, v, t, ev) "
                    "WHERE a.id = x.id AND a.version = x.v AND a.state = 'firing' "
                    "RETURNING a.id"), {"ids": [r["id"] for r in resolves],
                                        "vs": [r["v"] for r in resolves],
                                        "ts": [r["t"] for r in resolves],
                                        "evs": [r["ev"] for r in resolves]})).all()
                if len(done) != len(resolves):
                    raise Conflict(f"{len(resolves) - len(done)} alerts changed meanwhile")
            # Alerts opened and resolved within the cycle are inserted resolved: a group
            # holds one firing alert at a time (uq_alerts_open_group).
            if alerts:
                await session.execute(text(
                    "INSERT INTO alerts (id, org_id, rule_id, group_key, state, started_at, "
                    "resolved_at, evidence, version) VALUES (:id, :o, :r, :g, :st, :s, :rt, "
                    "CAST(:ev AS jsonb), :v)"), alerts)
            if events:
                await session.execute(text(
                    "INSERT INTO alert_events (id, org_id, rule_id, alert_id, kind, at, "
                    "evidence) VALUES (:id, :o, :r, :a, :k, :at, CAST(:ev AS jsonb))"), events)
            if deletes:
                await session.execute(text(
                    "DELETE FROM alert_series_state s USING unnest(CAST(:r AS uuid[]), "
                    "CAST(:k AS text[])) AS x(r, k) WHERE s.rule_id = x.r "
                    "AND s.series_key = x.k"),
                    {"r": [d[0] for d in deletes], "k": [d[1] for d in deletes]})
            if upserts:
                await session.execute(text(
                    "INSERT INTO alert_series_state (rule_id, series_key, org_id, state, "
                    "history, recent_values, recent_thresholds, last_value, window_end) "
                    "VALUES (:r, :k, :o, :s, :h, :rv, :rt, :v, :e) "
                    "ON CONFLICT (rule_id, series_key) DO UPDATE SET state = excluded.state, "
                    "history = excluded.history, recent_values = excluded.recent_values, "
                    "recent_thresholds = excluded.recent_thresholds, "
                    "last_value = excluded.last_value, window_end = excluded.window_end"),
                    upserts)
    except Conflict as exc:
        log.warning("alert evaluation rolled back, the next cycle redoes it: %s", exc)
        return {}
    return out


def _transition_rows(rule: Rule, transitions: list[Transition],
                     open_alerts: dict[str, tuple[uuid.UUID, int]],
                     alerts: list[dict[str, Any]], resolves: list[dict[str, Any]],
                     events: list[dict[str, Any]]) -> int:
    """Rows that open and resolve a rule's alerts, with their events, in order. An alert
    opened and resolved in one cycle is inserted resolved, at version 2."""
    n = 0
    new: dict[uuid.UUID, dict[str, Any]] = {}  # opened this cycle
    for tr in transitions:
        ev = json.dumps(tr.evidence.to_json())
        if tr.kind == "firing":
            if tr.group_key in open_alerts:
                continue
            alert_id = uuid.uuid4()
            row = {"id": alert_id, "o": rule.org_id, "r": rule.id, "g": tr.group_key,
                   "st": "firing", "s": from_epoch(tr.first), "rt": None, "ev": ev, "v": 1}
            alerts.append(row)
            new[alert_id] = row
            open_alerts[tr.group_key] = (alert_id, 1)
        else:
            if tr.group_key not in open_alerts:
                continue
            alert_id, version = open_alerts.pop(tr.group_key)
            if alert_id in new:
                row = new[alert_id]
                row.update(st="resolved", rt=from_epoch(tr.at), v=2, ev=json.dumps(
                    {**json.loads(str(row["ev"])), "resolution": tr.evidence.to_json()}))
            else:
                resolves.append({"id": alert_id, "v": version, "t": from_epoch(tr.at),
                                 "ev": ev})
        events.append({"id": uuid.uuid4(), "o": rule.org_id, "r": rule.id, "a": alert_id,
                       "k": tr.kind, "at": from_epoch(tr.at), "ev": ev})
        n += 1
    return n
