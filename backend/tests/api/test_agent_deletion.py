"""Deleting an agent loses nothing else and leaves no bare id: its peers' batches are stored
without the rows about it, its token learns it was deleted (410), and analyses either name
it "<name> (deleted)" or, when purged, no longer hold its samples."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from tests.helpers import enroll, mesh_batch, now_us, post_batch


def count(db, sql: str, **params: object) -> int:
    with db.connect() as c:
        return int(c.execute(text(sql), params).scalar())


@pytest.fixture
def fleet(api, make_org):
    org = make_org()
    agents = [enroll(api, org.enrollment_token, f"del-{i}", provider="aws",
                     region="us-east-1" if i < 3 else "eu-west-1",
                     zone="us-east-1a" if i < 3 else "eu-west-1a") for i in range(4)]
    return org, agents


def admin(org) -> dict[str, str]:
    return {"Authorization": f"Bearer {org.api_key}"}


def delete_agent(api, org, agent, **params: str) -> None:
    r = api.delete(f"/api/v1/agents/{agent.agent_id}", headers=admin(org), params=params)
    assert r.status_code == 204, r.text


def test_rows_about_a_deleted_peer_are_set_aside_and_the_rest_of_the_batch_stored(
        api, db, fleet):
    org, agents = fleet
    gone = agents[3]
    delete_agent(api, org, gone)
    # The sender had not yet polled its config: the deleted peer is still in its mesh.
    peers = [a.agent_id for a in agents]
    t = now_us() - 2_000_000
    batch = mesh_batch(agents[0], peers, rounds=50)
    batch["quorum"] = {"groups": ["zone"], "time_us": [t, t + 1], "group_idx": [0, 0],
                       "round": [0, 1], "k": [2, 2], "n": [3, 3], "latency_us": [500, 510],
                       "status": [0, 0]}
    r = post_batch(api, agents[0], batch)
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["accepted"]["mesh"] == 150
    assert body["accepted"]["quorum"] == 2
    assert body["set_aside"] == {"deleted_peer": {"mesh": 50}}
    stored = count(db, "SELECT count(*) FROM mesh_samples WHERE org_id = :o", o=org.org_id)
    assert stored == 150
    assert count(db, "SELECT count(*) FROM mesh_samples WHERE dst_agent_id = :a",
                 a=gone.agent_id) == 0
    # The self-loop and the other live pairs are all there.
    for a in agents[:3]:
        assert count(db, "SELECT count(*) FROM mesh_samples WHERE src_agent_id = :s AND "
                     "dst_agent_id = :d", s=agents[0].agent_id, d=a.agent_id) == 50
    # A retry is a duplicate of what was stored.
    again = post_batch(api, agents[0], batch)
    assert again.status_code == 200, again.text
    assert again.json()["accepted"]["mesh"] == 150
    assert count(db, "SELECT count(*) FROM mesh_samples WHERE org_id = :o", o=org.org_id) == 150


def test_a_batch_naming_an_id_the_org_never_had_is_refused_whole(api, db, fleet, make_org):
    org, agents = fleet
    gone = agents[3]
    delete_agent(api, org, gone)
    other = make_org()
    foreign = enroll(api, other.enrollment_token, "elsewhere")
    delete_agent(api, other, foreign)
    for stranger in (str(uuid.uuid4()), foreign.agent_id):
        # Another org's deleted agent is as unknown here as an id that never existed.
        peers = [agents[0].agent_id, gone.agent_id, stranger]
        r = post_batch(api, agents[0], mesh_batch(agents[0], peers, rounds=10))
        assert r.status_code == 422, r.text
        assert r.json()["detail"] == [{"loc": ["body", "mesh", "peers", 2],
                                       "msg": f"unknown agent id {stranger}",
                                       "type": "value_error"}]
    assert count(db, "SELECT count(*) FROM mesh_samples WHERE org_id = :o", o=org.org_id) == 0
    assert count(db, "SELECT count(*) FROM ingest_batches WHERE org_id = :o", o=org.org_id) == 0


def test_a_deleted_agent_s_token_is_told_it_was_deleted(api, db, fleet):
    org, agents = fleet
    gone = agents[3]
    delete_agent(api, org, gone)
    config = api.get("/api/v1/agent/config", headers=gone.headers)
    assert config.status_code == 410, config.text
    assert config.json()["detail"].startswith("agent_deleted")
    r = post_batch(api, gone, mesh_batch(gone, [gone.agent_id], rounds=3))
    assert r.status_code == 410, r.text
    assert r.json()["detail"].startswith("agent_deleted")
    # A token that never was still reads as unknown.
    bogus = api.get("/api/v1/agent/config",
                    headers={"Authorization": "Bearer swa_notarealtokenatallreallynotatall"})
    assert bogus.status_code == 401
    # Enrolling the name again gives a fresh agent that works.
    back = enroll(api, org.enrollment_token, gone.name, provider="aws", region="eu-west-1",
                  zone="eu-west-1a")
    assert api.get("/api/v1/agent/config", headers=back.headers).status_code == 200


def test_an_agent_deleted_while_its_batch_is_in_flight_is_told_so_and_nothing_is_stored(
        api_server, db, fleet):
    """The batch is authenticated before the deletion commits and stored after: its batch
    row's key share on the agent waits for the deletion, then finds it gone. That was a 500
    (ForeignKeyViolationError, found by the soak, seed 453322709); it is the agent's 410.
    Synchronised on the request's backend waiting on the deletion's lock."""
    org, agents = fleet
    gone = agents[2]
    answer: dict[str, object] = {}
    deleting = db.connect()
    tx = deleting.begin()
    try:
        deleting.execute(text("DELETE FROM agents WHERE id = :a"), {"a": gone.agent_id})

        def post() -> None:
            with api_server.client() as c:
                r = post_batch(c, gone, mesh_batch(gone, [a.agent_id for a in agents], rounds=5))
                answer["status"], answer["body"] = r.status_code, r.json()

        thread = threading.Thread(target=post)
        thread.start()
        deadline = time.monotonic() + 30
        while count(db, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                        "AND datname = current_database()") == 0:
            assert thread.is_alive(), f"the batch did not wait for the deletion: {answer}"
            assert time.monotonic() < deadline, "the batch never waited for the deletion"
            time.sleep(0.02)
        tx.commit()
        thread.join(30)
    finally:
        deleting.close()
    assert answer["status"] == 410, answer
    assert str(answer["body"]["detail"]).startswith("agent_deleted")  # type: ignore[index]
    assert count(db, "SELECT count(*) FROM mesh_samples WHERE src_agent_id = :a",
                 a=gone.agent_id) == 0
    assert count(db, "SELECT count(*) FROM ingest_batches WHERE agent_id = :a",
                 a=gone.agent_id) == 0


def _post_fleet_samples(api, agents, start_us: int) -> None:
    peers = [a.agent_id for a in agents]
    for a in agents:
        r = post_batch(api, a, mesh_batch(a, peers, rounds=20, start_us=start_us))
        assert r.status_code == 202, r.text


def _heatmap(api, org, level: str, start: datetime, end: datetime) -> dict:
    r = api.get("/api/v1/analytics/mesh/heatmap", headers=admin(org),
                params={"start": start.isoformat(), "end": end.isoformat(), "level": level,
                        "stat": "count", "resolution": "raw"})
    assert r.status_code == 200, r.text
    return r.json()


def test_a_deleted_agent_s_kept_samples_are_shown_under_its_name(api, db, fleet):
    org, agents = fleet
    start_us = now_us() - 60_000_000
    _post_fleet_samples(api, agents, start_us)
    gone = agents[3]
    delete_agent(api, org, gone)
    start = datetime.fromtimestamp(start_us / 1e6, UTC) - timedelta(seconds=1)
    end = datetime.now(UTC) + timedelta(seconds=1)
    node = _heatmap(api, org, "node", start, end)
    assert "del-3 (deleted)" in node["rows"] and "del-3 (deleted)" in node["columns"]
    assert not {gone.agent_id} & set(node["rows"] + node["columns"])
    cells = {(c["src"], c["dst"]): c["count"] for c in node["cells"]}
    assert cells[("del-0", "del-3 (deleted)")] == 20
    # Above node level it still counts in the place it measured from.
    region = _heatmap(api, org, "region", start, end)
    assert set(region["rows"]) == {"us-east-1", "eu-west-1"}
    series = api.get("/api/v1/analytics/mesh/series", headers=admin(org),
                     params={"start": start.isoformat(), "end": end.isoformat(),
                             "group_by": "zone_pair", "resolution": "raw"})
    assert series.status_code == 200, series.text
    labels = {tuple(g["group"]) for g in series.json()["groups"]}
    assert ("aws/us-east-1/us-east-1a", "aws/eu-west-1/eu-west-1a") in labels
    pairs = api.get("/api/v1/analytics/mesh/series", headers=admin(org),
                    params={"start": start.isoformat(), "end": end.isoformat(),
                            "group_by": "pair", "resolution": "raw"}).json()
    assert pairs["names"][gone.agent_id] == "del-3 (deleted)"
    assert pairs["names"][agents[0].agent_id] == "del-0"
    assert set(pairs["names"]) == {i for g in pairs["groups"] for i in g["group"]}
    shifts = api.get("/api/v1/analytics/mesh/level-shifts", headers=admin(org),
                     params={"start": start.isoformat(), "end": end.isoformat(),
                             "group_by": "pair", "window_s": 10}).json()
    assert shifts["names"][gone.agent_id] == "del-3 (deleted)"
    csv = api.get("/api/v1/analytics/mesh/series.csv", headers=admin(org),
                  params={"start": start.isoformat(), "end": end.isoformat(),
                          "src": gone.agent_id, "resolution": "raw"})
    assert csv.status_code == 200, csv.text
    assert "del-3_deleted_" in csv.headers["content-disposition"]
    assert gone.agent_id not in csv.headers["content-disposition"]
