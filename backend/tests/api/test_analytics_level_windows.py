"""Level shifts from every resolution: 1% and 5% steps on a 75 ms path (seed 003 §4.4) with
a queueing tail and rare 30x spikes, posted through the ingest API and rolled up as the
worker does, are found within two windows, with their sign and a size within 10%, from raw
30 s windows, from the minute rows' half-minute medians, from minute medians and from
5-minute rows. A week of 30 s windows is answered from minute rows."""

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

BASE_US = 75_000.0
RATE_HZ = 5
HOURS = 6
# (hour, fraction of the base): up 1% at 2 h, down 5% at 4 h.
STEPS = ((2, 0.01), (4, -0.05))


def _post_mesh(client: httpx.Client, src: EnrolledAgent, dst: str,  # noqa: F811
               t: np.ndarray, rtt: np.ndarray) -> None:
    for chunk in np.array_split(np.arange(t.size), max(t.size // 20_000, 1)):
        batch = {"batch_id": str(uuid.uuid4()), "agent_id": src.agent_id, "mesh": {
            "peers": [dst], "time_us": (t[chunk] * 1_000_000).astype(np.int64).tolist(),
            "peer_idx": [0] * chunk.size, "round": chunk.tolist(),
            "payload_bytes": [1024] * chunk.size, "rtt_us": rtt[chunk].astype(int).tolist(),
            "status": [0] * chunk.size}}
        r = post_batch(client, src, batch)
        assert r.status_code == 202, r.text


class Pair:
    def __init__(self, org: Any, src: EnrolledAgent, dst: EnrolledAgent,
                 start: datetime) -> None:
        self.org, self.src, self.dst, self.start = org, src, dst, start

    def shifts(self, client: httpx.Client, window_s: int, resolution: str,  # noqa: F811
               end: datetime | None = None) -> dict[str, Any]:
        r = client.get("/api/v1/analytics/mesh/level-shifts", headers={
            "Authorization": f"Bearer {self.org.api_key}"}, params={
            "start": self.start.isoformat(),
            "end": (end or self.start + timedelta(hours=HOURS)).isoformat(),
            "src": self.src.agent_id, "dst": self.dst.agent_id, "window_s": window_s,
            "resolution": resolution})
        assert r.status_code == 200, r.text
        return r.json()


@pytest.fixture(scope="module")
def stepped(client: httpx.Client, make_org: Callable, db: Engine) -> Pair:  # noqa: F811
    org = make_org()
    a = enroll(client, org.enrollment_token, "lv-a", provider="aws", region="us-east-1",
               zone="us-east-1a")
    b = enroll(client, org.enrollment_token, "lv-b", provider="aws", region="eu-west-1",
               zone="eu-west-1a")
    rng = np.random.default_rng(16)
    start = rollups.floor_time(datetime.now(UTC) - timedelta(hours=HOURS + 1), 3600)
    t = start.timestamp() + np.arange(HOURS * 3600 * RATE_HZ) / RATE_HZ
    level = np.full(t.size, BASE_US)
    for hour, fraction in STEPS:
        level[t >= start.timestamp() + hour * 3600] += fraction * BASE_US
    rtt = level + rng.normal(0, 300.0, t.size) + rng.exponential(150.0, t.size)
    spikes = rng.random(t.size) < 0.001
    rtt[spikes] *= 30
    _post_mesh(client, a, b.agent_id, t, rtt)
    roll_up_mesh(db, uuid.UUID(org.org_id), start, HOURS, levels=(300,))
    return Pair(org, a, b, start)


@pytest.mark.parametrize(("window_s", "resolution"), [
    (30, "raw"), (30, "1m"), (60, "1m"), (300, "5m")])
def test_one_and_five_percent_steps_are_found_from_every_resolution(
        client: httpx.Client, stepped: Pair, window_s: int, resolution: str) -> None:  # noqa: F811
    body = stepped.shifts(client, window_s, resolution)
    assert body["source"]["resolution"] == resolution
    shifts = body["shifts"]
    assert len(shifts) == len(STEPS), shifts
    for (hour, fraction), shift in zip(STEPS, shifts, strict=True):
        want = stepped.start + timedelta(hours=hour)
        got = datetime.fromisoformat(shift["time"])
        assert abs((got - want).total_seconds()) <= 2 * window_s
        assert shift["direction"] == ("up" if fraction > 0 else "down")
        assert shift["step"] == pytest.approx(fraction * BASE_US, rel=0.10)
        assert shift["confidence"] > 0.999
    # The window medians are not sketch bins (2% wide: three or four values over this 6%
    # range): dozens of distinct values, and a noise estimate above 0.
    medians = [m["p50"] for m in body["medians"] if m["p50"] is not None]
    assert len(set(medians)) > min(50, len(medians) // 2)
    assert body["noise"] > 0


@pytest.fixture(scope="module")
def week(client: httpx.Client, make_org: Callable, db: Engine) -> Pair:  # noqa: F811
    """A week of one sample every 15 s with a 5% step after four days."""
    org = make_org()
    a = enroll(client, org.enrollment_token, "wk-a", provider="gcp", region="us-east4",
               zone="us-east4-a")
    b = enroll(client, org.enrollment_token, "wk-b", provider="gcp", region="europe-west1",
               zone="europe-west1-b")
    rng = np.random.default_rng(17)
    start = rollups.floor_time(datetime.now(UTC) - timedelta(days=7, hours=2), 3600)
    t = start.timestamp() + np.arange(7 * 86400 // 15) * 15.0 + 3.0
    rtt = BASE_US * (1 + 0.05 * (t >= start.timestamp() + 4 * 86400))
    rtt = rtt + rng.normal(0, 100.0, t.size)
    _post_mesh(client, a, b.agent_id, t, rtt)
    with db.begin() as conn:
        rollups.roll_up_minutes(conn, "mesh", start, start + timedelta(days=7),
                                uuid.UUID(org.org_id))
    return Pair(org, a, b, start)


def test_a_week_of_thirty_second_windows_is_answered_from_minute_rows(
        client: httpx.Client, week: Pair) -> None:  # noqa: F811
    body = week.shifts(client, 30, "auto", end=week.start + timedelta(days=7))
    assert body["source"]["resolution"] == "1m"
    assert len(body["medians"]) == 7 * 2880
    assert [s["direction"] for s in body["shifts"]] == ["up"]
    got = datetime.fromisoformat(body["shifts"][0]["time"])
    assert abs((got - (week.start + timedelta(days=4))).total_seconds()) <= 60
    assert body["shifts"][0]["step"] == pytest.approx(0.05 * BASE_US, rel=0.10)


def test_each_pair_is_analysed_on_its_own_with_group_by_pair(
        client: httpx.Client, stepped: Pair) -> None:  # noqa: F811
    r = client.get("/api/v1/analytics/mesh/level-shifts", headers={
        "Authorization": f"Bearer {stepped.org.api_key}"}, params={
        "start": stepped.start.isoformat(),
        "end": (stepped.start + timedelta(hours=HOURS)).isoformat(),
        "window_s": 30, "group_by": "pair"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["source"]["resolution"] == "1m"  # a fleet's 6 h: half-minute medians
    (g,) = body["groups"]
    assert g["group"] == [stepped.src.agent_id, stepped.dst.agent_id]
    assert [s["direction"] for s in g["shifts"]] == ["up", "down"]
