"""The analysis API over HTTP: samples go in through the ingest API, rollups run, and the
percentiles that come back match numpy on the posted samples (exact from raw, within 1%
from merged sketches) for single buckets, merged ranges and groups."""

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
from tests.helpers import EnrolledAgent, enroll, heavy_tailed, post_batch, roll_up_mesh

PCTS = ["p50", "p90", "p99", "p99_9", "p99_99"]
QS = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p99_9": 0.999, "p99_99": 0.9999}


def mesh_batch(src: EnrolledAgent, dst: str, t0_us: int, step_us: int, rtt: np.ndarray,
               lost: np.ndarray) -> dict[str, Any]:
    n = rtt.size
    return {"batch_id": str(uuid.uuid4()), "agent_id": src.agent_id, "mesh": {
        "peers": [dst], "time_us": (t0_us + np.arange(n) * step_us).tolist(),
        "peer_idx": [0] * n, "round": np.arange(n).tolist(), "payload_bytes": [1024] * n,
        "rtt_us": [None if lost[i] else int(rtt[i]) for i in range(n)],
        "status": [1 if x else 0 for x in lost]}}


class Fleet:
    def __init__(self, org: Any, a: EnrolledAgent, b: EnrolledAgent, c: EnrolledAgent,
                 start: datetime, ab: np.ndarray, ac: np.ndarray, lost_ab: int) -> None:
        self.org, self.a, self.b, self.c = org, a, b, c
        self.start, self.ab, self.ac, self.lost_ab = start, ab, ac, lost_ab

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.org.api_key}"}


STEP_S = 0.5
HOURS = 2


@pytest.fixture(scope="module")
def fleet(client: httpx.Client, make_org: Callable, db: Engine) -> Fleet:
    org = make_org()
    a = enroll(client, org.enrollment_token, "aws-use1-a", provider="aws", region="us-east-1",
               zone="us-east-1a", subnet="s1")
    b = enroll(client, org.enrollment_token, "aws-use1-b", provider="aws", region="us-east-1",
               zone="us-east-1b", subnet="s2")
    c = enroll(client, org.enrollment_token, "gcp-euw1-b", provider="gcp", region="europe-west1",
               zone="europe-west1-b", subnet="s3")
    rng = np.random.default_rng(42)
    start = rollups.floor_time(datetime.now(UTC) - timedelta(hours=HOURS + 1), 3600)
    n = int(HOURS * 3600 / STEP_S)
    ab = heavy_tailed(rng, n, 900.0)
    ac = heavy_tailed(rng, n, 80_000.0)
    lost = rng.random(n) < 0.002
    t0 = int(start.timestamp() * 1_000_000)
    step = int(STEP_S * 1_000_000)
    per = 7200
    for dst, values, loss in ((b.agent_id, ab, lost), (c.agent_id, ac, np.zeros(n, bool))):
        for i in range(0, n, per):
            r = post_batch(client, a, mesh_batch(a, dst, t0 + i * step, step, values[i:i + per],
                                                 loss[i:i + per]))
            assert r.status_code == 202, r.text
    roll_up_mesh(db, uuid.UUID(org.org_id), start, HOURS, levels=(300, 3600, 86400))
    return Fleet(org, a, b, c, start, ab[~lost], ac, int(lost.sum()))


def _get(client: httpx.Client, fleet: Fleet, path: str, **params: Any) -> dict[str, Any]:
    r = client.get(f"/api/v1/analytics/{path}", params=params, headers=fleet.headers)
    assert r.status_code == 200, r.text
    return r.json()


def _within(got: dict[str, Any], values: np.ndarray, rel: float, method: str) -> None:
    for label in PCTS:
        exact = float(np.quantile(values, QS[label], method=method))
        assert got[label] is not None
        assert abs(got[label] - exact) / exact <= rel, (label, got[label], exact)


