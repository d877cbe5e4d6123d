"""Each kind of rule on real PostgreSQL: a baseline rule, a level-shift rule, agent silence,
a quorum rule and a storage failure-rate rule (each also not firing where it must not)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, text

from stormwatch.services.alerts.evaluate import evaluate_cycle
from tests.alert_helpers import (
    WINDOW_S,
    alerts_of,
    aligned_now,
    evaluate_windows,
    events_of,
    insert_mesh,
    insert_quorum,
    insert_rule,
    insert_storage,
    make_agents,
    sessionmaker_for,
    set_last_seen,
)
from tests.helpers import roll_up_mesh


async def test_a_baseline_rule_fires_at_twice_the_last_days_level_not_before(
        services: Any, db: Engine, org: Any) -> None:
    a, b = make_agents(db, org.org_id, [{"name": "a"}, {"name": "b"}])
    hour = int(datetime.now(UTC).timestamp()) // 3600 * 3600 - 3600
    h0 = datetime.fromtimestamp(hour, UTC)
    # three hours of history at ~1 ms (1 Hz), rolled up as the worker would
    insert_mesh(db, org.org_id, a, b, h0 - timedelta(hours=3), [1000.0] * 18, window_s=600,
                rate_hz=1, seed=3)
    roll_up_mesh(db, uuid.UUID(org.org_id), h0 - timedelta(hours=3), 3, levels=(300, 3600))
    # then, in the next hour: 1.5 ms (under 2x) and 2.6 ms (over 2x)
    insert_mesh(db, org.org_id, a, b, h0, [1500.0] * 3 + [2600.0] * 3, seed=4)
    rule = insert_rule(db, org.org_id, statistic="p50",
                       condition={"type": "baseline", "k": 2, "baseline": "prev_24h"})
    sm = sessionmaker_for(services.database_url)
    await evaluate_windows(sm, rule, h0, 1, 2)
    assert alerts_of(db, rule) == []
    # 6 s into window 3 its 60 samples already sit above 2x: decided before it closes
    await evaluate_windows(sm, rule, h0, 3, 3)
    (alert,) = alerts_of(db, rule)
    ev = alert.evidence
    assert alert.started_at == h0 + timedelta(seconds=3 * WINDOW_S)
    assert ev["baseline"] == pytest.approx(1000, rel=0.05)
    assert ev["threshold"] == pytest.approx(2 * ev["baseline"])
    assert ev["value"] == pytest.approx(2600, rel=0.05)


async def test_a_level_shift_rule_fires_on_a_step_and_ignores_a_lone_spike(
        services: Any, db: Engine, org: Any) -> None:
    a, b = make_agents(db, org.org_id, [{"name": "a"}, {"name": "b"}])
    start = aligned_now() - timedelta(seconds=41 * WINDOW_S)
    rng = np.random.default_rng(7)
    levels = 15_000 + rng.normal(0, 150, 40)
    levels[12] += 9_000  # one bad window: a burst, not a new level
    levels[30:] += 2_000  # the step (seed 003 Lesson 11: a few ms)
    insert_mesh(db, org.org_id, a, b, start, levels.tolist(), rate_hz=4, seed=5)
    rule = insert_rule(db, org.org_id, statistic="p50", condition={
        "type": "level_shift", "min_step": 1_000, "direction": "up", "lookback_windows": 20})
    sm = sessionmaker_for(services.database_url)
    await evaluate_windows(sm, rule, start, 21, 29)
    assert alerts_of(db, rule) == [], "no step before window 30"
    await evaluate_windows(sm, rule, start, 30, 36)
    (alert,) = alerts_of(db, rule)
    # the detector sees the step after two or three windows at the new level; the alert
    # starts at the first window of the new level that was still to be stepped
    assert start + timedelta(seconds=30 * WINDOW_S) <= alert.started_at \
        <= start + timedelta(seconds=33 * WINDOW_S)
    shift = alert.evidence["series"][0]["level_shift"]
    assert shift["step"] == pytest.approx(2_000, rel=0.15)
    assert shift["level_before"] == pytest.approx(15_000, rel=0.02)


async def test_agent_silence_fires_for_the_quiet_agent_and_resolves_when_it_returns(
        services: Any, db: Engine, org: Any) -> None:
    now = aligned_now()
    loud, quiet = make_agents(db, org.org_id, [
        {"name": "loud", "last_seen": now - timedelta(seconds=20)},
        {"name": "quiet", "last_seen": now - timedelta(seconds=400)}])
    rule = insert_rule(db, org.org_id, metric="agent_silence", statistic="silence_s",
                       condition={"type": "above", "value": 180})
    sm = sessionmaker_for(services.database_url)
    await evaluate_cycle(sm, now=now + timedelta(seconds=6), rule_ids=[rule])
    (alert,) = alerts_of(db, rule)
    assert alert.state == "firing" and alert.group_key == str(quiet)
    assert alert.evidence["series"][0]["agent"]["name"] == "quiet"
    # the first evaluation catches up the last 10 minutes of windows: it fires at the first
    # window that ends more than 180 s after the agent was last heard
    assert 180 < alert.evidence["value"] <= 180 + WINDOW_S
    assert alert.evidence["threshold"] == 180
    set_last_seen(db, quiet, now + timedelta(seconds=40))  # a config poll
    await evaluate_cycle(sm, now=now + timedelta(seconds=2 * WINDOW_S + 6), rule_ids=[rule])
    (alert,) = alerts_of(db, rule)
    assert alert.state == "resolved"
    assert [e.kind for e in events_of(db, rule)] == ["firing", "resolved"]
    assert loud


async def test_a_quorum_failure_rate_rule_watches_only_its_group(
        services: Any, db: Engine, org: Any) -> None:
    (a,) = make_agents(db, org.org_id, [{"name": "a"}])
    start = aligned_now() - timedelta(seconds=5 * WINDOW_S)
    insert_quorum(db, org.org_id, a, "zone-majority", start, [0, 0, .5, .5])
    insert_quorum(db, org.org_id, a, "region-majority", start, [.9, .9, .9, .9])
    rule = insert_rule(db, org.org_id, metric="quorum_latency", statistic="failure_rate",
                       scope={"group_name": ["zone-majority"]}, x=2, y=2,
                       condition={"type": "above", "value": 0.2})
    sm = sessionmaker_for(services.database_url)
    await evaluate_windows(sm, rule, start, 1, 2)
    assert alerts_of(db, rule) == []  # window 2 breaches (decided early), 1 of 2
    # 6 s into window 3, its first 30 rounds already fail: the second of 2 windows
    await evaluate_windows(sm, rule, start, 3, 3)
    (alert,) = alerts_of(db, rule)
    s = alert.evidence["series"][0]
    assert s["group_name"] == "zone-majority" and s["value"] > 0.2
    assert alert.started_at == start + timedelta(seconds=2 * WINDOW_S)


async def test_a_storage_failure_rate_rule_fires_on_puts_of_its_target(
        services: Any, db: Engine, org: Any) -> None:
    (a,) = make_agents(db, org.org_id, [{"name": "a"}])
    target = uuid.uuid4()
    start = aligned_now(60) - timedelta(seconds=4 * 60)
    insert_storage(db, org.org_id, a, target, "put", start, [0, 4, 4])
    insert_storage(db, org.org_id, a, target, "get", start, [6, 6, 6])
    rule = insert_rule(db, org.org_id, metric="storage_latency", statistic="failure_rate",
                       window_s=60, scope={"op": ["put"]},
                       condition={"type": "above", "value": 0.5})
    sm = sessionmaker_for(services.database_url)
    await evaluate_windows(sm, rule, start, 1, 1, 60)
    assert alerts_of(db, rule) == []
    await evaluate_windows(sm, rule, start, 2, 3, 60)
    (alert,) = alerts_of(db, rule)
    s = alert.evidence["series"][0]
    assert s["op"] == "put" and s["target_id"] == str(target)
    assert s["value"] == pytest.approx(4 / 6)
    assert alert.evidence["dashboard_path"].startswith("/storage?op=put&size=1024")
    with db.connect() as c:
        assert c.execute(text("SELECT count(*) FROM alerts WHERE rule_id = :r"),
                         {"r": rule}).scalar() == 1


async def test_a_throughput_rule_fires_when_a_link_drops_below_its_floor(
        services: Any, db: Engine, org: Any) -> None:
    """Seed 004's high→low transitions: throughput is one more kind in the registry."""
    a, b = make_agents(db, org.org_id, [{"name": "a", "region": "eu-west-1"},
                                        {"name": "b", "region": "us-east-1"}])
    start = aligned_now(60) - timedelta(seconds=3 * 60)
    exp = uuid.uuid4()
    rows = [{"t": start + timedelta(seconds=s), "o": org.org_id, "s": a, "d": b, "e": exp,
             "v": 9.0e8 if s < 60 else 1.5e8} for s in range(120)]
    with db.begin() as c:
        c.execute(text(
            "INSERT INTO throughput_samples (time, org_id, src_agent_id, dst_agent_id, proto, "
            "experiment_id, direction, bytes_per_s) VALUES (:t, :o, :s, :d, 'tcp', :e, "
            "'forward', :v)"), rows)
    rule = insert_rule(db, org.org_id, metric="throughput", statistic="mean", window_s=60,
                       scope={"proto": ["tcp"]}, condition={"type": "below", "value": 5e8})
    sm = sessionmaker_for(services.database_url)
    await evaluate_windows(sm, rule, start, 1, 1, 60)
    assert alerts_of(db, rule) == []
    await evaluate_windows(sm, rule, start, 2, 2, 60)
    (alert,) = alerts_of(db, rule)
    s = alert.evidence["series"][0]
    assert s["proto"] == "tcp" and s["value"] == pytest.approx(1.5e8)
    assert alert.evidence["unit"] == "bytes/s" and alert.evidence["threshold"] == 5e8
