"""The live evaluator checked against a small reference model: random per-series window
values over many cycles, rules (X of Y, N of M) created, edited, disabled and deleted
mid-stream, replays after a worker gap and two evaluators running the same cycle. After
every step the stored alerts and events must equal the model's."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from sqlalchemy import Engine, text

from stormwatch.services.alerts.evaluate import CATCH_UP_S, SETTLE_S, evaluate_cycle
from stormwatch.services.alerts.rules import judging_from
from tests.alert_helpers import (
    WINDOW_S,
    aligned_now,
    insert_mesh,
    insert_rule,
    make_agents,
    sessionmaker_for,
)

# A fixed seed and about a minute in `make test`; HYPOTHESIS_PROFILE=soak walks far more.
# Registered here, not in a conftest, so other modules' Hypothesis tests keep their budgets.
_SLOW = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
settings.register_profile("alerts_default", derandomize=True, deadline=None, max_examples=6,
                          stateful_step_count=25, suppress_health_check=_SLOW)
settings.register_profile("alerts_soak", derandomize=False, deadline=None, max_examples=200,
                          stateful_step_count=60, suppress_health_check=_SLOW)
PROFILE = settings.get_profile(
    "alerts_soak" if os.environ.get("HYPOTHESIS_PROFILE") == "soak" else "alerts_default")

W = WINDOW_S
OK_US, BAD_US, THRESHOLD_US = 1_000.0, 30_000.0, 10_000
N_WINDOWS = 400  # the simulated time the machine may walk through


@dataclass
class ModelRule:
    """What the evaluator should hold for one rule."""
    id: uuid.UUID
    x: int
    y: int
    n: int
    cursor: int  # epoch s of the first window the rule judges
    created: int
    enabled: bool = True
    hist: dict[int, list[bool]] = field(default_factory=dict)
    state: dict[int, str] = field(default_factory=dict)
    group: str = "ok"
    open: set[Any] = field(default_factory=set)  # open groups: series index or "rule"
    events: list[tuple[Any, str, int]] = field(default_factory=list)

    def reset(self, cursor: int) -> None:
        """An edit (or enabling again): states cleared, judged anew from cursor."""
        self.cursor = cursor
        self.hist = {}
        self.state = {}
        self.group = "ok"

    def step(self, t: int, breach: dict[int, bool]) -> None:
        met = 0
        for s, b in breach.items():
            state = self.state.get(s, "ok")
            if self.n == 1:
                state = "firing" if s in self.open else (
                    "pending" if state == "firing" else state)
            hist = (self.hist.get(s, []) + [b])[-self.y:]
            is_met = sum(hist) >= self.x
            calm = "pending" if any(hist) else "ok"
            new = "firing" if is_met else calm
            self.hist[s], self.state[s] = hist, new
            if new == "firing":
                met += 1
            if self.n == 1:
                if new == "firing" and s not in self.open:
                    self.open.add(s)
                    self.events.append((s, "firing", t + W))
                elif new != "firing" and s in self.open:
                    self.open.discard(s)
                    self.events.append((s, "resolved", t + W))
        if self.n > 1:
            firing = "rule" in self.open
            if firing and met < self.n:
                self.open.discard("rule")
                self.events.append(("rule", "resolved", t + W))
            elif not firing and met >= self.n:
                self.open.add("rule")
                self.events.append(("rule", "firing", t + W))


class AlertModel(RuleBasedStateMachine):
    """One org, two agents (two series: a->b and b->a), simulated time from `start`."""

    rules = Bundle("rules")

    def __init__(self, db: Engine, make_org: Callable[[], Any], database_url: str) -> None:
        super().__init__()
        self.db = db
        self.org_id = make_org().org_id
        self.agents = make_agents(db, self.org_id, [{"name": "a"}, {"name": "b"}])
        self.series = [(self.agents[0], self.agents[1]), (self.agents[1], self.agents[0])]
        self.start = aligned_now() - timedelta(seconds=N_WINDOWS * W)
        self.t0 = int(self.start.timestamp())
        self.windows = 0  # windows whose data is written
        self.values: list[dict[int, bool]] = []  # breach per window per series
        self.model: dict[uuid.UUID, ModelRule] = {}
        self.loop = asyncio.new_event_loop()
        self.sm = sessionmaker_for(database_url)
        self.evaluated_at = 0  # windows closed at the last cycle

    def teardown(self) -> None:
        self.loop.close()

    def now_at(self, windows: int) -> datetime:
        return self.start + timedelta(seconds=windows * W + SETTLE_S + 1)

    @rule(breach=st.lists(st.booleans(), min_size=2, max_size=2),
          count=st.integers(1, 3))
    @precondition(lambda self: self.windows < N_WINDOWS - 40)
    def windows_pass(self, breach: list[bool], count: int) -> None:
        """The next windows' samples arrive (the same breach pattern for `count` windows)."""
        for _ in range(count):
            start = self.start + timedelta(seconds=self.windows * W)
            for s, (src, dst) in enumerate(self.series):
                insert_mesh(self.db, self.org_id, src, dst, start,
                            [BAD_US if breach[s] else OK_US], rate_hz=1, seed=self.windows)
            self.values.append({0: breach[0], 1: breach[1]})
            self.windows += 1

    @rule(target=rules, x=st.integers(1, 3), extra=st.integers(0, 2), n=st.integers(1, 2))
    def create_rule(self, x: int, extra: int, n: int) -> uuid.UUID:
        # Created within the window now open, as the API would (judging from its start).
        created = self.t0 + self.windows * W
        rid = insert_rule(self.db, self.org_id, statistic="mean", x=x, y=x + extra, n=n,
                          condition={"type": "above", "value": THRESHOLD_US})
        cursor = judging_from(W, self.now_at(self.windows))
        with self.db.begin() as c:
            c.execute(text("UPDATE alert_rules SET evaluated_until = :u WHERE id = :r"),
                      {"u": cursor, "r": rid})
        self.model[rid] = ModelRule(rid, x, x + extra, n, int(cursor.timestamp()), created)
        return rid

    def _redefine(self, rid: uuid.UUID, sets: str, params: dict[str, Any]) -> int:
        """A definition change as update_rule makes it: states cleared, cursor moved to the
        window holding now, eval_version bumped."""
        cursor = judging_from(W, self.now_at(self.windows))
        with self.db.begin() as c:
            c.execute(text(f"UPDATE alert_rules SET {sets}, evaluated_until = :u, "
                           "eval_version = eval_version + 1 WHERE id = :r"),
                      {**params, "u": cursor, "r": rid})
            c.execute(text("DELETE FROM alert_series_state WHERE rule_id = :r"), {"r": rid})
        return int(cursor.timestamp())

    @rule(rid=rules, x=st.integers(1, 3), extra=st.integers(0, 2))
    def edit_rule(self, rid: uuid.UUID, x: int, extra: int) -> None:
        m = self.model[rid]
        if not m.enabled:
            return
        m.reset(self._redefine(rid, "x = :x, y = :y", {"x": x, "y": x + extra}))
        m.x, m.y = x, x + extra

    @rule(rid=rules)
    def toggle_rule(self, rid: uuid.UUID) -> None:
        m = self.model[rid]
        if m.enabled:
            with self.db.begin() as c:
                c.execute(text("UPDATE alert_rules SET enabled = false WHERE id = :r"),
                          {"r": rid})
            m.enabled = False
        else:
            m.reset(self._redefine(rid, "enabled = true", {}))
            m.enabled = True

    @rule(rid=consumes(rules))
    def delete_rule(self, rid: uuid.UUID) -> None:
        with self.db.begin() as c:
            c.execute(text("DELETE FROM alert_rules WHERE id = :r"), {"r": rid})
        del self.model[rid]

    @rule(concurrent=st.booleans())
    def cycle(self, concurrent: bool) -> None:
        """The beat runs a cycle now (after a gap if windows passed since the last one); with
        `concurrent`, two evaluators run the same cycle on separate connections."""
        now = self.now_at(self.windows)
        runs = 2 if concurrent else 1

        async def go() -> list[Any]:
            return list(await asyncio.gather(*(evaluate_cycle(self.sm, now=now,
                                                              org_ids=[uuid.UUID(self.org_id)])
                                               for _ in range(runs))))
        results = self.loop.run_until_complete(go())
        for res in results:
            assert res.errors == {}, res.errors
        newest_end = self.t0 + self.windows * W
        for m in self.model.values():
            if not m.enabled:
                continue
            first = max(newest_end - CATCH_UP_S, m.cursor)
            for t in range(first, newest_end, W):
                m.step(t, self.values[(t - self.t0) // W])
            m.cursor = max(m.cursor, newest_end)

    def _key(self, group_key: str) -> Any:
        for s, (src, dst) in enumerate(self.series):
            if group_key.startswith(f"{src}|{dst}"):
                return s
        return group_key

    @invariant()
    def stored_equals_model(self) -> None:
        with self.db.connect() as c:
            alerts = c.execute(text(
                "SELECT rule_id, group_key, state FROM alerts WHERE org_id = :o"),
                {"o": self.org_id}).all()
            events = c.execute(text(
                "SELECT e.rule_id, a.group_key, e.kind, e.at FROM alert_events e "
                "JOIN alerts a ON a.id = e.alert_id WHERE e.org_id = :o"),
                {"o": self.org_id}).all()
        for rid, m in self.model.items():
            firing = [self._key(a.group_key) for a in alerts
                      if a.rule_id == rid and a.state == "firing"]
            assert len(firing) == len(set(firing)), f"two open alerts in a group: {firing}"
            assert set(firing) == m.open, (rid, firing, m.open)
            got = sorted((self._key(e.group_key), e.kind, int(e.at.timestamp()))
                         for e in events if e.rule_id == rid)
            assert sorted(got, key=str) == sorted(m.events, key=str), (got, m.events)
            # nothing is told about a window that ended before the rule existed
            assert all(at > m.created for _, _, at in got), (m.created, got)


def test_evaluator_matches_the_model(services: Any, db: Engine, make_org: Callable) -> None:
    run_state_machine_as_test(lambda: AlertModel(db, make_org, services.database_url),
                              settings=PROFILE)


def test_editing_a_firing_n_of_m_rule_keeps_its_alert_until_a_window_says_otherwise(
        services: Any, db: Engine, make_org: Callable) -> None:
    """The model's shrunk example, as a plain sequence: a firing 2-of-2 rule is edited, and
    the next cycle (no window closed since) must not resolve it on the open window."""
    m = AlertModel(db, make_org, services.database_url)
    try:
        rid = m.create_rule(x=1, extra=0, n=2)
        m.windows_pass(breach=[True, True], count=3)
        m.cycle(concurrent=False)
        m.stored_equals_model()
        assert m.model[rid].open == {"rule"}
        m.edit_rule(rid=rid, x=1, extra=0)
        m.cycle(concurrent=False)
        m.stored_equals_model()
        m.windows_pass(breach=[True, True], count=1)
        m.cycle(concurrent=False)
        m.stored_equals_model()
    finally:
        m.teardown()