def test_raw_percentiles_are_exact(client: httpx.Client, fleet: Fleet) -> None:
    end = fleet.start + timedelta(hours=HOURS)
    body = _get(client, fleet, "mesh/summary", start=fleet.start.isoformat(), end=end.isoformat(),
                src=fleet.a.agent_id, dst=fleet.b.agent_id, resolution="raw")
    assert body["source"]["resolution"] == "raw"
    (g,) = body["groups"]
    assert g["count"] == fleet.ab.size and g["failures"] == fleet.lost_ab
    assert g["loss_rate"] == pytest.approx(fleet.lost_ab / (fleet.ab.size + fleet.lost_ab))
    _within(g["percentiles"], fleet.ab, 1e-9, "lower")
    assert g["mean"] == pytest.approx(fleet.ab.mean())
    assert g["max_over_mean"] == pytest.approx(fleet.ab.max() / fleet.ab.mean())


def test_a_single_minute_bucket_is_within_one_percent(client: httpx.Client, fleet: Fleet) -> None:
    s = fleet.start + timedelta(minutes=17)
    body = _get(client, fleet, "mesh/summary", start=s.isoformat(),
                end=(s + timedelta(minutes=1)).isoformat(), src=fleet.a.agent_id,
                dst=fleet.c.agent_id, resolution="1m")
    per_min = int(60 / STEP_S)
    values = fleet.ac[17 * per_min : 18 * per_min]
    (g,) = body["groups"]
    assert g["count"] == values.size and not g["exact"]
    _within(g["percentiles"], values, 0.01, "lower")


@pytest.mark.parametrize("resolution", ["1m", "5m", "1h", "1d"])
def test_merged_ranges_are_within_one_percent(client: httpx.Client, fleet: Fleet,
                                              resolution: str) -> None:
    end = fleet.start + timedelta(hours=HOURS)
    body = _get(client, fleet, "mesh/summary", start=fleet.start.isoformat(),
                end=end.isoformat(), src=fleet.a.agent_id, dst=fleet.b.agent_id,
                resolution=resolution)
    (g,) = body["groups"]
    assert g["count"] == fleet.ab.size
    _within(g["percentiles"], fleet.ab, 0.01, "lower")


def test_groups_merge_sketches_across_pairs(client: httpx.Client, fleet: Fleet) -> None:
    end = fleet.start + timedelta(hours=HOURS)
    both = np.concatenate([fleet.ab, fleet.ac])
    body = _get(client, fleet, "mesh/summary", start=fleet.start.isoformat(),
                end=end.isoformat(), src=fleet.a.agent_id, resolution="1h")
    (g,) = body["groups"]
    _within(g["percentiles"], both, 0.01, "lower")
    by_class = _get(client, fleet, "mesh/summary", start=fleet.start.isoformat(),
                    end=end.isoformat(), src=fleet.a.agent_id, resolution="1h",
                    group_by="topology_class")
    groups = {x["group"]: x for x in by_class["groups"]}
    assert set(groups) == {"cross_az", "cross_provider"}
    _within(groups["cross_az"]["percentiles"], fleet.ab, 0.01, "lower")
    _within(groups["cross_provider"]["percentiles"], fleet.ac, 0.01, "lower")


def test_heatmap_and_series_match_the_samples(client: httpx.Client, fleet: Fleet) -> None:
    end = fleet.start + timedelta(hours=HOURS)
    hm = _get(client, fleet, "mesh/heatmap", start=fleet.start.isoformat(), end=end.isoformat(),
              level="node", stat="p99.9", resolution="1h")
    cells = {(c["src"], c["dst"]): c["value"] for c in hm["cells"]}
    exact = float(np.quantile(fleet.ab, 0.999, method="lower"))
    assert abs(cells[("aws-use1-a", "aws-use1-b")] - exact) / exact <= 0.01
    series = _get(client, fleet, "mesh/series", start=fleet.start.isoformat(),
                  end=end.isoformat(), src=fleet.a.agent_id, dst=fleet.c.agent_id,
                  window_s=3600, percentiles="50,99.99", resolution="1h")
    windows = series["groups"][0]["windows"]
    assert len(windows) == HOURS
    per_hour = int(3600 / STEP_S)
    for h, w in enumerate(windows):
        values = fleet.ac[h * per_hour : (h + 1) * per_hour]
        for label, q in (("p50", 0.5), ("p99_99", 0.9999)):
            want = float(np.quantile(values, q, method="lower"))
            assert abs(w[label] - want) / want <= 0.01
    csv = client.get("/api/v1/analytics/mesh/series.csv", headers=fleet.headers, params={
        "start": fleet.start.isoformat(), "end": end.isoformat(), "window_s": 3600,
        "resolution": "1h"})
    assert csv.status_code == 200 and csv.headers["content-type"].startswith("text/csv")
    assert csv.text.splitlines()[0].startswith("group,start,samples")
    assert len(csv.text.splitlines()) == 1 + HOURS


