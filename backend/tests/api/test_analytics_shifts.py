"""Level shifts, quorum vs node-to-node, detours and asymmetry over HTTP, on samples posted
through the ingest API (raw answers: the ranges are short)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import pytest

from tests.helpers import EnrolledAgent, enroll, post_batch

RATE_HZ = 5
WINDOW_S = 30


def _mesh(src: EnrolledAgent, dst: str, start: datetime, rtt: np.ndarray) -> dict[str, Any]:
    n = rtt.size
    t0 = int(start.timestamp() * 1_000_000)
    return {"batch_id": str(uuid.uuid4()), "agent_id": src.agent_id, "mesh": {
        "peers": [dst], "time_us": (t0 + np.arange(n) * (1_000_000 // RATE_HZ)).tolist(),
        "peer_idx": [0] * n, "round": np.arange(n).tolist(), "payload_bytes": [1024] * n,
        "rtt_us": [int(v) for v in rtt], "status": [0] * n}}


def _post(client: httpx.Client, agent: EnrolledAgent, batch: dict[str, Any]) -> None:  # noqa: F811
    r = post_batch(client, agent, batch)
    assert r.status_code == 202, r.text


@pytest.fixture(scope="module")
def org(make_org: Callable) -> Any:
    return make_org()


def test_jagged_steps_are_found_within_two_windows(client: httpx.Client,  # noqa: F811
                                                   org: Any) -> None:
    a = enroll(client, org.enrollment_token, "jag-a", provider="aws", region="us-east-1",
               zone="us-east-1a")
    b = enroll(client, org.enrollment_token, "jag-b", provider="aws", region="eu-west-1",
               zone="eu-west-1a")
    rng = np.random.default_rng(4)
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=2, minutes=10)
    windows = 240  # two hours of 30 s windows
    steps = [37, 90, 141, 200]
    level = np.full(windows * WINDOW_S * RATE_HZ, 15_000.0)
    for i, w in enumerate(steps):
        level[w * WINDOW_S * RATE_HZ :] += 1_500.0 if i % 2 == 0 else -1_500.0
    rtt = level + rng.normal(0, 500, level.size) + rng.exponential(200, level.size)
    for chunk in np.array_split(np.arange(level.size), 6):
        _post(client, a, _mesh(a, b.agent_id, start + timedelta(seconds=chunk[0] / RATE_HZ),
                               rtt[chunk]))
    r = client.get("/api/v1/analytics/mesh/level-shifts", headers={
        "Authorization": f"Bearer {org.api_key}"}, params={
        "start": start.isoformat(),
        "end": (start + timedelta(seconds=windows * WINDOW_S)).isoformat(),
        "src": a.agent_id, "dst": b.agent_id, "window_s": WINDOW_S})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["source"]["resolution"] == "raw"
    found = [s["window_index"] for s in body["shifts"]]
    assert len(found) == len(steps), found
    # window indices count from the epoch-aligned window holding `start`
    offset = int(start.timestamp()) // WINDOW_S * WINDOW_S
    shift_s = (int(start.timestamp()) - offset)
    for want, got in zip(steps, found, strict=True):
        assert abs(got - want - (1 if shift_s else 0)) <= 2
    for s in body["shifts"]:
        assert abs(abs(s["step"]) - 1_500) < 300


def test_quorum_next_to_node_to_node(client: httpx.Client, org: Any) -> None:  # noqa: F811
    q = enroll(client, org.enrollment_token, "q-1", provider="gcp", region="us-east4",
               zone="us-east4-a")
    peers = [enroll(client, org.enrollment_token, f"q-{i}", provider="gcp", region="us-east4",
                    zone=f"us-east4-{z}") for i, z in ((2, "a"), (3, "b"))]
    rng = np.random.default_rng(5)
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=20)
    n = 3000
    per_peer = [rng.lognormal(np.log(400), 0.3, n), rng.lognormal(np.log(900), 0.5, n)]
    for p, vals in zip(peers, per_peer, strict=True):
        _post(client, q, _mesh(q, p.agent_id, start, np.round(vals)))
    # Q1/2 of the two peers: the faster reply each round
    quorum = np.round(np.minimum(per_peer[0], per_peer[1]))
    t0 = int(start.timestamp() * 1_000_000)
    _post(client, q, {"batch_id": str(uuid.uuid4()), "agent_id": q.agent_id, "quorum": {
        "groups": ["zone-pair"], "time_us": (t0 + np.arange(n) * 200_000).tolist(),
        "group_idx": [0] * n, "round": list(range(n)), "k": [1] * n, "n": [2] * n,
        "latency_us": [int(v) for v in quorum], "status": [0] * n}})
    r = client.get("/api/v1/analytics/quorum/compare", headers={
        "Authorization": f"Bearer {org.api_key}"}, params={
        "start": start.isoformat(), "end": (start + timedelta(minutes=15)).isoformat(),
        "src": q.agent_id})
    assert r.status_code == 200, r.text
    body = r.json()
    (qs,) = body["quorums"]
    assert qs["quorum"] == "Q1/2" and qs["count"] == n
    assert qs["percentiles"]["p50"] == np.quantile(quorum, 0.5, method="lower")
    (nq,) = body["node_to_node"]
    assert nq["count"] == 2 * n
    assert nq["percentiles"]["p99"] > qs["percentiles"]["p99"]


def test_a_detour_and_an_asymmetry_are_reported(client: httpx.Client,  # noqa: F811
                                                make_org: Callable) -> None:
    org = make_org()
    regions = {"r-us": "us-east-1", "r-eu": "eu-west-1", "r-ap": "ap-south-1"}
    ag = {k: enroll(client, org.enrollment_token, k, provider="aws", region=v, zone=f"{v}a")
          for k, v in regions.items()}
    rng = np.random.default_rng(6)
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=15)
    # EU->AP goes through the US: RTT(EU,AP) ~ RTT(EU,US) + RTT(US,AP) (seed 004 §IV-B)
    medians = {("r-eu", "r-us"): 40_000, ("r-us", "r-ap"): 60_000, ("r-eu", "r-ap"): 98_000,
               ("r-us", "r-eu"): 40_000, ("r-ap", "r-us"): 60_000, ("r-ap", "r-eu"): 70_000}
    for (s, d), m in medians.items():
        _post(client, ag[s], _mesh(ag[s], ag[d].agent_id, start,
                                   np.round(rng.lognormal(np.log(m), 0.02, 600))))
    headers = {"Authorization": f"Bearer {org.api_key}"}
    params = {"start": start.isoformat(), "end": (start + timedelta(minutes=10)).isoformat(),
              "level": "region"}
    r = client.get("/api/v1/analytics/mesh/detours", headers=headers, params=params)
    assert r.status_code == 200, r.text
    detours = {(d["src"], d["dst"], d["via"]): d for d in r.json()["detours"]}
    # Only EU->AP: its 98 ms matches EU->US->AP (100 ms) and the other direction between
    # the same regions shows a 70 ms route exists.
    # The middle place is the metro us-east-1 stands in (services/geography).
    assert set(detours) == {("eu-west-1", "ap-south-1", "northern-virginia")}
    d = detours[("eu-west-1", "ap-south-1", "northern-virginia")]
    assert d["via_regions"] == ["aws/us-east-1"] and d["evidence"] == ["comparison"]
    assert d["best_alternative_us"] == pytest.approx(70_000, rel=0.03)
    assert d["alternative"]["src"] == "ap-south-1"
    r = client.get("/api/v1/analytics/mesh/asymmetry", headers=headers, params=params)
    assert r.status_code == 200, r.text
    top = r.json()["pairs"][0]
    assert {top["a"], top["b"]} == {"ap-south-1", "eu-west-1"}
    assert top["ratio"] == pytest.approx(98 / 70, rel=0.03)


def test_a_fitted_report_finds_a_young_installs_step_that_5_minute_windows_miss(
        client: httpx.Client, make_org: Callable, db: Any) -> None:  # noqa: F811
    from stormwatch.services import rollups

    org = make_org()
    a = enroll(client, org.enrollment_token, "young-a", provider="aws", region="us-east-1",
               zone="us-east-1a")
    b = enroll(client, org.enrollment_token, "young-b", provider="aws", region="eu-west-1",
               zone="eu-west-1a")
    rng = np.random.default_rng(9)
    now = datetime.now(UTC).replace(microsecond=0)
    start = now - timedelta(minutes=12)
    n = 12 * 60 * RATE_HZ
    level = np.full(n, 70_000.0)
    level[7 * 60 * RATE_HZ:] += 5_000.0  # the install's first step, 7 minutes in
    _post(client, a, _mesh(a, b.agent_id, start,
                           np.round(level + rng.exponential(300, n))))
    with db.begin() as conn:  # the worker has rolled the minutes up
        rollups.roll_up_minutes(conn, "mesh", start - timedelta(minutes=1),
                                rollups.floor_time(now, 60), uuid.UUID(org.org_id))
    day = {"start": (now - timedelta(hours=24)).isoformat(), "end": now.isoformat(),
           "group_by": "pair", "src": a.agent_id, "dst": b.agent_id}
    headers = {"Authorization": f"Bearer {org.api_key}"}

    r = client.get("/api/v1/analytics/mesh/level-shifts", headers=headers,
                   params={**day, "window_s": 300})
    assert r.status_code == 200, r.text
    assert [s for g in r.json()["groups"] for s in g["shifts"]] == []

    r = client.get("/api/v1/analytics/mesh/level-shifts", headers=headers,
                   params={**day, "fit_window": "true"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["window_s"] == 10
    assert datetime.fromisoformat(body["source"]["start"]) >= start - timedelta(minutes=1)
    (shift,) = [s for g in body["groups"] for s in g["shifts"]]
    assert abs(datetime.fromisoformat(shift["time"]) - (start + timedelta(minutes=7))) \
        <= timedelta(seconds=30)
    assert shift["step"] == pytest.approx(5_000, abs=600)
