"""Traces the server asks for: a mesh alert that fires asks its pair's agent for a trace
(once per event, however often the pass runs), the request reaches that agent's config and
leaves it when a trace names it; a request nobody serves lapses."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, text

from stormwatch.models import Agent
from stormwatch.services.agents import build_config
from stormwatch.services.alerts.evaluate import evaluate_cycle
from stormwatch.services.paths import requests
from tests.alert_helpers import (
    WINDOW_S,
    aligned_now,
    at,
    events_of,
    insert_mesh,
    insert_rule,
    make_agents,
    sessionmaker_for,
)

SPIKE = 1.0


def pending(db: Engine, org_id: str) -> list[tuple[str, str, str]]:
    with db.connect() as c:
        return [(str(s), str(d), t) for s, d, t in c.execute(text(
            "SELECT src_agent_id, dst_agent_id, trigger FROM path_trace_requests "
            "WHERE org_id = :o AND served_at IS NULL ORDER BY requested_at"), {"o": org_id})]


async def test_a_firing_mesh_alert_asks_its_pair_for_one_trace_however_often_the_pass_runs(
        services: Any, db: Engine, org: Any) -> None:
    a, b = make_agents(db, org.org_id, [{"name": "a"}, {"name": "b"}])
    start = aligned_now() - timedelta(seconds=6 * WINDOW_S)
    insert_mesh(db, org.org_id, a, b, start, [1000.0] * 6,
                spike_share=[0, 0, SPIKE, SPIKE, SPIKE, 0])
    rule = insert_rule(db, org.org_id, condition={"type": "above", "value": 20_000})
    sm = sessionmaker_for(services.database_url)
    await evaluate_cycle(sm, now=at(start, 5), rule_ids=[rule])
    assert [e.kind for e in events_of(db, rule)] == ["firing"]

    # The pass serves every org (other tests' alerts fire too): this org's rows are counted.
    now = datetime.now(UTC)
    async with sm() as session:
        await requests.request_for_firing_alerts(session, now)
        await session.commit()
    assert pending(db, org.org_id) == [(str(a), str(b), "alert")]
    async with sm() as session:  # a second pass (or a second worker) asks nothing more
        await requests.request_for_firing_alerts(session, now + timedelta(seconds=30))
        await session.commit()
    with db.connect() as c:
        assert c.execute(text("SELECT count(*) FROM path_trace_requests WHERE org_id = :o"),
                         {"o": org.org_id}).scalar() == 1
    assert pending(db, org.org_id) == [(str(a), str(b), "alert")]

    async with sm() as session:
        agent = await session.get(Agent, a)
        assert agent is not None
        config = await build_config(session, agent)
        [asked] = config["paths"]["requests"]
        assert asked["peer"] == str(b) and asked["trigger"] == "alert"
        other = await session.get(Agent, b)
        assert other is not None
        assert (await build_config(session, other))["paths"] == {"requests": []}
        # The trace that answers it ends it; a second trace naming it changes nothing.
        trace_id = uuid.uuid4()
        assert await requests.serve(session, agent.org_id, a, uuid.UUID(asked["id"]), trace_id)
        assert not await requests.serve(session, agent.org_id, a, uuid.UUID(asked["id"]),
                                        uuid.uuid4())
        await session.commit()
        assert (await build_config(session, agent))["paths"] == {"requests": []}
    assert pending(db, org.org_id) == []


async def test_a_request_nobody_serves_lapses_and_the_pair_may_be_asked_again(
        services: Any, db: Engine, org: Any) -> None:
    a, b = make_agents(db, org.org_id, [{"name": "a"}, {"name": "b"}])
    org_id = uuid.UUID(org.org_id)
    sm = sessionmaker_for(services.database_url)
    t0 = datetime.now(UTC) - timedelta(hours=1)
    async with sm() as session:
        first, made = await requests.request_trace(session, org_id, a, b, "request", "asked",
                                                   now=t0)
        assert made
        # Asked again while it waits: the same request.
        assert await requests.request_trace(session, org_id, a, b, "request", "again",
                                            now=t0 + timedelta(minutes=1)) == (first, False)
        assert await requests.pending_for(session, a, now=t0 + timedelta(minutes=5)) != []
        assert await requests.pending_for(session, a, now=t0 + requests.REQUEST_TTL) == []
        later, _ = await requests.request_trace(session, org_id, a, b, "request",
                                                "asked later")
        await session.commit()
    assert later != first
    assert pending(db, org.org_id) == [(str(a), str(b), "request")]


async def test_an_alert_that_finds_a_trace_already_asked_for_its_pair_asks_no_second(
        services: Any, db: Engine, org: Any) -> None:
    a, b = make_agents(db, org.org_id, [{"name": "a"}, {"name": "b"}])
    org_id = uuid.UUID(org.org_id)
    sm = sessionmaker_for(services.database_url)
    async with sm() as session:  # a level shift asked first
        shift, _ = await requests.request_trace(session, org_id, a, b, "level_shift", "shift")
        await session.commit()
    start = aligned_now() - timedelta(seconds=6 * WINDOW_S)
    insert_mesh(db, org.org_id, a, b, start, [1000.0] * 6,
                spike_share=[0, 0, SPIKE, SPIKE, SPIKE, 0])
    rule = insert_rule(db, org.org_id, condition={"type": "above", "value": 20_000})
    await evaluate_cycle(sm, now=at(start, 5), rule_ids=[rule])
    with db.connect() as c:
        [event_id] = c.execute(text("SELECT id FROM alert_events WHERE rule_id = :r"),
                               {"r": rule}).scalars()
    now = datetime.now(UTC)
    async with sm() as session:
        await requests.request_for_firing_alerts(session, now)
        await session.commit()
        # The trace asked for the shift answers the alert too; once it came, no second ask.
        assert await requests.serve(session, org_id, a, shift, uuid.uuid4())
        await session.commit()
        await requests.request_for_firing_alerts(session, now + timedelta(seconds=30))
        await session.commit()
    with db.connect() as c:
        rows = c.execute(text(
            "SELECT id, trigger, alert_event_id FROM path_trace_requests WHERE org_id = :o"),
            {"o": org.org_id}).all()
    assert [tuple(r) for r in rows] == [(shift, "level_shift", event_id)]
