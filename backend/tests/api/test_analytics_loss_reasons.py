"""Why a pair's rounds were lost, as its agent recorded it: counts by status over raw samples,
limited to the pair asked for and to the part of the range raw samples hold."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from tests.helpers import enroll, post_batch

# status -> rounds: ok, timeout, refused, error, corrupt, wrong_peer
TO_B = {0: 50, 1: 7, 2: 3, 3: 2, 4: 1, 5: 4}
TO_C = {0: 40, 1: 5}


def _batch(src: Any, dst: Any, counts: dict[int, int], now: datetime) -> dict[str, Any]:
    statuses = [s for s, n in counts.items() for _ in range(n)]
    n = len(statuses)
    t0 = int((now - timedelta(minutes=5)).timestamp() * 1e6)
    return {"batch_id": str(uuid.uuid4()), "agent_id": src.agent_id, "mesh": {
        "peers": [dst.agent_id], "time_us": [t0 + i * 1_000_000 for i in range(n)],
        "peer_idx": [0] * n, "round": list(range(n)), "payload_bytes": [1024] * n,
        "rtt_us": [900 if s == 0 else None for s in statuses], "status": statuses}}


def test_loss_reasons_count_each_status_of_the_pair_asked_for_and_no_other(
        client: httpx.Client, make_org: Callable) -> None:  # noqa: F811
    org = make_org()
    a, b, c = (enroll(client, org.enrollment_token, f"lr-{n}") for n in "abc")
    now = datetime.now(UTC)
    for dst, counts in ((b, TO_B), (c, TO_C)):
        r = post_batch(client, a, _batch(a, dst, counts, now))
        assert r.status_code == 202, r.text
    headers = {"Authorization": f"Bearer {org.api_key}"}
    start, end = (now - timedelta(hours=1)).isoformat(), now.isoformat()

    r = client.get("/api/v1/analytics/mesh/loss-reasons", headers=headers, params={
        "src": a.agent_id, "dst": b.agent_id, "start": start, "end": end})
    assert r.status_code == 200, r.text
    body = r.json()
    assert {x["reason"]: x["count"] for x in body["reasons"]} == {
        "timeout": 7, "refused": 3, "error": 2, "corrupt": 1, "wrong_peer": 4}
    assert [x["status"] for x in body["reasons"]] == [1, 2, 3, 4, 5]
    assert body["lost"] == 17
    assert body["complete"] is True

    # Both destinations: the sums; another org's key sees nothing of these agents.
    r = client.get("/api/v1/analytics/mesh/loss-reasons", headers=headers, params={
        "src": a.agent_id, "start": start, "end": end})
    assert {x["reason"]: x["count"] for x in r.json()["reasons"]}["timeout"] == 12
    other = make_org()
    r = client.get("/api/v1/analytics/mesh/loss-reasons", params={
        "src": a.agent_id, "start": start, "end": end},
        headers={"Authorization": f"Bearer {other.api_key}"})
    assert r.status_code == 200, r.text
    assert r.json()["lost"] == 0


def test_a_range_longer_than_raw_samples_hold_says_where_its_counts_begin(
        client: httpx.Client, make_org: Callable) -> None:  # noqa: F811
    org = make_org()
    a, b = (enroll(client, org.enrollment_token, f"lr2-{n}") for n in "ab")
    now = datetime.now(UTC)
    assert post_batch(client, a, _batch(a, b, {0: 5, 1: 2}, now)).status_code == 202
    r = client.get("/api/v1/analytics/mesh/loss-reasons",
                   headers={"Authorization": f"Bearer {org.api_key}"},
                   params={"src": a.agent_id, "dst": b.agent_id,
                           "start": (now - timedelta(days=30)).isoformat(),
                           "end": now.isoformat()})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["complete"] is False
    began = datetime.fromisoformat(body["start"])
    assert now - began <= timedelta(days=7, seconds=5)
    assert body["lost"] == 2
