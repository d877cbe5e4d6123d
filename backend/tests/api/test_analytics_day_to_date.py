"""Hourly answers over more than 4 h merge day-to-date sketches (the latest hour's of each
UTC day, minus the one before the range on its first day). Over a multi-day range with
partial first and last days, on heavy-tailed data, their tail percentiles must match numpy
on the posted samples within 1%: with every series complete, with a series missing the hour
before the range and the last hour of a day (the paths that look the latest sketch up per
series), and with one that has no samples in the range's first day."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import pytest
from sqlalchemy import Engine, text

from stormwatch.services import rollups
from tests.helpers import EnrolledAgent, enroll, heavy_tailed, post_batch

STEP_S = 4
QS = {"p50": 0.5, "p99": 0.99, "p99_9": 0.999, "p99_99": 0.9999}


class Days:
    def __init__(self, org: Any, agents: dict[str, EnrolledAgent], t: dict[str, np.ndarray],
                 v: dict[str, np.ndarray], start: datetime, end: datetime) -> None:
        self.org, self.agents, self.t, self.v = org, agents, t, v
        self.start, self.end = start, end

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.org.api_key}"}

    def in_range(self, dst: str) -> np.ndarray:
        lo, hi = self.start.timestamp(), self.end.timestamp()
        t = self.t[dst]
        return self.v[dst][(t >= lo) & (t < hi)]


@pytest.fixture(scope="module")
def days(client: httpx.Client, make_org: Callable, db: Engine) -> Days:  # noqa: F811
    org = make_org()
    agents = {n: enroll(client, org.enrollment_token, f"dtd-{n}", provider="aws", region=r,
                        zone=f"{r}a") for n, r in (("a", "us-east-1"), ("b", "us-east-1"),
                                                   ("c", "eu-west-1"), ("d", "eu-west-1"))}
    rng = np.random.default_rng(31)
    now = datetime.now(UTC)
    day0 = rollups.floor_time(now - timedelta(days=3), 86400)
    last = rollups.floor_time(now - timedelta(minutes=15), 60)
    # Partial first day (from 05:00), whole middle days, partial last day.
    start = day0 + timedelta(hours=5)
    end = rollups.floor_time(now, 3600) - timedelta(hours=1)
    ts, vs = {}, {}
    for dst, median in (("b", 900.0), ("c", 75_000.0), ("d", 80_000.0)):
        t = np.arange(day0.timestamp(), last.timestamp(), STEP_S) + rng.uniform(0, 1)
        if dst == "c":
            # a -> c misses the hour before the range and the last hour of the first day
            for hour in (4, 23):
                gap = day0.timestamp() + hour * 3600
                t = t[(t < gap) | (t >= gap + 3600)]
        if dst == "d":
            # a -> d has samples on the first day only before the range
            t = t[(t < start.timestamp()) | (t >= day0.timestamp() + 86400)]
        v = heavy_tailed(rng, t.size, median).astype(float)
        # Samples outside the queried range are 3x slower: any hour wrongly merged in (or
        # a day-to-date sketch not subtracted) moves every percentile.
        outside = (t < start.timestamp()) | (t >= end.timestamp())
        v[outside] = np.minimum(v[outside] * 3, 600_000_000)
        ts[dst], vs[dst] = t, v
        for chunk in np.array_split(np.arange(t.size), max(t.size // 20_000, 1)):
            batch = {"batch_id": str(uuid.uuid4()), "agent_id": agents["a"].agent_id, "mesh": {
                "peers": [agents[dst].agent_id],
                "time_us": (t[chunk] * 1_000_000).astype(np.int64).tolist(),
                "peer_idx": [0] * chunk.size, "round": chunk.tolist(),
                "payload_bytes": [1024] * chunk.size, "rtt_us": v[chunk].astype(int).tolist(),
                "status": [0] * chunk.size}}
            r = post_batch(client, agents["a"], batch)
            assert r.status_code == 202, r.text
    org_id = uuid.UUID(org.org_id)
    hours = [(org_id, day0 + timedelta(hours=h))
             for h in range(int((last - day0).total_seconds() // 3600) + 1)]
    with db.begin() as conn:
        rollups.roll_up_minutes(conn, "mesh", day0, last + timedelta(minutes=1), org_id)
        rollups.roll_up_coarse(conn, "mesh", 3600, hours)
    with db.connect() as conn:
        missing = conn.execute(text(
            "SELECT count(*) FROM mesh_rollups WHERE org_id = :o AND bucket_s = 3600 "
            "AND rtt_us_dtd_sketch IS NULL"), {"o": org_id}).scalar()
    assert missing == 0  # every hourly row carries its day-to-date sketch
    return Days(org, agents, ts, vs, start, end)


def _check(got: dict[str, Any], values: np.ndarray) -> None:
    for label, q in QS.items():
        want = float(np.quantile(values, q, method="lower"))
        assert abs(got[label] - want) / want <= 0.01, (label, got[label], want)


@pytest.mark.parametrize("pairs", ["complete series", "a series with a gap"])
def test_day_to_date_tails_match_numpy_over_several_days(client: httpx.Client,  # noqa: F811
                                                         days: Days, pairs: str) -> None:
    a = days.agents["a"].agent_id
    dsts = ["b"] if pairs == "complete series" else ["b", "c", "d"]
    assert days.end - days.start > timedelta(days=2)
    r = client.get("/api/v1/analytics/mesh/summary", headers=days.headers, params={
        "start": days.start.isoformat(), "end": days.end.isoformat(), "resolution": "1h",
        "src": a, "dst": [days.agents[d].agent_id for d in dsts], "group_by": "pair",
        "percentiles": ",".join(str(q * 100) for q in QS.values())})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["source"]["resolution"] == "1h"
    groups = {g["group"][1]: g for g in body["groups"]}
    for d in dsts:
        values = days.in_range(d)
        g = groups[days.agents[d].agent_id]
        assert g["count"] == values.size
        assert g["max"] == values.max()
        _check(g["percentiles"], values)
    if len(dsts) > 1:
        # Both pairs merged into one group: still one sketch per series per day.
        r = client.get("/api/v1/analytics/mesh/summary", headers=days.headers, params={
            "start": days.start.isoformat(), "end": days.end.isoformat(),
            "resolution": "1h", "src": a,
            "percentiles": ",".join(str(q * 100) for q in QS.values())})
        (g,) = r.json()["groups"]
        both = np.concatenate([days.in_range(d) for d in dsts])
        assert g["count"] == both.size
        _check(g["percentiles"], both)


@pytest.mark.parametrize("stat", ["p99", "p99.99"])
def test_the_dashboard_heatmap_s_hourly_tails_match_numpy(client: httpx.Client,  # noqa: F811
                                                          days: Days, stat: str) -> None:
    r = client.get("/api/v1/analytics/mesh/heatmap", headers=days.headers, params={
        "start": days.start.isoformat(), "end": days.end.isoformat(), "resolution": "1h",
        "level": "node", "stat": stat})
    assert r.status_code == 200, r.text
    cells = {(c["src"], c["dst"]): c for c in r.json()["cells"]}
    q = float(stat[1:]) / 100
    for d in ("b", "c", "d"):
        values = days.in_range(d)
        cell = cells[("dtd-a", f"dtd-{d}")]
        want = float(np.quantile(values, q, method="lower"))
        assert cell["count"] == values.size
        assert abs(cell["value"] - want) / want <= 0.01, (d, cell["value"], want)
    r = client.get("/api/v1/analytics/mesh/heatmap", headers=days.headers, params={
        "start": days.start.isoformat(), "end": days.end.isoformat(), "resolution": "1h",
        "level": "region", "stat": stat})
    region = {(c["src"], c["dst"]): c["value"] for c in r.json()["cells"]}
    want = float(np.quantile(days.in_range("b"), q, method="lower"))
    assert abs(region[("us-east-1", "us-east-1")] - want) / want <= 0.01
    eu = np.concatenate([days.in_range("c"), days.in_range("d")])
    want = float(np.quantile(eu, q, method="lower"))
    assert abs(region[("us-east-1", "eu-west-1")] - want) / want <= 0.01
