"""Alert rules over HTTP: CRUD, a 422 naming the field for each class of bad input, roles
(viewers read only) and tenants (another org sees and changes nothing)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from stormwatch.services import accounts
from tests.alert_helpers import insert_rule, make_agents, sessionmaker_for

RULE: dict[str, Any] = {
    "name": "p99 spike a→b", "description": "tail spike on the a→b link",
    "severity": "critical", "labels": {"team": "net"}, "metric": "mesh_rtt",
    "statistic": "p99", "window_s": 30,
    "condition": {"type": "above", "value": 20000}, "x": 1, "y": 1, "n": 1, "m": 1}


@pytest.fixture(scope="module")
def fleet(make_org: Callable, db: Engine) -> Any:
    org = make_org()
    a, b, c = make_agents(db, org.org_id, [
        {"name": "a", "region": "us-east-1", "zone": "us-east-1a"},
        {"name": "b", "region": "eu-west-1", "zone": "eu-west-1a"},
        {"name": "c", "region": "eu-west-1", "zone": "eu-west-1b"}])
    return {"org": org, "a": a, "b": b, "c": c,
            "h": {"Authorization": f"Bearer {org.api_key}"}}


def rule_for(fleet: Any, **kw: Any) -> dict[str, Any]:
    return {**RULE, "scope": {"src": [str(fleet["a"])], "dst": [str(fleet["b"])]}, **kw}


def test_an_admin_creates_reads_changes_and_deletes_a_rule(api: httpx.Client,
                                                           fleet: Any) -> None:
    r = api.post("/api/v1/alert-rules", json=rule_for(fleet), headers=fleet["h"])
    assert r.status_code == 201, r.text
    rule = r.json()
    assert rule["scope"] == {"src": [str(fleet["a"])], "dst": [str(fleet["b"])]}
    assert rule["condition"] == {"type": "above", "value": 20000.0}
    assert rule["org_id"] == fleet["org"].org_id and rule["firing"] == 0
    got = api.get(f"/api/v1/alert-rules/{rule['id']}", headers=fleet["h"]).json()
    assert got["name"] == RULE["name"] and got["labels"] == {"team": "net"}
    assert rule["id"] in [x["id"] for x in api.get("/api/v1/alert-rules",
                                                   headers=fleet["h"]).json()]
    r = api.patch(f"/api/v1/alert-rules/{rule['id']}", headers=fleet["h"], json={
        "condition": {"type": "baseline", "k": 3}, "x": 2, "y": 3})
    assert r.status_code == 200, r.text
    assert r.json()["condition"] == {"type": "baseline", "k": 3.0, "baseline": "prev_24h"}
    assert (r.json()["x"], r.json()["y"]) == (2, 3)
    assert api.delete(f"/api/v1/alert-rules/{rule['id']}", headers=fleet["h"]).status_code == 204
    assert api.get(f"/api/v1/alert-rules/{rule['id']}", headers=fleet["h"]).status_code == 404


def test_the_catalog_lists_metrics_statistics_and_conditions(api: httpx.Client,
                                                             fleet: Any) -> None:
    body = api.get("/api/v1/alert-rules/metrics", headers=fleet["h"]).json()
    names = {m["name"]: m for m in body["metrics"]}
    assert {"mesh_rtt", "quorum_latency", "storage_latency", "storage_latency_adjusted",
            "throughput", "agent_silence"} <= set(names)
    assert "p99.999" in names["mesh_rtt"]["statistics"]
    assert "loss_rate" in names["mesh_rtt"]["statistics"]
    assert "failure_rate" in names["storage_latency"]["statistics"]
    assert names["agent_silence"]["conditions"] == ["above"]
    # each statistic's unit, so the UI never works one out: rates are ratios
    assert names["mesh_rtt"]["units"]["p99.99"] == "us"
    assert names["mesh_rtt"]["units"]["loss_rate"] == "ratio"
    assert names["storage_latency"]["units"]["failure_rate"] == "ratio"
    assert names["throughput"]["units"]["min"] == "bytes/s"
    assert names["agent_silence"]["units"] == {"silence_s": "s"}
    assert all(set(m["units"]) == set(m["statistics"]) for m in body["metrics"])
    assert body["conditions"] == ["above", "below", "baseline", "level_shift"]


def test_every_vocabulary_value_offered_is_accepted_by_the_api(api: httpx.Client,
                                                               fleet: Any) -> None:
    body = api.get("/api/v1/vocabularies", headers=fleet["h"]).json()
    assert body["topology_classes"] == ["self", "same_subnet", "cross_subnet", "cross_az",
                                        "cross_region", "cross_provider"]
    assert body["alert_metrics"] == api.get("/api/v1/alert-rules/metrics",
                                            headers=fleet["h"]).json()
    assert {"put", "get", "read_after_write"} <= set(body["storage_ops"])
    assert {"plain", "gzip9"} <= set(body["storage_variants"])
    assert body["storage_providers"] == ["s3", "azure", "gcs"]
    assert {"p99", "mean", "loss_rate"} <= set(body["statistics"])
    # each class offered is one the backtest takes: the fleet's own classes backtest, the
    # others are refused for matching no pair, never as an unknown class
    answers = {cls: api.post("/api/v1/alert-rules/backtest", headers=fleet["h"],
                             json={**RULE, "scope": {"topology_class": [cls]}})
               for cls in body["topology_classes"]}
    assert {c for c, r in answers.items() if r.status_code == 200} == {"self", "cross_az",
                                                                        "cross_region"}
    for r in answers.values():
        assert r.status_code == 200 or "matches none of this org's agent pairs" in r.text, r.text
    # and the rankings take each statistic it offers
    for stat in body["statistics"]:
        r = api.get("/api/v1/advisors/rankings", headers=fleet["h"],
                    params={"kind": "mesh", "level": "region", "stat": stat})
        assert r.status_code == 200, (stat, r.text)


def _unknown() -> str:
    return str(uuid.uuid4())


BAD = [
    ("unknown metric", {"metric": "mesh_jitter"}, ["body", "metric"], "unknown metric"),
    ("unknown statistic", {"statistic": "p100"}, ["body", "statistic"], "no statistic"),
    ("statistic of another metric", {"statistic": "failure_rate"}, ["body", "statistic"],
     "no statistic"),
    ("scope matching nothing", {"scope": {"regions": ["mars-1"]}}, ["body", "scope",
                                                                     "regions"], "mars-1"),
    ("unknown agent", {"scope": {"src": "UNKNOWN"}}, ["body", "scope", "src"], "no agent"),
    ("zone by its bare name", {"scope": {"zones": ["us-east-1a"]}}, ["body", "scope", "zones"],
     "provider/region/zone"),
    ("unknown zone key", {"scope": {"zones": ["aws/us-east-1/us-east-1z"]}},
     ["body", "scope", "zones"], "aws/us-east-1/us-east-1z"),
    ("filter of another kind", {"scope": {"op": ["put"]}}, ["body", "scope", "op"],
     "does not apply"),
    ("window the data cannot answer", {"statistic": "p99.9"}, ["body", "window_s"],
     "1000 samples"),
    ("window between minutes", {"window_s": 45}, ["body", "window_s"], "whole minutes"),
    ("N larger than M", {"n": 3, "m": 2}, ["body", "n"], "cannot exceed m"),
    ("X larger than Y", {"x": 4, "y": 3}, ["body", "x"], "cannot exceed y"),
    ("M larger than the matched series", {"n": 1, "m": 5}, ["body", "m"], "exceeds"),
    ("window out of range", {"window_s": 7200}, ["body", "window_s"], "less than or equal"),
    ("unknown condition", {"condition": {"type": "sideways"}}, ["body", "condition"], ""),
    ("unknown channel", {"channel_ids": "UNKNOWN"}, ["body", "channel_ids"], ""),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_a_rule_that_cannot_work_is_a_422_naming_the_field(api: httpx.Client, fleet: Any,
                                                           case: Any) -> None:
    _, change, loc, words = case
    change = {k: ([_unknown()] if v == "UNKNOWN" else v) for k, v in change.items()}
    if change.get("scope", {}).get("src") == "UNKNOWN":
        change["scope"] = {"src": [_unknown()]}
    body = {**rule_for(fleet), **change}
    r = api.post("/api/v1/alert-rules", json=body, headers=fleet["h"])
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert any(list(d["loc"])[:len(loc)] == loc and words in d["msg"] for d in detail), detail
    # the backtest refuses the same draft the same way
    r = api.post("/api/v1/alert-rules/backtest", json=body, headers=fleet["h"])
    assert r.status_code == 422 and any(list(d["loc"])[:len(loc)] == loc
                                        for d in r.json()["detail"]), r.text


def test_a_zone_scope_is_a_provider_region_zone_key(api: httpx.Client, fleet: Any) -> None:
    r = api.post("/api/v1/alert-rules", headers=fleet["h"],
                 json={**RULE, "m": None, "scope": {"zones": ["aws/eu-west-1/eu-west-1a"]}})
    assert r.status_code == 201, r.text
    assert r.json()["scope"] == {"zones": ["aws/eu-west-1/eu-west-1a"]}
    assert api.delete(f"/api/v1/alert-rules/{r.json()['id']}",
                      headers=fleet["h"]).status_code == 204


def test_an_unknown_agent_in_scope_is_named(api: httpx.Client, fleet: Any) -> None:
    r = api.post("/api/v1/alert-rules", headers=fleet["h"],
                 json={**RULE, "m": None, "scope": {"src": [_unknown()]}})
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", "scope", "src"]


def test_a_viewer_reads_rules_but_cannot_change_them(api_server: Any, services: Any,
                                                     fleet: Any, db: Engine) -> None:
    email = f"viewer-{uuid.uuid4().hex[:8]}@example.test"

    async def make_viewer() -> None:
        sm = sessionmaker_for(services.database_url)
        async with sm() as s:
            await accounts.create_user(s, uuid.UUID(fleet["org"].org_id), email, "viewer pass 1",
                                       role="viewer")
            await s.commit()

    asyncio.run(make_viewer())
    rid = insert_rule(db, fleet["org"].org_id, name="seen by viewers")
    with api_server.client() as c:
        r = c.post("/api/v1/auth/login", json={"email": email, "password": "viewer pass 1"})
        assert r.status_code == 200, r.text
        h = {"X-CSRF-Token": r.json()["csrf_token"]}
        assert c.get(f"/api/v1/alert-rules/{rid}").status_code == 200
        assert c.get("/api/v1/alerts").status_code == 200
        assert c.post("/api/v1/alert-rules", json=rule_for(fleet), headers=h).status_code == 403
        assert c.patch(f"/api/v1/alert-rules/{rid}", json={"name": "x"},
                       headers=h).status_code == 403
        assert c.delete(f"/api/v1/alert-rules/{rid}", headers=h).status_code == 403
        # a draft can still be backtested: it changes nothing
        assert c.post("/api/v1/alert-rules/backtest", json=rule_for(fleet),
                      headers=h).status_code == 200
    assert fleet["h"] and api_server


def test_another_org_can_neither_see_nor_change_a_rule_or_its_alerts(
        api: httpx.Client, fleet: Any, make_org: Callable, db: Engine) -> None:
    r = api.post("/api/v1/alert-rules", json=rule_for(fleet), headers=fleet["h"])
    rid = r.json()["id"]
    with db.begin() as c:
        from sqlalchemy import text
        aid = uuid.uuid4()
        c.execute(text("INSERT INTO alerts (id, org_id, rule_id, group_key, state, started_at, "
                       "evidence) VALUES (:id, :o, :r, 'k', 'firing', now(), '{}'::jsonb)"),
                  {"id": aid, "o": fleet["org"].org_id, "r": rid})
    other = make_org()
    h = {"Authorization": f"Bearer {other.api_key}"}
    assert api.get(f"/api/v1/alert-rules/{rid}", headers=h).status_code == 404
    assert api.patch(f"/api/v1/alert-rules/{rid}", json={"name": "mine"},
                     headers=h).status_code == 404
    assert api.delete(f"/api/v1/alert-rules/{rid}", headers=h).status_code == 404
    assert api.get("/api/v1/alert-rules", headers=h).json() == []
    assert api.get("/api/v1/alerts", headers=h).json() == []
    assert api.get(f"/api/v1/alerts/{aid}", headers=h).status_code == 404
    # a rule of org B cannot watch org A's agents either
    r = api.post("/api/v1/alert-rules", json=rule_for(fleet), headers=h)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"][:3] == ["body", "scope", "src"]
    # the owner still sees both
    assert api.get(f"/api/v1/alerts/{aid}", headers=fleet["h"]).json()["rule_id"] == rid


def test_a_rule_records_the_api_key_or_the_user_that_created_it(
        api_server: Any, api: httpx.Client, fleet: Any, db: Engine) -> None:
    from sqlalchemy import text
    org = fleet["org"]
    with db.connect() as c:
        key_id, user_id = c.execute(text(
            "SELECT k.id, u.id FROM api_keys k JOIN users u ON u.org_id = k.org_id "
            "WHERE k.org_id = :o AND u.email = :e"), {"o": org.org_id, "e": org.email}).one()
    r = api.post("/api/v1/alert-rules", json=rule_for(fleet, name="by key"), headers=fleet["h"])
    assert r.status_code == 201, r.text
    assert (r.json()["created_by"], r.json().get("created_by_key_id")) == (None, str(key_id))
    got = api.get(f"/api/v1/alert-rules/{r.json()['id']}", headers=fleet["h"]).json()
    assert got["created_by_key_id"] == str(key_id)
    listed = {x["id"]: x for x in api.get("/api/v1/alert-rules", headers=fleet["h"]).json()}
    assert listed[r.json()["id"]]["created_by_key_id"] == str(key_id)
    with api_server.client() as c:
        login = c.post("/api/v1/auth/login", json={"email": org.email, "password": org.password})
        assert login.status_code == 200, login.text
        r = c.post("/api/v1/alert-rules", json=rule_for(fleet, name="by user"),
                   headers={"X-CSRF-Token": login.json()["csrf_token"]})
        assert r.status_code == 201, r.text
        assert (r.json()["created_by"], r.json()["created_by_key_id"]) == (str(user_id), None)
