"""Live evaluation on real PostgreSQL: X of Y consecutive windows, N of M agreeing series,
the compare-and-set that keeps two evaluations from acting twice, and evidence."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, text

from stormwatch.services.alerts.evaluate import SETTLE_S, evaluate_cycle
from tests.alert_helpers import (
    WINDOW_S,
    alerts_of,
    aligned_now,
    at,
    evaluate_windows,
    events_of,
    insert_mesh,
    insert_rule,
    make_agents,
    sessionmaker_for,
)


async def test_x_of_y_fires_on_the_third_bad_window_of_five_and_resolves_once(
        services: Any, db: Engine, org: Any) -> None:
    a, b = make_agents(db, org.org_id, [{"name": "a"}, {"name": "b"}])
    start = aligned_now() - timedelta(seconds=12 * WINDOW_S)
    # p99 spikes (2% of samples at 50 ms) in windows 2, 4 and 5: 3 of the last 5 at window 5.
    spikes = [0, 0, .02, 0, .02, .02, 0, 0, 0, 0, 0, 0]
    insert_mesh(db, org.org_id, a, b, start, [1000.0] * 12, spike_share=spikes)
    rule = insert_rule(db, org.org_id, condition={"type": "above", "value": 20_000}, x=3, y=5)
    sm = sessionmaker_for(services.database_url)
    await evaluate_windows(sm, rule, start, 1, 5)
    assert alerts_of(db, rule) == []  # two bad windows of five: pending
    with db.connect() as c:
        assert c.execute(text("SELECT state FROM alert_series_state WHERE rule_id = :r"),
                         {"r": rule}).scalar() == "pending"
    await evaluate_cycle(sm, now=at(start, 6), rule_ids=[rule])
    (alert,) = alerts_of(db, rule)
    assert alert.state == "firing"
    assert alert.started_at == start + timedelta(seconds=2 * WINDOW_S)
    ev = alert.evidence
    assert ev["threshold"] == 20_000 and ev["value"] > 20_000
    # idle windows before the first breach keep no state: the evidence starts there
    assert [v["breach"] for v in ev["series"][0]["values"]] == [True, False, True, True]
    assert ev["series"][0]["src"]["name"] == "a" and ev["series"][0]["dst"]["name"] == "b"
    assert ev["dashboard_path"].startswith(f"/pair?level=node&src={a}&dst={b}")
    # windows 6.. are clean: 3 of the last 5 drops to 2 at window 7 -> resolved once
    await evaluate_windows(sm, rule, start, 1, 12)
    (alert,) = alerts_of(db, rule)
    assert alert.state == "resolved"
    assert alert.resolved_at == start + timedelta(seconds=8 * WINDOW_S)
    kinds = [e.kind for e in events_of(db, rule)]
    assert kinds == ["firing", "resolved"]


async def test_n_of_m_waits_for_two_pairs_to_agree_and_fires_once_for_the_rule(
        services: Any, db: Engine, org: Any) -> None:
    a, b, c = make_agents(db, org.org_id, [{"name": "a"}, {"name": "b"}, {"name": "c"}])
    start = aligned_now() - timedelta(seconds=8 * WINDOW_S)
    # a→b spikes from window 1; a→c only from window 3: two of them agree from window 3.
    insert_mesh(db, org.org_id, a, b, start, [1000.0] * 6, spike_share=[0, .03, .03, .03, .03,
                                                                          0], seed=1)
    insert_mesh(db, org.org_id, a, c, start, [1000.0] * 6, spike_share=[0, 0, 0, .03, .03, 0],
                seed=2)
    rule = insert_rule(db, org.org_id, scope={"src": [str(a)]}, n=2, m=3,
                       condition={"type": "above", "value": 20_000})
    sm = sessionmaker_for(services.database_url)
    await evaluate_windows(sm, rule, start, 1, 3)
    assert alerts_of(db, rule) == []  # one pair of two: not yet
    await evaluate_cycle(sm, now=at(start, 4), rule_ids=[rule])
    (alert,) = alerts_of(db, rule)
    assert alert.group_key == "rule" and alert.state == "firing"
    names = sorted(s["name"] for s in alert.evidence["series"])
    assert names == ["a → b", "a → c"]
    assert alert.evidence["agreeing"] == 2 and alert.evidence["n"] == 2
    await evaluate_windows(sm, rule, start, 1, 7)
    (alert,) = alerts_of(db, rule)
    assert alert.state == "resolved"
    assert alert.resolved_at == start + timedelta(seconds=6 * WINDOW_S)  # window 5 is clean
    assert [e.kind for e in events_of(db, rule)] == ["firing", "resolved"]


async def test_two_evaluations_at_once_write_one_alert_and_one_event(
        services: Any, db: Engine, org: Any) -> None:
    a, b = make_agents(db, org.org_id, [{"name": "a"}, {"name": "b"}])
    start = aligned_now() - timedelta(seconds=4 * WINDOW_S)
    insert_mesh(db, org.org_id, a, b, start, [1000.0] * 3, spike_share=[.03, .03, .03])
    rule = insert_rule(db, org.org_id)
    now = at(start, 3)
    results = await asyncio.gather(*(evaluate_cycle(sessionmaker_for(services.database_url),
                                                    now=now, rule_ids=[rule])
                                     for _ in range(2)))
    assert len(alerts_of(db, rule)) == 1
    assert [e.kind for e in events_of(db, rule)] == ["firing"]
    assert sum(r.events for r in results) == 1
    # and running the same cycle again (a re-delivered task) changes nothing
    again = await evaluate_cycle(sessionmaker_for(services.database_url), now=now,
                                 rule_ids=[rule])
    assert again.events == 0 and len(events_of(db, rule)) == 1


async def test_a_plan_applied_twice_from_one_snapshot_acts_once(services: Any, db: Engine,
                                                               org: Any) -> None:
    """The compare-and-set itself: two workers holding the same rule version race to apply
    the same transition; the second finds the version moved and writes nothing."""
    from stormwatch.services.alerts import evaluate as ev
    from stormwatch.services.analytics.filters import load_fleet

    a, b = make_agents(db, org.org_id, [{"name": "a"}, {"name": "b"}])
    start = aligned_now() - timedelta(seconds=3 * WINDOW_S)
    insert_mesh(db, org.org_id, a, b, start, [1000.0] * 2, spike_share=[.03, .03])
    rule_id = insert_rule(db, org.org_id)
    sm = sessionmaker_for(services.database_url)
    now = at(start, 2)
    async with sm() as s:
        (rule,) = await ev.load_rules(s, [rule_id])
        fleet = await load_fleet(s, rule.org_id)
        due = ev.due_windows(rule, now)
        data = await ev.raw_windows(s, [rule.org_id], rule.kind, rule.window_s,
                                    ev.from_epoch(due.starts[0]), now, [99.0])
        batch = ev.Batch(data, due.starts[0], due.starts[-1] + 30, 30)
        stored = (await ev.load_stored(s, [rule.id]))[rule.id]
        evals, _ = await ev.rule_series(s, rule, fleet, batch, due, stored)
    plan = ev.plan_rule(rule, due, evals, fleet, stored)
    assert [t.kind for t in plan.transitions] == ["firing"]

    async def apply() -> dict[Any, int]:
        async with sm() as s:
            return await ev.write_cycle(s, [(rule, due.closed_until, plan, stored)])

    outcomes = await asyncio.gather(apply(), apply())
    assert sorted(outcomes, key=len) == [{}, {rule_id: 1}]
    assert len(alerts_of(db, rule_id)) == 1 and len(events_of(db, rule_id)) == 1


@pytest.mark.parametrize(("seconds_after_start", "early"), [
    (WINDOW_S + 20, True),  # the window still open
    (2 * WINDOW_S + SETTLE_S - 3, True),  # closed, but less than SETTLE_S ago
    (2 * WINDOW_S + SETTLE_S + 1, False),  # closed and settled
])
async def test_a_firing_says_whether_it_was_decided_before_its_window_could_be_judged_closed(
        services: Any, db: Engine, org: Any, seconds_after_start: int, early: bool) -> None:
    a, b = make_agents(db, org.org_id, [{"name": "a"}, {"name": "b"}])
    start = aligned_now() - timedelta(seconds=3 * WINDOW_S)
    insert_mesh(db, org.org_id, a, b, start, [1000.0] * 3, loss_share=[0, 0.1, 0])
    rule = insert_rule(db, org.org_id, statistic="loss_rate",
                       condition={"type": "above", "value": 0.01})
    sm = sessionmaker_for(services.database_url)
    await evaluate_cycle(sm, now=start + timedelta(seconds=seconds_after_start),
                         rule_ids=[rule])
    ((_, kind, t, evidence),) = events_of(db, rule)
    assert (kind, t) == ("firing", start + timedelta(seconds=2 * WINDOW_S))
    assert evidence["decided_early"] is early
