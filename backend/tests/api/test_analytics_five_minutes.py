"""A pair's week over HTTP from 5-minute rollups: the Pair page's 15-minute windows over 7
days answer from the 5-minute level, and every window's percentiles (and the whole week's,
merged from 2016 sketches) match numpy on the posted heavy-tailed samples within 1%. While
the level is still filling its history (after migration 0006 on a database with data),
the same request reads minutes and gets the same windows."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import pytest
from sqlalchemy import Engine, text

from stormwatch.services import rollups
from tests.helpers import EnrolledAgent, enroll, heavy_tailed, post_batch

STEP_S = 4
DAYS = 7
WINDOW_S = 900  # frontend/src/lib/timeRange.ts windowSecondsFor(7 days)
QS = {"p50": 0.5, "p99": 0.99, "p99_99": 0.9999}


class Week:
    def __init__(self, org: Any, a: EnrolledAgent, b: EnrolledAgent, start: datetime,
                 t: np.ndarray, v: np.ndarray, lost: np.ndarray) -> None:
        self.org, self.a, self.b = org, a, b
        self.start, self.end = start, start + timedelta(days=DAYS)
        self.t, self.v, self.lost = t, v, lost

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.org.api_key}"}

    def params(self, **extra: Any) -> dict[str, Any]:
        return {"start": self.start.isoformat(), "end": self.end.isoformat(),
                "src": self.a.agent_id, "dst": self.b.agent_id, **extra}


@pytest.fixture(scope="module")
def week(client: httpx.Client, make_org: Callable, db: Engine) -> Week:  # noqa: F811
    org = make_org()
    a = enroll(client, org.enrollment_token, "wk-a", provider="aws", region="us-east-1",
               zone="us-east-1a")
    b = enroll(client, org.enrollment_token, "wk-b", provider="gcp", region="europe-west1",
               zone="europe-west1-b")
    rng = np.random.default_rng(55)
    start = rollups.floor_time(datetime.now(UTC) - timedelta(days=DAYS, hours=1), 3600)
    t = start.timestamp() + np.arange(0, DAYS * 86400, STEP_S) + rng.uniform(0, 1)
    v = heavy_tailed(rng, t.size, 80_000.0)
    lost = rng.random(t.size) < 0.001
    for chunk in np.array_split(np.arange(t.size), t.size // 20_000 + 1):
        batch = {"batch_id": str(uuid.uuid4()), "agent_id": a.agent_id, "mesh": {
            "peers": [b.agent_id], "time_us": (t[chunk] * 1_000_000).astype(np.int64).tolist(),
            "peer_idx": [0] * chunk.size, "round": chunk.tolist(),
            "payload_bytes": [1024] * chunk.size,
            "rtt_us": [None if lost[i] else int(v[i]) for i in chunk],
            "status": [1 if lost[i] else 0 for i in chunk]}}
        r = post_batch(client, a, batch)
        assert r.status_code == 202, r.text
    org_id = uuid.UUID(org.org_id)
    with db.connect() as conn:
        since = conn.execute(text("SELECT clock_timestamp()")).scalar_one()
    with db.begin() as conn:
        rollups.roll_up_minutes(conn, "mesh", start, start + timedelta(days=DAYS), org_id)
    with db.begin() as conn:
        # The 5-minute buckets to roll are found as the worker finds them.
        stale, _ = rollups.stale_coarse_buckets(conn, "mesh", 300, since)
        stale = [s for s in stale if s[0] == org_id]
        assert len(stale) == DAYS * 288
        rollups.roll_up_coarse(conn, "mesh", 300, stale)
    return Week(org, a, b, start, t, v, lost)


def _series(client: httpx.Client, week: Week, **params: Any) -> dict[str, Any]:  # noqa: F811
    r = client.get("/api/v1/analytics/mesh/series", headers=week.headers,
                   params=week.params(window_s=WINDOW_S, percentiles="50,99,99.99", **params))
    assert r.status_code == 200, r.text
    return r.json()


def _check_windows(body: dict[str, Any], week: Week) -> None:
    (group,) = body["groups"]
    windows = group["windows"]
    assert len(windows) == DAYS * 86400 // WINDOW_S == 672
    w_of = ((week.t - week.start.timestamp()) // WINDOW_S).astype(int)
    for i, w in enumerate(windows):
        assert datetime.fromisoformat(w["start"]) == week.start + timedelta(seconds=i * WINDOW_S)
        in_w = w_of == i
        values = week.v[in_w & ~week.lost].astype(float)
        assert w["samples"] == int(in_w.sum()) and w["count"] == values.size
        assert w["loss_rate"] == pytest.approx(float(week.lost[in_w].mean()), abs=1e-12)
        assert w["mean"] == pytest.approx(float(values.mean()), rel=1e-9)
        for label, q in QS.items():
            exact = float(np.quantile(values, q, method="lower"))
            assert abs(w[label] - exact) / exact <= 0.01, (i, label, w[label], exact)


def test_a_week_in_fifteen_minute_windows_answers_from_five_minute_rollups(
        client: httpx.Client, week: Week) -> None:  # noqa: F811
    body = _series(client, week)
    assert body["source"]["resolution"] == "5m" and body["source"]["exact"] is False
    assert body["source"]["start"].startswith(week.start.strftime("%Y-%m-%dT%H:%M"))
    _check_windows(body, week)


def test_the_week_s_merged_five_minute_sketches_match_numpy_to_p99_99(
        client: httpx.Client, week: Week) -> None:  # noqa: F811
    r = client.get("/api/v1/analytics/mesh/summary", headers=week.headers,
                   params=week.params(resolution="5m", percentiles="50,90,99,99.9,99.99"))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["source"]["resolution"] == "5m"
    (group,) = body["groups"]
    values = week.v[~week.lost].astype(float)
    assert group["count"] == values.size and group["samples"] == week.t.size
    for label, q in {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p99_9": 0.999,
                     "p99_99": 0.9999}.items():
        exact = float(np.quantile(values, q, method="lower"))
        got = group["percentiles"][label]
        assert abs(got - exact) / exact <= 0.01, (label, got, exact)


@pytest.fixture
def filling(db: Engine, week: Week) -> Iterator[None]:
    """The 5-minute level as migration 0006 leaves it on a database with minute rows: its
    history before the mark is not rolled yet."""
    key = rollups.fill_key("mesh", 300)
    with db.begin() as conn:
        conn.execute(text("INSERT INTO rollup_watermarks (kind, rolled_until) VALUES (:k, :t) "
                          "ON CONFLICT (kind) DO UPDATE SET rolled_until = :t"),
                     {"k": key, "t": week.end - timedelta(days=1)})
    try:
        yield
    finally:
        with db.begin() as conn:
            conn.execute(text("DELETE FROM rollup_watermarks WHERE kind = :k"), {"k": key})


def test_while_the_level_fills_its_history_the_week_reads_minutes(
        client: httpx.Client, week: Week, filling: None) -> None:  # noqa: F811
    body = _series(client, week)
    assert body["source"]["resolution"] == "1m"
    _check_windows(body, week)
    # The last day is complete at 5 minutes already.
    last_day = _series(client, week, start=(week.end - timedelta(days=1)).isoformat())
    assert last_day["source"]["resolution"] == "5m"
