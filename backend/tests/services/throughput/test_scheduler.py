"""The experiment scheduler: never two experiments at once on one agent (both directions
and the guard gap included), spread over the day, and never past the budget, reporting
what it refused."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from stormwatch.services.throughput import scheduler
from stormwatch.services.throughput.scheduler import Interval, PairProto

DAY0 = datetime(2026, 11, 24, tzinfo=UTC)
GB = 10**9


def agents(n: int) -> list[uuid.UUID]:
    return [uuid.UUID(int=i + 1) for i in range(n)]


def all_pairs(ids: list[uuid.UUID], est_bytes: int = GB, cost: float = 0.02,
              protos: tuple[str, ...] = ("tcp",)) -> list[PairProto]:
    return [PairProto(a, b, p, est_bytes, cost) for i, a in enumerate(ids)
            for b in ids[i + 1:] for p in protos]


def per_agent(plan: scheduler.Plan, duration_s: int) -> dict[uuid.UUID, list[Interval]]:
    out: dict[uuid.UUID, list[Interval]] = {}
    for x in plan.accepted:
        iv = Interval(x.start_at, x.start_at + timedelta(seconds=2 * duration_s))
        for a in (x.pair.initiator, x.pair.responder):
            out.setdefault(a, []).append(iv)
    return out


@pytest.mark.parametrize("n_agents,per_day,duration_s", [
    (2, 4, 300), (5, 4, 300), (8, 6, 300), (6, 24, 600), (4, 48, 300)])
def test_no_agent_ever_has_two_experiments_within_the_gap(n_agents, per_day, duration_s):
    pairs = all_pairs(agents(n_agents), protos=("tcp", "udp"))
    plan = scheduler.plan_day(DAY0, pairs, per_day, duration_s, {}, 10**18, None, DAY0)
    assert plan.accepted
    gap = timedelta(seconds=scheduler.GAP_S)
    for ivs in per_agent(plan, duration_s).values():
        ivs.sort(key=lambda iv: iv.start)
        for a, b in zip(ivs, ivs[1:], strict=False):
            assert b.start >= a.end + gap, (a, b)
    for x in plan.accepted:  # every experiment lies inside the day
        assert x.start_at >= DAY0 and x.start_at + timedelta(seconds=2 * duration_s) <= \
            DAY0 + timedelta(days=1)


def test_a_full_day_refuses_what_does_not_fit_and_says_so():
    # 48 experiments of 2 x 15 min + gaps on one pair cannot fit in 24 h.
    pairs = all_pairs(agents(2))
    plan = scheduler.plan_day(DAY0, pairs, 48, 900, {}, 10**18, None, DAY0)
    per_slot = 2 * 900 + scheduler.GAP_S
    assert len(plan.accepted) <= 86400 // per_slot
    (refusal,) = plan.refused
    assert refusal["code"] == "no_free_time"
    assert refusal["experiments"] == 48 - len(plan.accepted)


def test_each_pairs_experiments_are_spread_evenly_over_the_day():
    ids = agents(4)
    pairs = all_pairs(ids)
    plan = scheduler.plan_day(DAY0, pairs, 4, 300, {}, 10**18, None, DAY0)
    assert len(plan.accepted) == len(pairs) * 4
    for p in pairs:
        starts = sorted(x.start_at for x in plan.accepted if x.pair == p)
        gaps = [(b - a).total_seconds() for a, b in zip(starts, starts[1:], strict=False)]
        assert len(starts) == 4
        # Every 6 hours, within the shift one overlap can cause.
        assert all(abs(g - 6 * 3600) <= 2 * 600 + 2 * scheduler.GAP_S for g in gaps), gaps
    # The day's experiments cover its four quarters alike.
    quarters = [0] * 4
    for x in plan.accepted:
        quarters[int((x.start_at - DAY0).total_seconds() // 21600)] += 1
    assert quarters == [len(pairs)] * 4


def test_it_stops_at_the_budget_and_reports_what_it_refused():
    pairs = all_pairs(agents(3), est_bytes=2 * GB)  # 3 pairs x 4 a day = 12 wanted
    plan = scheduler.plan_day(DAY0, pairs, 4, 300, {}, 13 * GB, None, DAY0)
    assert plan.bytes <= 13 * GB
    assert len(plan.accepted) == 6  # 6 x 2 GB = 12 GB; a 7th would make 14
    # Round-robin: every pair keeps its first two experiments, none is starved.
    assert sorted(sum(1 for x in plan.accepted if x.pair == p) for p in pairs) == [2, 2, 2]
    assert sum(r["experiments"] for r in plan.refused) == 6
    assert {r["code"] for r in plan.refused} == {"budget_bytes"}
    assert all("budget" in r["reason"] for r in plan.refused)


def test_it_stops_at_the_cost_cap_too():
    pairs = all_pairs(agents(2), est_bytes=GB, cost=0.5)
    plan = scheduler.plan_day(DAY0, pairs, 4, 300, {}, 10**18, 1.2, DAY0)
    assert len(plan.accepted) == 2 and plan.cost_usd <= 1.2
    assert plan.refused[0]["code"] == "budget_usd" and plan.refused[0]["experiments"] == 2


def test_a_day_gets_its_share_of_what_is_left_of_the_month():
    assert scheduler.daily_allowance(300 * GB, 90 * GB, 7) == 30 * GB
    assert scheduler.daily_allowance(100 * GB, 120 * GB, 3) == 0


def test_existing_experiments_are_avoided_and_passed_times_skipped():
    a, b, c = agents(3)
    busy = {a: [Interval(DAY0, DAY0 + timedelta(minutes=10))]}
    plan = scheduler.plan_day(DAY0, [PairProto(a, c, "tcp", GB, 0.0)], 4, 300, busy,
                              10**18, None, DAY0)
    assert plan.accepted[0].start_at >= DAY0 + timedelta(minutes=10, seconds=scheduler.GAP_S)
    later = scheduler.plan_day(DAY0, [PairProto(b, c, "tcp", GB, 0.0)], 4, 300, {}, 10**18,
                               None, DAY0 + timedelta(hours=13))
    assert [x.start_at for x in later.accepted] == [DAY0 + timedelta(hours=18)]