def test_box_plots_and_welch_by_topology_class(client: httpx.Client, fleet: Fleet) -> None:
    end = fleet.start + timedelta(hours=HOURS)
    box = _get(client, fleet, "mesh/boxplots", start=fleet.start.isoformat(),
               end=end.isoformat(), group_by="topology_class", resolution="1h")
    b = {x["group"]: x for x in box["boxes"]}["cross_az"]
    for label, q in (("p5", 0.05), ("p25", 0.25), ("p75", 0.75), ("p95", 0.95)):
        want = float(np.quantile(fleet.ab, q, method="lower"))
        assert abs(b[label] - want) / want <= 0.01
    assert b["mean"] == pytest.approx(fleet.ab.mean())
    w = _get(client, fleet, "mesh/welch", start=fleet.start.isoformat(), end=end.isoformat(),
             group_by="topology_class", a="cross_provider", b="cross_az", resolution="1h")
    assert w["t"] > 0 and w["p_value"] < 1e-6


def test_another_org_sees_nothing(client: httpx.Client, fleet: Fleet, make_org: Callable) -> None:
    other = make_org()
    end = fleet.start + timedelta(hours=HOURS)
    r = client.get("/api/v1/analytics/mesh/summary", headers={
        "Authorization": f"Bearer {other.api_key}"}, params={
        "start": fleet.start.isoformat(), "end": end.isoformat(), "resolution": "1h",
        "src": fleet.a.agent_id})
    assert r.status_code == 200
    assert r.json()["groups"] == []


