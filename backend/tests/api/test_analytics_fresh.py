"""The newest minutes of a range answered from rollups come from raw samples until the
minute rollups cover them (a fresh fleet shows at once), and a windowed series can return
only the most telling groups of a class, ranked over the range, in one request."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import pytest
from sqlalchemy import Engine

from stormwatch.services import rollups
from tests.helpers import EnrolledAgent, enroll, post_batch

MINUTES = 40
ROLLED_UNTIL_AGO = timedelta(minutes=10)
# Median RTT of each destination: the ranking has to find the highest and the lowest.
MEDIANS_US = {"fresh-b": 10_000, "fresh-c": 20_000, "fresh-d": 30_000, "fresh-e": 40_000}


class Fleet:
    def __init__(self, org: Any, src: EnrolledAgent, dsts: dict[str, EnrolledAgent],
                 silent: EnrolledAgent, values: dict[str, np.ndarray], now: datetime,
                 times_s: np.ndarray) -> None:
        self.org, self.src, self.dsts, self.silent = org, src, dsts, silent
        self.values, self.now, self.times_s = values, now, times_s

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.org.api_key}"}


@pytest.fixture(scope="module")
def fleet(client: httpx.Client, make_org: Callable, db: Engine) -> Fleet:  # noqa: F811
    org = make_org()
    src = enroll(client, org.enrollment_token, "fresh-a", provider="aws", region="us-east-1",
                 zone="us-east-1a")
    regions = ["eu-west-1", "ap-south-1", "sa-east-1", "ap-northeast-2"]
    dsts = {name: enroll(client, org.enrollment_token, name, provider="aws", region=r,
                         zone=f"{r}a") for name, r in zip(MEDIANS_US, regions, strict=True)}
    # An agent of the class that never reported: it must not take a place in the ranking.
    silent = enroll(client, org.enrollment_token, "fresh-silent", provider="aws",
                    region="eu-central-1", zone="eu-central-1a")
    rng = np.random.default_rng(14)
    now = datetime.now(UTC)
    n = MINUTES * 60  # one round a second, ending a second ago
    times_s = now.timestamp() - 1 - np.arange(n)[::-1]
    values = {}
    for name, agent in dsts.items():
        v = np.round(rng.lognormal(np.log(MEDIANS_US[name]), 0.1, n))
        values[name] = v
        batch = {"batch_id": str(uuid.uuid4()), "agent_id": src.agent_id, "mesh": {
            "peers": [agent.agent_id], "time_us": (times_s * 1e6).astype(np.int64).tolist(),
            "peer_idx": [0] * n, "round": list(range(n)), "payload_bytes": [1024] * n,
            "rtt_us": v.astype(np.int64).tolist(), "status": [0] * n}}
        r = post_batch(client, src, batch)
        assert r.status_code == 202, r.text
    # The worker has rolled minutes up to 10 minutes ago; the samples since are raw only.
    with db.begin() as conn:
        rollups.roll_up_minutes(conn, "mesh", rollups.floor_time(now, 60) - timedelta(hours=1),
                                rollups.floor_time(now - ROLLED_UNTIL_AGO, 60),
                                uuid.UUID(org.org_id))
    return Fleet(org, src, dsts, silent, values, now, times_s)


def _get(client: httpx.Client, fleet: Fleet, path: str, **params: Any) -> httpx.Response:  # noqa: F811
    return client.get(f"/api/v1/analytics/{path}", headers=fleet.headers, params={
        "start": (fleet.now - timedelta(hours=1)).isoformat(),
        "end": (fleet.now + timedelta(seconds=1)).isoformat(), **params})


def test_an_hour_answered_from_minute_rollups_includes_the_samples_not_yet_rolled(
        client: httpx.Client, fleet: Fleet) -> None:  # noqa: F811
    r = _get(client, fleet, "mesh/heatmap", level="node", stat="p50")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["source"]["resolution"] == "1m"
    cells = {c["dst"]: c for c in body["cells"]}
    assert set(cells) == set(MEDIANS_US)
    for name, v in fleet.values.items():
        # Every sample once: the rolled ones from rollups, the last ten minutes raw.
        assert cells[name]["count"] == v.size
        exact = float(np.quantile(v, 0.5))
        assert abs(cells[name]["value"] - exact) <= 0.01 * exact, (name, cells[name], exact)


def test_the_newest_windows_of_a_rollup_timeline_are_not_empty(
        client: httpx.Client, fleet: Fleet) -> None:  # noqa: F811
    r = _get(client, fleet, "mesh/series", window_s=60, percentiles="50",
             dst=fleet.dsts["fresh-b"].agent_id, resolution="1m")
    assert r.status_code == 200, r.text
    windows = r.json()["groups"][0]["windows"]
    newest = max(datetime.fromisoformat(w["start"]) for w in windows)
    assert newest >= rollups.floor_time(fleet.now, 60) - timedelta(minutes=1)
    assert sum(w["count"] for w in windows) == fleet.values["fresh-b"].size


def _pairs(client: httpx.Client, fleet: Fleet, **params: Any) -> list[str]:  # noqa: F811
    r = _get(client, fleet, "mesh/series", window_s=60, percentiles="50", group_by="pair",
             topology_class="cross_region", **params)
    assert r.status_code == 200, r.text
    names = {a.agent_id: n for n, a in fleet.dsts.items()}
    out = []
    for g in r.json()["groups"]:
        assert g["group"][0] == fleet.src.agent_id
        assert g["windows"], "a ranked pair without windows"
        out.append(names[g["group"][1]])
    return out


def test_ranked_pairs_are_the_highest_and_lowest_p50_of_the_class_in_one_request(
        client: httpx.Client, fleet: Fleet) -> None:  # noqa: F811
    assert _pairs(client, fleet, limit=2, rank_by="p50") == ["fresh-e", "fresh-b"]
    assert _pairs(client, fleet, limit=3) == ["fresh-e", "fresh-d", "fresh-b"]
    # More places than pairs with data: every pair with data, highest first; the silent
    # agent's pair, in the class but without samples, is not among them.
    assert _pairs(client, fleet, limit=8) == ["fresh-e", "fresh-d", "fresh-c", "fresh-b"]


def test_a_ranking_statistic_that_is_not_one_gets_a_422_naming_rank_by(
        client: httpx.Client, fleet: Fleet) -> None:  # noqa: F811
    r = _get(client, fleet, "mesh/series", window_s=60, group_by="pair", limit=2,
             rank_by="median-ish")
    assert r.status_code == 422
    assert "rank_by" in str(r.json()["detail"])
    r = _get(client, fleet, "mesh/series", window_s=60, group_by="pair", limit=0)
    assert r.status_code == 422
    assert "limit" in str(r.json()["detail"])
