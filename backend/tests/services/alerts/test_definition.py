"""One Rule type and one query for evaluation (async) and delivery (sync)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, text

from stormwatch.services.alerts.definition import load_rules, load_rules_by_id
from tests.alert_helpers import insert_rule, sessionmaker_for


async def test_both_sides_read_the_same_rule_and_evaluation_only_enabled_ones(
        services: Any, db: Engine, org: Any) -> None:
    on = insert_rule(db, org.org_id, statistic="loss_rate", labels={"team": "net"},
                     condition={"type": "above", "value": 0.05})
    off = insert_rule(db, org.org_id, name="off")
    with db.begin() as c:
        c.execute(text("UPDATE alert_rules SET enabled = false "
                       "WHERE id = :r"), {"r": off})
        by_id = load_rules_by_id(c, [on, off])
    sm = sessionmaker_for(services.database_url)
    async with sm() as session:
        every = await load_rules(session, org_ids=[org.org_id])
        enabled = await load_rules(session, [on, off], enabled_only=True)
    assert [r.id for r in enabled] == [on]
    assert {r.id: r for r in every} == by_id  # one type, one row mapping
    rule = by_id[on]
    assert (rule.labels, rule.condition, rule.unit, rule.kind.name) == (
        {"team": "net"}, {"type": "above", "value": 0.05}, "ratio", "mesh_rtt")
    assert by_id[off].channel_ids == [] and by_id[off].description == ""