def test_bad_parameters_get_a_422_naming_them(client: httpx.Client, fleet: Fleet) -> None:
    r = client.get("/api/v1/analytics/mesh/heatmap", headers=fleet.headers,
                   params={"stat": "median-ish"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "stat"]
    r = client.get("/api/v1/analytics/mesh/summary", headers=fleet.headers,
                   params={"src": "not-a-uuid"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "src"]
    r = client.get("/api/v1/analytics/mesh/summary")
    assert r.status_code == 401


def _ecdf(values: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Fraction of `values` at or below each point of `at`."""
    return np.searchsorted(np.sort(values), at, side="right") / values.size


def test_the_raw_distribution_is_numpy_s_histogram_cdf_and_tail(client: httpx.Client,
                                                                fleet: Fleet) -> None:
    end = fleet.start + timedelta(hours=HOURS)
    width = 1000.0
    body = _get(client, fleet, "mesh/distribution", start=fleet.start.isoformat(),
                end=end.isoformat(), src=fleet.a.agent_id, dst=fleet.b.agent_id,
                bucket_width=width, tail_fraction=0.05, resolution="raw")
    assert body["source"]["resolution"] == "raw" and body["count"] == fleet.ab.size
    # Histogram: the non-empty buckets of width 1000 us, counts as numpy bins them.
    idx = np.floor(fleet.ab / width).astype(int)
    want = {int(i) * width: int(c) for i, c in zip(*np.unique(idx, return_counts=True),
                                                   strict=True)}
    got = {b["lower"]: b["count"] for b in body["histogram"]}
    assert got == want
    assert all(b["upper"] - b["lower"] == width for b in body["histogram"])
    # CDF: every point is (value, fraction of samples <= value), ending at (max, 1).
    cdf = body["cdf"]
    assert 100 <= len(cdf) <= 2000
    xs = np.array([p["value"] for p in cdf])
    fs = np.array([p["fraction"] for p in cdf])
    assert np.all(np.diff(xs) > 0) and np.all(np.diff(fs) > 0)
    np.testing.assert_allclose(fs, _ecdf(fleet.ab, xs), rtol=1e-12)
    assert (xs[-1], fs[-1]) == (fleet.ab.max(), 1.0)
    # Tail slice: every distinct value in the top 5%, plus the point just below it.
    tail = body["tail_cdf"]
    uniq = np.unique(fleet.ab)
    frac = _ecdf(fleet.ab, uniq)
    first = int(np.argmax(frac >= 0.95)) - 1
    assert [p["value"] for p in tail] == uniq[first:].tolist()
    np.testing.assert_allclose([p["fraction"] for p in tail], frac[first:], rtol=1e-12)
    assert tail[0]["fraction"] < 0.95 <= tail[1]["fraction"]
    top1 = _get(client, fleet, "mesh/distribution", start=fleet.start.isoformat(),
                end=end.isoformat(), src=fleet.a.agent_id, dst=fleet.b.agent_id,
                bucket_width=width, tail_fraction=0.01, resolution="raw")["tail_cdf"]
    assert top1[0]["fraction"] < 0.99 <= top1[1]["fraction"]
    assert len(top1) < len(tail)


@pytest.mark.parametrize("resolution", ["1m", "5m", "1h"])
def test_a_sketched_distribution_stays_within_one_percent(client: httpx.Client, fleet: Fleet,
                                                          resolution: str) -> None:
    end = fleet.start + timedelta(hours=HOURS)
    body = _get(client, fleet, "mesh/distribution", start=fleet.start.isoformat(),
                end=end.isoformat(), src=fleet.a.agent_id, dst=fleet.b.agent_id,
                bucket_width=5000, tail_fraction=0.001, resolution=resolution)
    assert body["source"]["resolution"] == resolution and body["count"] == fleet.ab.size
    assert sum(b["count"] for b in body["histogram"]) == fleet.ab.size
    # A sketch bin's value is within 1% of every sample in it: each CDF point's fraction
    # lies between the exact CDF 2% below and 2% above its value (a bin spans 2%).
    for points in (body["cdf"], body["tail_cdf"]):
        xs = np.array([p["value"] for p in points])
        fs = np.array([p["fraction"] for p in points])
        assert np.all(_ecdf(fleet.ab, xs / 1.0203) <= fs + 1e-12)
        assert np.all(fs <= _ecdf(fleet.ab, xs * 1.0203) + 1e-12)
    assert body["tail_cdf"][-1]["fraction"] == pytest.approx(1.0)
    top = body["tail_cdf"][-1]["value"]
    assert abs(top - fleet.ab.max()) / fleet.ab.max() <= 0.01
    # Histogram: the samples below each bucket edge, counted from the sketch, lie between
    # the exact counts 2% either side of the edge.
    uppers = np.array([b["upper"] for b in body["histogram"]])
    below = np.cumsum([b["count"] for b in body["histogram"]])
    srt = np.sort(fleet.ab)
    assert np.all(np.searchsorted(srt, uppers / 1.0203) <= below)
    assert np.all(below <= np.searchsorted(srt, uppers * 1.0203))


def test_a_bucket_width_giving_too_many_buckets_is_a_422(client: httpx.Client,
                                                        fleet: Fleet) -> None:
    end = fleet.start + timedelta(hours=HOURS)
    r = client.get("/api/v1/analytics/mesh/distribution", headers=fleet.headers, params={
        "start": fleet.start.isoformat(), "end": end.isoformat(), "src": fleet.a.agent_id,
        "dst": fleet.b.agent_id, "bucket_width": 0.5, "resolution": "raw"})
    # Only non-empty buckets count: integer RTTs in half-microsecond buckets are allowed
    # unless they have more than 10 000 distinct values.
    distinct = np.unique(fleet.ab).size
    if distinct > 10_000:
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == [
            "query", "bucket_width"]
    else:
        assert r.status_code == 200 and len(r.json()["histogram"]) == distinct
    for bad in ("0", "-5"):
        r = client.get("/api/v1/analytics/mesh/distribution", headers=fleet.headers,
                       params={"bucket_width": bad})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "bucket_width"]
