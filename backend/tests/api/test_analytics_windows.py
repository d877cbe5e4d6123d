"""Analyses of windowed series over HTTP: cyclical patterns (seed 003 Lesson 4) and CV_RMSE
between two pairs (seed 004 §IV-C), checked against a direct computation on the posted
samples, from raw samples and from minute and 5-minute rollups."""

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
from tests.helpers import EnrolledAgent, enroll, post_batch, roll_up_mesh

RATE_HZ = 5
HOURS = 2
PERIOD_S = 1200
AMPLITUDE_US = 3000.0


class Pairs:
    def __init__(self, org: Any, a: EnrolledAgent, b: EnrolledAgent, c: EnrolledAgent,
                 start: datetime, t: np.ndarray, ab: np.ndarray, ac: np.ndarray) -> None:
        self.org, self.a, self.b, self.c = org, a, b, c
        self.start, self.t, self.ab, self.ac = start, t, ab, ac
        self.end = start + timedelta(hours=HOURS)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.org.api_key}"}

    def params(self, **extra: Any) -> dict[str, Any]:
        return {"start": self.start.isoformat(), "end": self.end.isoformat(), **extra}


@pytest.fixture(scope="module")
def pairs(client: httpx.Client, make_org: Callable, db: Engine) -> Pairs:  # noqa: F811
    org = make_org()
    a = enroll(client, org.enrollment_token, "cyc-a", provider="aws", region="us-east-1",
               zone="us-east-1a")
    b = enroll(client, org.enrollment_token, "cyc-b", provider="aws", region="us-east-1",
               zone="us-east-1b")
    c = enroll(client, org.enrollment_token, "cyc-c", provider="aws", region="us-east-1",
               zone="us-east-1c")
    rng = np.random.default_rng(21)
    start = rollups.floor_time(datetime.now(UTC) - timedelta(hours=HOURS, minutes=10), 3600)
    n = HOURS * 3600 * RATE_HZ
    t = np.arange(n) / RATE_HZ
    wave = np.sin(2 * np.pi * t / PERIOD_S)
    ab = 20_000 + AMPLITUDE_US * wave + rng.normal(0, 300, n)
    ac = 21_000 + 0.8 * AMPLITUDE_US * np.sin(2 * np.pi * t / PERIOD_S + 0.4) + rng.normal(
        0, 600, n)
    ab, ac = np.round(ab), np.round(ac)
    ab[rng.random(n) < 0.005] = np.nan  # losses
    t0 = int(start.timestamp() * 1_000_000)
    times = (t0 + t * 1_000_000).astype(np.int64)
    for dst, values in ((b.agent_id, ab), (c.agent_id, ac)):
        for chunk in np.array_split(np.arange(n), 4):
            v = values[chunk]
            batch = {"batch_id": str(uuid.uuid4()), "agent_id": a.agent_id, "mesh": {
                "peers": [dst], "time_us": times[chunk].tolist(), "peer_idx": [0] * v.size,
                "round": chunk.tolist(), "payload_bytes": [1024] * v.size,
                "rtt_us": [None if np.isnan(x) else int(x) for x in v],
                "status": [1 if np.isnan(x) else 0 for x in v]}}
            r = post_batch(client, a, batch)
            assert r.status_code == 202, r.text
    roll_up_mesh(db, uuid.UUID(org.org_id), start, HOURS)
    return Pairs(org, a, b, c, start, t, ab, ac)


def _get(client: httpx.Client, pairs: Pairs, path: str, **params: Any) -> dict[str, Any]:  # noqa: F811
    r = client.get(f"/api/v1/analytics/{path}", headers=pairs.headers,
                   params=pairs.params(**params))
    assert r.status_code == 200, r.text
    return r.json()


def _window_means(t: np.ndarray, v: np.ndarray, window_s: int) -> dict[int, float]:
    ok = np.isfinite(v)
    w = (t[ok] // window_s).astype(int)
    sums = np.bincount(w, weights=v[ok])
    counts = np.bincount(w)
    return {int(i): float(sums[i] / counts[i]) for i in np.flatnonzero(counts)}


@pytest.mark.parametrize("resolution", ["raw", "1m", "5m"])
def test_cv_rmse_between_two_pairs_is_the_direct_computation(client: httpx.Client,  # noqa: F811
                                                             pairs: Pairs,
                                                             resolution: str) -> None:
    window_s = 300
    body = _get(client, pairs, "mesh/cv-rmse", a=f"{pairs.a.agent_id}:{pairs.b.agent_id}",
                b=f"{pairs.a.agent_id}:{pairs.c.agent_id}", window_s=window_s,
                resolution=resolution)
    assert body["source"]["resolution"] == resolution
    x_by_w = _window_means(pairs.t, pairs.ab, window_s)
    y_by_w = _window_means(pairs.t, pairs.ac, window_s)
    common = sorted(set(x_by_w) & set(y_by_w))
    assert body["windows"] == len(common) == HOURS * 3600 // window_s
    x = np.array([x_by_w[w] for w in common])
    y = np.array([y_by_w[w] for w in common])
    # Seed 004 §IV-C: sqrt(E[(X - Y)^2]) / mean(E[X], E[Y])
    want = np.sqrt(np.mean((x - y) ** 2)) / ((x.mean() + y.mean()) / 2)
    assert body["cv_rmse"] == pytest.approx(want, rel=1e-9)
    same = _get(client, pairs, "mesh/cv-rmse", a=f"{pairs.a.agent_id}:{pairs.b.agent_id}",
                b=f"{pairs.a.agent_id}:{pairs.b.agent_id}", window_s=window_s,
                resolution=resolution)
    assert same["cv_rmse"] == 0.0


def test_cv_rmse_names_a_malformed_pair(client: httpx.Client, pairs: Pairs) -> None:  # noqa: F811
    r = client.get("/api/v1/analytics/mesh/cv-rmse", headers=pairs.headers,
                   params=pairs.params(a="not-a-pair", b=f"{pairs.a.agent_id}:{pairs.b.agent_id}"))
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "a"]


@pytest.mark.parametrize("resolution", ["raw", "1m"])
def test_a_periodic_pair_shows_its_period_and_amplitude(client: httpx.Client,  # noqa: F811
                                                        pairs: Pairs, resolution: str) -> None:
    window_s = 60
    body = _get(client, pairs, "mesh/cycles", src=pairs.a.agent_id, dst=pairs.b.agent_id,
                window_s=window_s, min_period_s=300, resolution=resolution)
    assert body["source"]["resolution"] == resolution
    strongest = body["periods"][0]
    assert strongest["period_s"] == PERIOD_S
    assert strongest["variance_share"] > 0.9
    assert strongest["amplitude"] == pytest.approx(AMPLITUDE_US, rel=0.05)
    # The mean profile over one period follows the wave sampled at each window's middle.
    profile = body["profile"]
    assert [p["offset_s"] for p in profile] == [i * window_s for i in range(PERIOD_S // window_s)]
    mid = (np.arange(PERIOD_S // window_s) * window_s + window_s / 2) / PERIOD_S
    want = 20_000 + AMPLITUDE_US * np.sin(2 * np.pi * mid)
    # Noise of 300 us over 5 windows per offset, plus the sketch's 1% for rollup medians.
    tol = 150 + (0.01 * want if resolution != "raw" else 0)
    assert np.all(np.abs(np.array([p["mean"] for p in profile]) - want) <= tol)

