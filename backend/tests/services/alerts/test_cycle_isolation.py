"""A cycle survives what one rule does: an alert that fires, resolves and fires again within
one cycle; a rule whose evaluation fails (isolated, counted, named by health, the other orgs'
rules still fire and deliver); and a new rule judges from its creation, not the replay."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, text

from stormwatch.core.config import Settings
from stormwatch.core.db import get_sync_engine
from stormwatch.services.alerts.evaluate import evaluate_cycle
from stormwatch.services.notify import dispatch
from tests.alert_helpers import (
    WINDOW_S,
    alerts_of,
    aligned_now,
    at,
    events_of,
    insert_mesh,
    insert_rule,
    make_agents,
    sessionmaker_for,
)
from tests.notifications.conftest import Org, settings  # noqa: F401  (fixture)
from tests.notifications.servers import HttpReceiver

SPIKE = .03  # of a window's samples at 50 ms: its p99 is above 20 ms


@pytest.fixture
def bad_org(make_org: Callable) -> Any:
    return make_org()


@pytest.fixture
def hook_org(make_org: Callable, api: httpx.Client) -> Org:
    return Org(make_org(), api)


async def test_fire_resolve_fire_within_one_cycle_writes_every_episode(
        services: Any, db: Engine, org: Any) -> None:
    a, b = make_agents(db, org.org_id, [{"name": "a"}, {"name": "b"}])
    start = aligned_now() - timedelta(seconds=12 * WINDOW_S)
    spikes = [0, SPIKE, SPIKE, 0, SPIKE, 0, SPIKE, SPIKE, SPIKE, SPIKE, 0, 0]
    insert_mesh(db, org.org_id, a, b, start, [1000.0] * 12, spike_share=spikes)
    rule = insert_rule(db, org.org_id, condition={"type": "above", "value": 20_000})
    sm = sessionmaker_for(services.database_url)
    await evaluate_cycle(sm, now=at(start, 3), rule_ids=[rule])
    [first] = alerts_of(db, rule)
    assert first.state == "firing"
    # one cycle: the open alert resolves (window 3), one fires and resolves (4, 5), one fires
    res = await evaluate_cycle(sm, now=at(start, 10), rule_ids=[rule])
    assert res.errors == {} and res.evaluated == 1
    got = [(x.state, x.started_at, x.resolved_at) for x in alerts_of(db, rule)]
    w = timedelta(seconds=WINDOW_S)
    assert got == [("resolved", start + w, start + 4 * w),
                   ("resolved", start + 4 * w, start + 6 * w),
                   ("firing", start + 6 * w, None)]
    assert [e.kind for e in events_of(db, rule)] == ["firing", "resolved", "firing", "resolved",
                                                     "firing"]


def _health(api: httpx.Client) -> dict[str, Any]:
    out: dict[str, Any] = api.get("/api/v1/health").json()
    return out


async def test_a_failing_rule_is_isolated_counted_and_named_by_health(
        services: Any, db: Engine, bad_org: Any, hook_org: Org, api: httpx.Client,
        settings: Settings) -> None:  # noqa: F811
    org = hook_org
    # org 1: a rule whose stored condition lost its threshold, as a bad migration could leave it
    x, y = make_agents(db, bad_org.org_id, [{"name": "x"}, {"name": "y"}])
    start = aligned_now() - timedelta(seconds=8 * WINDOW_S)
    insert_mesh(db, bad_org.org_id, x, y, start, [1000.0] * 8, spike_share=[SPIKE] * 8)
    bad = insert_rule(db, bad_org.org_id, condition={"type": "above", "value": 20_000})
    with db.begin() as c:
        c.execute(text("UPDATE alert_rules SET condition = '{\"type\": \"above\"}' "
                       "WHERE id = :r"), {"r": bad})
    # org 2: a healthy rule on a breaching pair, delivered to a webhook
    a, b = make_agents(db, str(org.id), [{"name": "a"}, {"name": "b"}])
    insert_mesh(db, str(org.id), a, b, start, [1000.0] * 8, spike_share=[0] * 6 + [SPIKE] * 2)
    sm = sessionmaker_for(services.database_url)
    orgs = [uuid.UUID(bad_org.org_id), org.id]
    with HttpReceiver() as hook:
        ch, hook.secret = org.webhook(hook.url)
        good = insert_rule(db, str(org.id), condition={"type": "above", "value": 20_000})
        with db.begin() as c:
            c.execute(text("UPDATE alert_rules SET channel_ids = :ch WHERE id = :r"),
                      {"ch": [ch], "r": good})
        res = await evaluate_cycle(sm, now=at(start, 8), org_ids=orgs)
        assert str(bad) in res.errors and "value" in res.errors[str(bad)]
        [alert] = alerts_of(db, good)
        assert alert.state == "firing"
        engine = get_sync_engine()
        with engine.begin() as conn:
            dispatch.plan(conn)
        sent = await asyncio.to_thread(dispatch.deliver_due, engine, budget_s=30)
        assert sent.get("sent") == 1
        [msg] = hook.accepted.values()
        assert msg["type"] == "alert.firing"
    # two failures in a row are a hiccup; the third makes health name the rule and why
    await evaluate_cycle(sm, now=at(start, 9), org_ids=orgs)
    assert _health(api)["alerts"]["ok"] is True
    await evaluate_cycle(sm, now=at(start, 10), org_ids=orgs)
    h = _health(api)
    assert h["ok"] is False and h["alerts"]["ok"] is False
    assert str(bad) in h["alerts"]["detail"] and "value" in h["alerts"]["detail"]
    [failing] = h["alerts"]["failing"]
    assert failing["rule_id"] == str(bad) and failing["failures_in_a_row"] == 3
    # the good rule kept being evaluated all along
    with db.connect() as c:
        cursor = c.execute(text("SELECT evaluated_until FROM alert_rules WHERE id = :r"),
                           {"r": good}).scalar()
    assert cursor == start + timedelta(seconds=10 * WINDOW_S)
    # repaired, the rule counts as healthy again at its next success
    with db.begin() as c:
        c.execute(text("UPDATE alert_rules SET condition = '{\"type\": \"above\", "
                       "\"value\": 20000}' WHERE id = :r"), {"r": bad})
    res = await evaluate_cycle(sm, now=at(start, 11), org_ids=orgs)
    assert res.errors == {}
    assert _health(api)["alerts"]["ok"] is True
    # failing again, then deleted: health forgets it
    with db.begin() as c:
        c.execute(text("UPDATE alert_rules SET condition = '{\"type\": \"above\"}' "
                       "WHERE id = :r"), {"r": bad})
    for i in (12, 13, 14):
        await evaluate_cycle(sm, now=at(start, i), org_ids=orgs)
    assert str(bad) in _health(api)["alerts"]["detail"]
    with db.begin() as c:
        c.execute(text("DELETE FROM alert_rules WHERE id = :r"), {"r": bad})
    assert _health(api)["alerts"]["ok"] is True


async def test_a_new_rule_judges_from_its_creation_not_the_past(
        services: Any, db: Engine, org: Any, api: httpx.Client) -> None:
    h = {"Authorization": f"Bearer {org.api_key}"}
    a, b = make_agents(db, org.org_id, [{"name": "a"}, {"name": "b"}])
    now = datetime.now(UTC)
    past = datetime.fromtimestamp(int(now.timestamp()) // WINDOW_S * WINDOW_S, UTC) \
        - timedelta(seconds=10 * WINDOW_S)
    # breaching from 5 minutes ago for two windows, clean since
    insert_mesh(db, org.org_id, a, b, past, [1000.0] * 10,
                spike_share=[SPIKE, SPIKE] + [0] * 8)
    body = {"name": "p99 high", "severity": "critical", "metric": "mesh_rtt",
            "statistic": "p99", "window_s": WINDOW_S, "scope": {},
            "condition": {"type": "above", "value": 20_000}, "x": 1, "y": 1, "n": 1}
    r = await asyncio.to_thread(api.post, "/api/v1/alert-rules", json=body, headers=h)
    assert r.status_code == 201, r.text
    rule = uuid.UUID(r.json()["id"])
    created = datetime.fromisoformat(r.json()["created_at"])
    sm = sessionmaker_for(services.database_url)
    await evaluate_cycle(sm, now=datetime.now(UTC), rule_ids=[rule])
    assert alerts_of(db, rule) == [] and events_of(db, rule) == []
    # a breach after creation fires
    after = datetime.fromtimestamp(int(created.timestamp()) // WINDOW_S * WINDOW_S, UTC) \
        + timedelta(seconds=WINDOW_S)
    insert_mesh(db, org.org_id, a, b, after, [1000.0] * 3, spike_share=[SPIKE] * 3, seed=3)
    await evaluate_cycle(sm, now=at(after, 3), rule_ids=[rule])
    [alert] = alerts_of(db, rule)
    assert alert.state == "firing" and alert.started_at >= created
    assert [e.kind for e in events_of(db, rule)] == ["firing"]
    # an edit of the condition judges anew from the edit: the past breaches are not replayed
    r = await asyncio.to_thread(api.patch, f"/api/v1/alert-rules/{rule}", headers=h,
                                  json={"condition": {"type": "above", "value": 30_000}})
    assert r.status_code == 200, r.text
    assert datetime.fromisoformat(r.json()["evaluated_until"]) >= datetime.now(UTC) - \
        timedelta(seconds=WINDOW_S)
