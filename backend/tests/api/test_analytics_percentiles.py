"""One percentile rule everywhere: the sample of rank floor(p/100 (n - 1)). A day of one pair
with a sparse tail (100 000 samples, a few hundred 30-1000x spikes, so neighbouring order
statistics in the tail lie far apart) gives the same p50 ... p99.999 from raw samples and
from every rollup level (within the sketches' 1%), the day's median over its even count
included, and every percentile says how many samples lie beyond it."""

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
from tests.helpers import enroll, post_batch, roll_up_mesh

N = 100_000  # even: the median is the lower of the two middle samples
PCTS = (50.0, 90.0, 99.0, 99.9, 99.99, 99.999)


def _label(p: float) -> str:
    return "p" + f"{p:g}".replace(".", "_")


class Day:
    def __init__(self, org: Any, src: str, dst: str, start: datetime, values: np.ndarray):
        self.org, self.src, self.dst, self.start, self.values = org, src, dst, start, values

    def summary(self, client: httpx.Client, resolution: str) -> dict[str, Any]:  # noqa: F811
        r = client.get("/api/v1/analytics/mesh/summary", headers={
            "Authorization": f"Bearer {self.org.api_key}"}, params={
            "start": self.start.isoformat(), "end": (self.start + timedelta(days=1)).isoformat(),
            "src": self.src, "dst": self.dst, "resolution": resolution,
            "percentiles": ",".join(f"{p:g}" for p in PCTS)})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["source"]["resolution"] == resolution
        return body["groups"][0]


@pytest.fixture(scope="module")
def day(client: httpx.Client, make_org: Callable, db: Engine) -> Day:  # noqa: F811
    org = make_org()
    a = enroll(client, org.enrollment_token, "pct-a", provider="azure", region="eastus",
               zone="eastus-1")
    b = enroll(client, org.enrollment_token, "pct-b", provider="azure", region="eastus",
               zone="eastus-2")
    rng = np.random.default_rng(99)
    start = rollups.floor_time(datetime.now(UTC), 86400) - timedelta(days=1)
    t = start.timestamp() + np.sort(rng.uniform(0, 86400, N))
    v = np.round(rng.lognormal(np.log(900.0), 0.3, N))
    spikes = rng.choice(N, size=300, replace=False)
    v[spikes] = np.round(v[spikes] * rng.uniform(30, 1000, spikes.size))
    for chunk in np.array_split(np.arange(N), 5):
        batch = {"batch_id": str(uuid.uuid4()), "agent_id": a.agent_id, "mesh": {
            "peers": [b.agent_id], "time_us": (t[chunk] * 1_000_000).astype(np.int64).tolist(),
            "peer_idx": [0] * chunk.size, "round": chunk.tolist(),
            "payload_bytes": [1024] * chunk.size, "rtt_us": v[chunk].astype(int).tolist(),
            "status": [0] * chunk.size}}
        r = post_batch(client, a, batch)
        assert r.status_code == 202, r.text
    roll_up_mesh(db, uuid.UUID(org.org_id), start, 24, levels=(300, 3600, 86400))
    return Day(org, a.agent_id, b.agent_id, start, v)


def test_raw_percentiles_are_the_lower_rank_samples_with_their_support(
        client: httpx.Client, day: Day) -> None:  # noqa: F811
    g = day.summary(client, "raw")
    assert g["count"] == N
    for p in PCTS:
        rank = int(np.floor(p / 100 * (N - 1)))
        assert g["percentiles"][_label(p)] == float(np.sort(day.values)[rank])
        assert g["beyond"][_label(p)] == N - 1 - rank
    # The median of an even count is the lower middle sample, not a mean of two.
    assert g["percentiles"]["p50"] == float(np.quantile(day.values, 0.5, method="lower"))
    assert g["beyond"]["p99_999"] == 1 and g["beyond"]["p99_99"] == 10


@pytest.mark.parametrize("resolution", ["1m", "5m", "1h", "1d"])
def test_every_rollup_level_agrees_with_raw_within_one_percent_to_p99_999(
        client: httpx.Client, day: Day, resolution: str) -> None:  # noqa: F811
    raw = day.summary(client, "raw")
    got = day.summary(client, resolution)
    assert got["count"] == N
    for p in PCTS:
        want = raw["percentiles"][_label(p)]
        assert abs(got["percentiles"][_label(p)] - want) / want <= 0.01, (p, got, want)
        assert got["beyond"][_label(p)] == raw["beyond"][_label(p)]
