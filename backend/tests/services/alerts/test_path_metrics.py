"""Rules on paths and physics (issue "paths" item 5): "path changed" fires in the window the
server learned of a change, on that pair only, and resolves when the path holds; "stretch
above k" divides each pair's RTT by the physical floor between its regions, so the same RTT
fires on a short path and not on a long one; both refuse what cannot work, naming it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, text

from stormwatch.models import Agent
from stormwatch.notifications.render import fmt_value
from stormwatch.schemas.paths import TraceIn
from stormwatch.services.alerts.backtest import backtest
from stormwatch.services.alerts.evaluate import evaluate_cycle
from stormwatch.services.alerts.validation import RuleInvalid, validate_rule
from stormwatch.services.geography.catalog import CATALOG, distance_km, floor_rtt_us
from stormwatch.services.paths.store import record_traces
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
from tests.path_helpers import trace

DIRECT = ["198.51.100.1", "198.51.100.2"]
DETOUR = ["198.51.100.1", "192.0.2.77", "192.0.2.78"]


async def send(sm: Any, src: uuid.UUID, traces: list[dict[str, Any]]) -> None:
    async with sm() as session:
        agent = await session.get(Agent, src)
        await record_traces(session, agent, [TraceIn.model_validate(t) for t in traces])
        await session.commit()


def draft(**kw: Any) -> dict[str, Any]:
    return {"name": "r", "metric": "path_changed", "statistic": "changes", "scope": {},
            "window_s": WINDOW_S, "condition": {"type": "above", "value": 0}, "x": 1, "y": 1,
            "n": 1, "m": None, "channel_ids": [], **kw}


async def test_a_path_changed_rule_fires_on_the_pair_whose_route_changed_and_resolves_after(
        services: Any, db: Engine, org: Any) -> None:
    a, b, c = make_agents(db, org.org_id, [{"name": "a"}, {"name": "b"}, {"name": "c"}])
    sm = sessionmaker_for(services.database_url)
    then = datetime.now(UTC) - timedelta(minutes=20)
    await send(sm, a, [trace(str(b), then, DIRECT), trace(str(c), then, DIRECT)])
    rule = insert_rule(db, org.org_id, metric="path_changed", statistic="changes",
                       condition={"type": "above", "value": 0})
    now = datetime.now(UTC)
    await evaluate_cycle(sm, now=now, rule_ids=[rule])
    assert events_of(db, rule) == []  # traced, unchanged: nothing

    # a→b moves to a longer route; a→c is traced again on its old one.
    await send(sm, a, [trace(str(b), now - timedelta(seconds=5), DETOUR),
                       trace(str(c), now - timedelta(seconds=5), DIRECT)])
    # The change counts in the window the server received it in: judged once that closes.
    with db.connect() as conn:
        received = conn.execute(text(
            "SELECT max(received_at) FROM path_traces WHERE org_id = :o"),
            {"o": org.org_id}).scalar_one()
    window = datetime.fromtimestamp(int(received.timestamp()) // WINDOW_S * WINDOW_S, UTC)
    await evaluate_cycle(sm, now=window + timedelta(seconds=WINDOW_S + 6), rule_ids=[rule])
    [fired] = events_of(db, rule)
    assert fired.kind == "firing"
    [series] = fired.evidence["series"]
    assert (series["src"]["id"], series["dst"]["id"]) == (str(a), str(b))
    assert series["value"] == 1 and fired.evidence["unit"] == "count"
    assert fired.evidence["dashboard_path"].startswith("/pair?")

    # The next window holds no change: the alert resolves.
    await evaluate_cycle(sm, now=window + timedelta(seconds=2 * WINDOW_S + 6), rule_ids=[rule])
    assert [e.kind for e in events_of(db, rule)] == ["firing", "resolved"]

    async with sm() as session:
        bt = await backtest(session, uuid.UUID(org.org_id), draft(),
                            now - timedelta(minutes=30), now + timedelta(minutes=2))
    assert bt["count"] == 1
    assert bt["firings"][0]["series"][0]["name"] == "a → b"
    # Both traced pairs are drawn: the quiet one at zero changes, not as missing data.
    assert bt["series_total"] == 2
    quiet = next(s for s in bt["series"] if s["name"] == "a → c")
    assert {w["value"] for w in quiet["windows"]} == {0.0}


async def test_a_stretch_rule_judges_the_rtt_against_the_floor_between_the_regions(
        services: Any, db: Engine, org: Any) -> None:
    virginia = {"provider": "aws", "region": "us-east-1", "zone": "us-east-1a"}
    a, b, c = make_agents(db, org.org_id, [
        {"name": "a", **virginia},
        {"name": "b", "provider": "aws", "region": "eu-west-1", "zone": "eu-west-1a"},
        {"name": "c", **virginia, "zone": "us-east-1b"}])
    floor = floor_rtt_us(distance_km(CATALOG[("aws", "us-east-1")],
                                     CATALOG[("aws", "eu-west-1")]))
    start = aligned_now() - timedelta(seconds=4 * WINDOW_S)
    # Virginia–Dublin at 1.25x its floor; Virginia to Virginia at the same RTT has no floor.
    insert_mesh(db, org.org_id, a, b, start, [1.25 * floor] * 3, rate_hz=2)
    insert_mesh(db, org.org_id, a, c, start, [1.25 * floor] * 3, rate_hz=2, seed=1)
    sm = sessionmaker_for(services.database_url)
    low = insert_rule(db, org.org_id, metric="mesh_stretch", statistic="p50",
                      condition={"type": "above", "value": 1.2})
    high = insert_rule(db, org.org_id, metric="mesh_stretch", statistic="p50",
                       condition={"type": "above", "value": 1.5})
    await evaluate_cycle(sm, now=at(start, 3), rule_ids=[low, high])
    [fired] = events_of(db, low)
    [series] = fired.evidence["series"]
    assert (series["src"]["id"], series["dst"]["id"]) == (str(a), str(b))
    assert series["value"] == pytest.approx(1.25, rel=0.03)
    assert fmt_value(series["value"], fired.evidence["unit"]).endswith("×")
    assert events_of(db, high) == []

    async with sm() as session:
        with pytest.raises(RuleInvalid) as e:
            await validate_rule(session, uuid.UUID(org.org_id), draft(
                metric="mesh_stretch", statistic="p50", condition={"type": "above", "value": 2},
                scope={"src": [str(a)], "dst": [str(c)]}))
        assert e.value.loc == ["body", "scope"] and "physical floor" in e.value.msg
        with pytest.raises(RuleInvalid) as e:
            await validate_rule(session, uuid.UUID(org.org_id), draft(
                condition={"type": "baseline", "k": 2, "baseline": "prev_24h"}))
        assert e.value.loc == ["body", "condition", "type"]
        assert "path_changed takes 'above'" in e.value.msg
        with pytest.raises(RuleInvalid) as e:
            await validate_rule(session, uuid.UUID(org.org_id), draft(statistic="p50"))
        assert e.value.loc == ["body", "statistic"]
