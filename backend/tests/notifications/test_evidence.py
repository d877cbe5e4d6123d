"""Evidence, the hand-off from evaluation to delivery: its versioned JSON form, and rows
stored before it (three historic shapes, written here as they sit in the database) still
read by delivery and the alert API."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
import orjson
from sqlalchemy import Engine, text

from stormwatch.core.config import Settings
from stormwatch.core.db import get_sync_engine
from stormwatch.services.alerts.evidence import (
    Evidence,
    SeriesEvidence,
    TimeRange,
    WindowValue,
)
from stormwatch.services.notify import dispatch
from tests.notifications.conftest import Org, add_rule
from tests.notifications.servers import HttpReceiver

T0 = datetime(2026, 11, 23, 18, 0, tzinfo=UTC)

# Delivery's first shape: one series named by a string, its value as given.
FLAT = {"series_name": "eu-1 -> us-1", "value": 912.0, "threshold": 50.0, "unit": "ms",
        "dashboard_path": "/pair?src=eu-1"}
# One series as an object, its value under "peak".
ONE_OBJECT = {"series": {"key": "k1|k2", "name": "eu-2 -> us-1"}, "peak": 640.0,
              "threshold": 50.0, "unit": "us"}
# Evaluation's list before the unit followed the statistic: a loss rate in "us", no
# series_name; the windows of each agreeing series.
EVALUATION_LIST = {
    "rule_name": "loss", "metric": "mesh_rtt", "statistic": "loss_rate", "unit": "us",
    "window_s": 30, "condition": {"type": "above", "value": 0.05}, "x": 1, "y": 1, "n": 2,
    "m": None, "value": 0.25, "threshold": 0.05, "baseline": None, "agreeing": 2,
    "series": [
        {"key": "a|b", "name": "a → b", "src": {"id": "a", "name": "a"},
         "dst": {"id": "b", "name": "b"}, "topology_class": "cross_region", "value": 0.25,
         "threshold": 0.05, "baseline": None,
         "values": [{"start": "2026-11-23T18:00:00+00:00", "value": 0.25, "threshold": 0.05,
                     "breach": True}]},
        {"key": "a|c", "name": "a → c", "value": 0.5, "threshold": 0.05, "baseline": None,
         "values": []}],
    "time_range": {"from": "2026-11-23T18:00:00+00:00", "to": "2026-11-23T18:00:30+00:00"},
    "dashboard_path": "/pair?level=node&src=a&dst=b"}


def test_the_three_historic_shapes_read_as_evidence() -> None:
    flat = Evidence.read(FLAT)
    assert (flat.title, flat.value, flat.unit, flat.dashboard_path) == (
        "eu-1 -> us-1", 912.0, "ms", "/pair?src=eu-1")
    one = Evidence.read(ONE_OBJECT)
    assert (one.title, one.value, one.threshold, one.unit) == ("eu-2 -> us-1", 640.0, 50.0,
                                                               "us")
    listed = Evidence.read(EVALUATION_LIST)
    assert listed.title == "2 series agree: a → b, a → c"
    assert (listed.value, listed.unit, listed.n) == (0.25, "ratio", 2)
    assert listed.series[0].model_extra == {"src": {"id": "a", "name": "a"},
                                            "dst": {"id": "b", "name": "b"},
                                            "topology_class": "cross_region"}
    assert listed.series[0].values[0].breach is True
    assert listed.time_range is not None and listed.time_range.start == T0
    # an alert's row: its firing evidence with the resolution's beside it
    resolved = Evidence.read({**FLAT, "resolution": {**FLAT, "value": 12.0}})
    assert resolved.resolution is not None and resolved.resolution.value == 12.0
    assert Evidence.read(None) == Evidence() and Evidence.read({}).title == ""
    assert Evidence.read({"series": "x -> y", "values": [1.0, 7.5]}).value == 7.5


def test_the_written_form_is_versioned_and_reads_back_the_same() -> None:
    s = SeriesEvidence(key="a|b", name="a → b", src={"id": "a", "name": "a"}, value=None,
                       threshold=50.0, baseline=None,
                       values=[WindowValue(start=T0, value=None, threshold=50.0, breach=False)])
    ev = Evidence(rule_name="r", metric="mesh_rtt", statistic="p99", unit="us",
                  series_name="a → b", value=None, series=[s],
                  time_range=TimeRange(start=T0, end=T0))
    stored = orjson.loads(orjson.dumps(ev.to_json()))
    assert stored["v"] == 1
    assert stored["value"] is None  # no data, said as such
    assert stored["series"][0]["src"] == {"id": "a", "name": "a"}
    assert stored["series"][0]["values"][0]["start"] == "2026-11-23T18:00:00+00:00"
    assert stored["time_range"] == {"from": "2026-11-23T18:00:00+00:00",
                                    "to": "2026-11-23T18:00:00+00:00"}
    assert "m_matched" not in stored and "resolution" not in stored
    assert Evidence.read(stored) == ev


def _store(db: Engine, org: uuid.UUID, rule: uuid.UUID, evidence: dict[str, Any]
           ) -> uuid.UUID:
    """An alert and its firing event with the evidence as stored JSON."""
    aid = uuid.uuid4()
    ev = orjson.dumps(evidence).decode()
    with db.begin() as c:
        c.execute(text(
            "INSERT INTO alerts (id, org_id, rule_id, group_key, state, started_at, evidence) "
            "VALUES (:id, :org, :rule, :key, 'firing', :at, CAST(:ev AS jsonb))"),
            {"id": aid, "org": org, "rule": rule, "key": f"g-{aid}", "at": T0, "ev": ev})
        c.execute(text(
            "INSERT INTO alert_events (id, org_id, rule_id, alert_id, kind, at, evidence) "
            "VALUES (gen_random_uuid(), :org, :rule, :id, 'firing', now(), "
            "CAST(:ev AS jsonb))"), {"id": aid, "org": org, "rule": rule, "ev": ev})
    return aid


def test_stored_rows_of_each_historic_shape_are_delivered_and_listed(
        settings: Settings, org: Org, db: Engine, api: httpx.Client) -> None:
    with HttpReceiver() as hook:
        ch, hook.secret = org.webhook(hook.url)
        rules = {name: add_rule(db, org.id, [ch], name=name)
                 for name in ("flat", "object", "list")}
        for name, shape in (("flat", FLAT), ("object", ONE_OBJECT), ("list", EVALUATION_LIST)):
            _store(db, org.id, rules[name], shape)
        engine = get_sync_engine()
        # Counted for this org: the planner serves every org, and an earlier test of this
        # worker may have left one of its own events pending.
        with engine.begin() as conn:
            dispatch.plan(conn)
        dispatch.deliver_due(engine, budget_s=30)
        with engine.connect() as conn:
            sent = conn.execute(text(
                "SELECT count(*) FROM notification_deliveries WHERE org_id = :o "
                "AND state = 'sent'"), {"o": org.id}).scalar_one()
        assert sent == 3 and len(hook.accepted) == 3
    got = {m["data"]["rule"]: m["data"]["alerts"][0] for m in hook.accepted.values()}
    assert {n: (a["series"], a["value"], a["unit"]) for n, a in got.items()} == {
        "flat": ("eu-1 -> us-1", 912.0, "ms"), "object": ("eu-2 -> us-1", 640.0, "us"),
        "list": ("2 series agree: a → b, a → c", 0.25, "ratio")}
    assert got["flat"]["link"] == "https://sw.example/pair?src=eu-1"
    listed = api.get("/api/v1/alerts", headers=org.headers)
    assert listed.status_code == 200, listed.text
    by_rule = {uuid.UUID(a["rule_id"]): a for a in listed.json()}
    assert [s["name"] for s in by_rule[rules["list"]]["series"]] == ["a → b", "a → c"]
    assert "values" not in by_rule[rules["list"]]["series"][0]
    assert by_rule[rules["object"]]["series"] == [{"key": "k1|k2", "name": "eu-2 -> us-1"}]
    assert by_rule[rules["flat"]]["dashboard_path"] == "/pair?src=eu-1"
    assert by_rule[rules["list"]]["evidence"] == EVALUATION_LIST  # as stored
