"""Path traces over HTTP: an agent sends its traces, a retry stores nothing twice, a changed
route is one path change naming where the paths part and what the new hop added, and bad
input is refused naming the field."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from tests.helpers import enroll
from tests.path_helpers import trace

T0 = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)


def test_a_changed_route_is_one_path_change_naming_the_hop_where_the_paths_part(
        client: httpx.Client, make_org: Callable) -> None:
    org = make_org()
    a = enroll(client, org.enrollment_token, "tracer")
    b = enroll(client, org.enrollment_token, "peer")
    direct = ["198.51.100.1", "198.51.100.2"]
    detour = ["198.51.100.1", "192.0.2.77", "192.0.2.78"]
    batch = [trace(b.agent_id, T0 + timedelta(minutes=10 * i), direct) for i in range(3)]
    # An ECMP sibling at TTL 2 is the same path.
    batch.append(trace(b.agent_id, T0 + timedelta(minutes=30), ["198.51.100.1", "198.51.100.3"]))
    batch += [trace(b.agent_id, T0 + timedelta(minutes=40 + 10 * i), detour, step_us=3000)
              for i in range(2)]
    r = client.post("/api/v1/ingest/paths", headers=a.headers, json={"traces": batch})
    assert r.status_code == 202, r.text
    assert r.json() == {"stored": 6, "duplicates": 0, "path_changes": 1}

    # A retried batch stores nothing twice and opens no change.
    r = client.post("/api/v1/ingest/paths", headers=a.headers, json={"traces": batch})
    assert r.json() == {"stored": 0, "duplicates": 6, "path_changes": 0}

    people = {"Authorization": f"Bearer {org.api_key}"}
    pair = {"src": a.agent_id, "dst": b.agent_id, "start": T0.isoformat(),
            "end": (T0 + timedelta(hours=2)).isoformat()}
    changes = client.get("/api/v1/analytics/paths/changes", headers=people, params=pair).json()
    [change] = changes["changes"]
    assert change["at"].startswith("2026-11-29T08:40:00")
    assert change["diff_ttl"] == 2
    assert change["parting_after"] == ["198.51.100.1"]
    assert change["differing_ttls"] == [2, 3, 4]
    assert change["added_rtt_us"] == 2 * 3000 - 2 * 2000
    assert change["from_path"]["traces"] == 4
    assert [h["addrs"] for h in change["from_path"]["hops"]][1] == ["198.51.100.2", "198.51.100.3"]

    current = client.get("/api/v1/analytics/paths/current", headers=people,
                         params={"src": a.agent_id, "dst": b.agent_id}).json()["path"]
    assert current["id"] == change["to_path"]["id"] and current["traces"] == 2
    assert [h["addrs"][0] for h in current["hops"]] == [*detour, "203.0.113.9"]

    traces = client.get("/api/v1/analytics/paths/traces", headers=people, params=pair).json()
    assert len(traces["traces"]) == 6
    newest, oldest = traces["traces"][0], traces["traces"][-1]
    diff = client.get("/api/v1/analytics/paths/diff", headers=people,
                      params={"a": oldest["id"], "b": newest["id"]}).json()
    assert diff["same_path"] is False and diff["diff_ttl"] == 2

    # Another org sees none of it.
    other = make_org()
    them = {"Authorization": f"Bearer {other.api_key}"}
    assert client.get("/api/v1/analytics/paths/changes", headers=them,
                      params=pair).json() == {"changes": []}
    assert client.get("/api/v1/analytics/paths/diff", headers=them,
                      params={"a": oldest["id"], "b": newest["id"]}).status_code == 404


def test_a_late_trace_joins_the_path_of_its_time_and_opens_no_change(
        client: httpx.Client, make_org: Callable) -> None:
    org = make_org()
    a = enroll(client, org.enrollment_token, "tracer")
    b = enroll(client, org.enrollment_token, "peer")
    first = [trace(b.agent_id, T0, ["198.51.100.1", "198.51.100.2"]),
             trace(b.agent_id, T0 + timedelta(minutes=20), ["192.0.2.1", "192.0.2.2"])]
    assert client.post("/api/v1/ingest/paths", headers=a.headers,
                       json={"traces": first}).json()["path_changes"] == 1
    late = [trace(b.agent_id, T0 + timedelta(minutes=10), ["198.51.100.1", "198.51.100.2"]),
            trace(b.agent_id, T0 + timedelta(minutes=15), ["192.0.2.5", "192.0.2.6"])]
    assert client.post("/api/v1/ingest/paths", headers=a.headers,
                       json={"traces": late}).json() == {"stored": 2, "duplicates": 0,
                                                         "path_changes": 0}
    people = {"Authorization": f"Bearer {org.api_key}"}
    traces = client.get("/api/v1/analytics/paths/traces", headers=people, params={
        "src": a.agent_id, "dst": b.agent_id, "start": T0.isoformat(),
        "end": (T0 + timedelta(hours=1)).isoformat()}).json()["traces"]
    by_time = {t["started_at"][11:16]: t["path_id"] for t in traces}
    assert by_time["08:10"] == by_time["08:00"] and by_time["08:15"] is None


def test_bad_traces_are_refused_naming_the_field_and_store_nothing(
        client: httpx.Client, make_org: Callable) -> None:
    org = make_org()
    a = enroll(client, org.enrollment_token, "tracer")
    b = enroll(client, org.enrollment_token, "peer")
    good = trace(b.agent_id, T0, ["198.51.100.1"])

    def refused(mutate: Callable[[dict], Any], where: list) -> None:
        bad = {**good, "id": str(uuid.uuid4()), "hops": [dict(h) for h in good["hops"]]}
        mutate(bad)
        r = client.post("/api/v1/ingest/paths", headers=a.headers,
                        json={"traces": [trace(b.agent_id, T0, ["198.51.100.1"]), bad]})
        assert r.status_code == 422, r.text
        assert any(e["loc"][:len(where)] == where for e in r.json()["detail"]), r.text

    refused(lambda t: t.update(dst_agent_id=str(uuid.uuid4())),
            ["body", "traces", 1, "dst_agent_id"])
    refused(lambda t: t["hops"][0].update(addrs=["not-an-ip"]),
            ["body", "traces", 1, "hops", 0, "addrs"])
    refused(lambda t: t["hops"][0].update(ttl=3), ["body", "traces", 1])
    refused(lambda t: t["hops"][0].update(rtt_min_us=10**6), ["body", "traces", 1, "hops", 0])
    refused(lambda t: t["hops"][0].update(lost=4), ["body", "traces", 1, "hops", 0])
    refused(lambda t: t.update(started_at=(datetime.now(UTC) + timedelta(hours=1)).isoformat()),
            ["body", "traces", 1, "started_at"])
    refused(lambda t: t.update(reached=False), ["body", "traces", 1])
    people = {"Authorization": f"Bearer {org.api_key}"}
    assert client.get("/api/v1/analytics/paths/traces", headers=people, params={
        "src": a.agent_id, "dst": b.agent_id, "start": (T0 - timedelta(hours=1)).isoformat(),
        "end": (T0 + timedelta(hours=1)).isoformat()}).json() == {"traces": []}
    # Only an agent's token sends traces.
    assert client.post("/api/v1/ingest/paths", headers=people,
                       json={"traces": [good]}).status_code in (401, 403)


def test_a_level_shift_carries_the_path_change_beside_it_and_a_shift_without_one_none(
        client: httpx.Client, make_org: Callable) -> None:
    import numpy as np

    from tests.api.test_analytics_shifts import RATE_HZ, _mesh, _post

    org = make_org()
    a = enroll(client, org.enrollment_token, "tracer")
    b = enroll(client, org.enrollment_token, "moved")
    c = enroll(client, org.enrollment_token, "stayed")
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=40)
    step_at = start + timedelta(minutes=15)
    rng = np.random.default_rng(11)
    n = 30 * 60 * RATE_HZ
    for dst in (b, c):
        level = np.full(n, 20_000.0)
        level[15 * 60 * RATE_HZ:] += 6_000.0  # both pairs step up 6 ms at 15 minutes
        _post(client, a, _mesh(a, dst.agent_id, start,
                               np.round(level + rng.exponential(300, n))))
    # Traces every 10 minutes; a-b's route changes, the first trace on it 4 minutes after
    # the step (within one interval); a-c's does not.
    old, new = ["198.51.100.1", "198.51.100.2"], ["198.51.100.1", "192.0.2.50", "192.0.2.51"]
    traces = [trace(b.agent_id, start + timedelta(minutes=m), old if m < 15 else new)
              for m in (1, 11, 19, 29)]
    traces += [trace(c.agent_id, start + timedelta(minutes=m), old) for m in (1, 11, 19, 29)]
    r = client.post("/api/v1/ingest/paths", headers=a.headers, json={"traces": traces})
    assert r.json()["path_changes"] == 1, r.text

    people = {"Authorization": f"Bearer {org.api_key}"}
    span = {"start": start.isoformat(), "end": (start + timedelta(minutes=30)).isoformat(),
            "window_s": 30}
    for dst, changed in ((b, True), (c, False)):
        r = client.get("/api/v1/analytics/mesh/level-shifts", headers=people,
                       params={**span, "src": a.agent_id, "dst": dst.agent_id})
        assert r.status_code == 200, r.text
        [shift] = r.json()["shifts"]
        assert abs(datetime.fromisoformat(shift["time"]) - step_at) <= timedelta(seconds=60)
        if changed:
            pc = shift["path_change"]
            assert pc is not None and pc["diff_ttl"] == 2
            assert pc["parting_after"] == ["198.51.100.1"]
            assert pc["at"].startswith((start + timedelta(minutes=19)).isoformat()[:16])
        else:
            assert shift["path_change"] is None

    r = client.get("/api/v1/analytics/mesh/level-shifts", headers=people,
                   params={**span, "src": a.agent_id, "group_by": "pair", "resolution": "raw"})
    assert r.status_code == 200, r.text
    by_dst = {g["group"][1]: g["shifts"] for g in r.json()["groups"]}
    assert by_dst[b.agent_id][0]["path_change"]["diff_ttl"] == 2
    assert by_dst[c.agent_id][0]["path_change"] is None


def test_a_person_asks_for_a_trace_and_the_agent_answers_it_through_its_config(
        client: httpx.Client, make_org: Callable) -> None:
    org = make_org()
    a = enroll(client, org.enrollment_token, "tracer")
    b = enroll(client, org.enrollment_token, "peer")
    people = {"Authorization": f"Bearer {org.api_key}"}
    r = client.post("/api/v1/analytics/paths/requests", headers=people,
                    json={"src": a.agent_id, "dst": b.agent_id})
    assert r.status_code == 202, r.text
    rid = r.json()["id"]
    # Asking again while it waits is the same request.
    assert client.post("/api/v1/analytics/paths/requests", headers=people, json={
        "src": a.agent_id, "dst": b.agent_id}).json()["id"] == rid
    config = client.get("/api/v1/agent/config", headers=a.headers).json()
    assert config["paths"]["requests"] == [{"id": rid, "peer": b.agent_id, "trigger": "request"}]

    answer = {**trace(b.agent_id, datetime.now(UTC) - timedelta(seconds=5),
                      ["198.51.100.1"]), "trigger": "request", "request_id": rid}
    assert client.post("/api/v1/ingest/paths", headers=a.headers,
                       json={"traces": [answer]}).status_code == 202
    assert client.get("/api/v1/agent/config", headers=a.headers).json()["paths"] == {
        "requests": []}

    # Only agents of the org, and not to itself.
    for body, field in (({"src": a.agent_id, "dst": str(uuid.uuid4())}, "dst"),
                        ({"src": a.agent_id, "dst": a.agent_id}, "dst")):
        r = client.post("/api/v1/analytics/paths/requests", headers=people, json=body)
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", field], r.text
