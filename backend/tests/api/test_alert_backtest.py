"""The backtest over HTTP on a series with known injected spikes: minute windows (rollups
for the old part, raw for the newest quarter hour) and 30 s windows (raw), with the same
condition code the live evaluation runs."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from stormwatch.services.alerts.evaluate import evaluate_cycle
from tests.alert_helpers import alerts_of, insert_mesh, insert_rule, make_agents, sessionmaker_for
from tests.helpers import roll_up_mesh

WINDOWS = 150  # 2.5 h of 60 s windows
SPIKES = [10, 11, 40, 75, 120, 146]  # 10-11 is one episode of two windows; 146 is raw-only


@pytest.fixture(scope="module")
def spiky(make_org: Callable, db: Engine) -> Any:
    org = make_org()
    a, b = make_agents(db, org.org_id, [{"name": "a"}, {"name": "b"}])
    end = datetime.fromtimestamp(int(datetime.now(UTC).timestamp()) // 60 * 60 - 60, UTC)
    start = end - timedelta(minutes=WINDOWS)
    share = [0.2 if w in SPIKES else 0.0 for w in range(WINDOWS)]
    insert_mesh(db, org.org_id, a, b, start, [1000.0] * WINDOWS, window_s=60, rate_hz=2,
                spike_share=share, spike_us=60_000, seed=11)
    # rolled up as the worker would, except the newest minutes (rollups lag behind)
    roll_up_mesh(db, uuid.UUID(org.org_id), start - timedelta(minutes=start.minute), 3,
                 levels=(300, 3600))
    return {"org": org, "a": a, "b": b, "start": start, "end": end,
            "h": {"Authorization": f"Bearer {org.api_key}"}}


def draft(spiky: Any, **kw: Any) -> dict[str, Any]:
    return {"metric": "mesh_rtt", "statistic": "p95", "window_s": 60,
            "scope": {"src": [str(spiky["a"])], "dst": [str(spiky["b"])]},
            "condition": {"type": "above", "value": 20_000},
            "from": spiky["start"].isoformat(), "to": spiky["end"].isoformat(), **kw}


def test_the_backtest_counts_each_injected_spike_once_and_says_when(api: httpx.Client,
                                                                   spiky: Any) -> None:
    r = api.post("/api/v1/alert-rules/backtest", json=draft(spiky), headers=spiky["h"])
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["count"] == 5
    starts = [datetime.fromisoformat(f["start"]) for f in body["firings"]]
    assert starts == [spiky["start"] + timedelta(minutes=w) for w in (10, 40, 75, 120, 146)]
    first = body["firings"][0]
    # resolved when the first clean window (12) closes
    assert datetime.fromisoformat(first["end"]) == spiky["start"] + timedelta(minutes=13)
    assert first["peak"] == pytest.approx(60_000, rel=0.02)
    assert first["series"][0]["name"] == "a → b"
    (series,) = body["series"]
    assert series["breaches"] == 6 and len(series["windows"]) == WINDOWS
    assert [i for i, w in enumerate(series["windows"]) if w["breach"]] == SPIKES
    assert all(w["threshold"] == 20_000 for w in series["windows"])
    assert body["source"]["resolution"] == "rollups"
    assert body["elapsed_ms"] < 60_000


def test_a_backtest_without_a_range_starts_where_the_data_does_and_draws_every_window(
        api: httpx.Client, spiky: Any) -> None:
    body = {k: v for k, v in draft(spiky).items() if k not in ("from", "to")}
    r = api.post("/api/v1/alert-rules/backtest", json=body, headers=spiky["h"])
    assert r.status_code == 200, r.text
    out = r.json()
    # 2.5 h of data, not 7 days: one drawn point per window, so spikes are steps, not a line.
    assert datetime.fromisoformat(out["from"]) == spiky["start"]
    assert out["draw_step_s"] == 60
    (series,) = out["series"]
    assert len(series["windows"]) >= WINDOWS
    drawn = {datetime.fromisoformat(w["start"]) for w in series["windows"] if w["breach"]}
    assert {f["start"] for f in out["firings"]} == {
        f["start"] for f in out["firings"] if datetime.fromisoformat(f["start"]) in drawn}
    assert out["count"] == 5


def test_x_of_y_in_the_backtest_needs_two_bad_windows_of_three(api: httpx.Client,
                                                               spiky: Any) -> None:
    r = api.post("/api/v1/alert-rules/backtest", json=draft(spiky, x=2, y=3),
                 headers=spiky["h"])
    assert r.status_code == 200, r.text
    assert r.json()["count"] == 1  # only windows 10-11 are two bad of three
    assert datetime.fromisoformat(r.json()["firings"][0]["start"]) == \
        spiky["start"] + timedelta(minutes=10)


def test_thirty_second_windows_come_from_raw_samples(api: httpx.Client, spiky: Any) -> None:
    r = api.post("/api/v1/alert-rules/backtest", json=draft(spiky, window_s=30, statistic="p90"),
                 headers=spiky["h"])
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["source"]["resolution"] == "raw"
    # each 60 s spike window is two 30 s windows; 10-11 and adjacent halves merge
    assert body["count"] == 5
    assert len(body["series"][0]["windows"]) == 2 * WINDOWS


async def test_live_evaluation_agrees_with_the_backtest(services: Any, db: Engine,
                                                        spiky: Any) -> None:
    """One implementation, two drivers: evaluating the last hour window by window fires
    where the backtest says it would."""
    rule = insert_rule(db, spiky["org"].org_id, statistic="p95", window_s=60,
                       scope={"src": [str(spiky["a"])], "dst": [str(spiky["b"])]},
                       condition={"type": "above", "value": 20_000})
    sm = sessionmaker_for(services.database_url)
    first = spiky["start"] + timedelta(minutes=110)
    for i in range(1, 41):
        await evaluate_cycle(sm, now=first + timedelta(seconds=60 * i + 6), rule_ids=[rule])
    got = [a.started_at for a in alerts_of(db, rule)]
    assert got[-2:] == [spiky["start"] + timedelta(minutes=w) for w in (120, 146)]
