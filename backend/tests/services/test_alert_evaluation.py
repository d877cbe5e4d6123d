"""Live evaluation on real PostgreSQL: X of Y consecutive windows, N of M agreeing series,
the compare-and-set that keeps two evaluations from acting twice, and evidence."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, text

from stormwatch.services.alerts.evaluate import evaluate_cycle
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


@pytest.fixture
def org(make_org: Callable) -> Any:
    return make_org()


async def run_windows(sm: Any, rule_id: Any, start: Any, windows: int) -> None:
    """Evaluate window by window, as the beat would."""
    for i in range(1, windows + 1):
        await evaluate_cycle(sm, now=at(start, i), rule_ids=[rule_id])


async def test_x_of_y_fires_on_the_third_bad_window_of_five_and_resolves_once(
        services: Any, db: Engine, org: Any) -> None:
    a, b = make_agents(db, org.org_id, [{"name": "a"}, {"name": "b"}])
    start = aligned_now() - timedelta(seconds=12 * WINDOW_S)
    # p99 spikes (2% of samples at 50 ms) in windows 2, 4 and 5: 3 of the last 5 at window 5.
    spikes = [0, 0, .02, 0, .02, .02, 0, 0, 0, 0, 0, 0]
    insert_mesh(db, org.org_id, a, b, start, [1000.0] * 12, spike_share=spikes)
    rule = insert_rule(db, org.org_id, condition={"type": "above", "value": 20_000}, x=3, y=5)
    sm = sessionmaker_for(services.database_url)
    await run_windows(sm, rule, start, 5)
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
    await run_windows(sm, rule, start, 12)
    (alert,) = alerts_of(db, rule)
    assert alert.state == "resolved"
    assert alert.resolved_at == start + timedelta(seconds=8 * WINDOW_S)
    kinds = [e.kind for e in events_of(db, rule)]
    assert kinds == ["firing", "resolved"]
