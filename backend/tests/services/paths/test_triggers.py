"""Traces asked for when round trips change: a pair whose RTT level shifted in the last
minutes, or whose loss rose, gets one trace request each (however often the pass runs); the
shapes that fool detectors (drift, a spike, a periodic swing, a step too small to matter, a
shift long past) ask nothing."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, text

from stormwatch.services.paths import triggers
from stormwatch.services.paths.triggers import new_shift, rising_loss
from tests.alert_helpers import aligned_now, insert_mesh, make_agents, sessionmaker_for
from tests.helpers import roll_up_mesh

N = 60  # 30 minutes of 30 s windows
TIMES = np.arange(N, dtype=np.int64) * 30


def noisy(levels: np.ndarray, seed: int = 0) -> np.ndarray:
    return levels + np.random.default_rng(seed).normal(0, 20, levels.size)


@pytest.mark.parametrize(("before", "after", "at"), [
    (1000.0, 4000.0, 54),  # 3 ms on an intra-region pair, six windows in
    (187_000.0, 192_700.0, 53),  # the demo's 5.7 ms on Mumbai-Virginia: 3% of the level
    (20_000.0, 19_000.0, 50),  # down by 1 ms
])
def test_a_recent_step_is_a_new_shift_dated_by_its_first_window(before: float, after: float,
                                                                 at: int) -> None:
    x = noisy(np.where(np.arange(N) >= at, after, before))
    got = new_shift(x, TIMES)
    assert got is not None
    assert got[0] == TIMES[at] and got[1] == pytest.approx(after - before, rel=0.05)


def test_a_step_is_seen_once_five_windows_of_the_new_level_are_in() -> None:
    x = noisy(np.where(np.arange(N) >= N - 4, 4000.0, 1000.0))
    assert new_shift(x, TIMES) is None
    x = noisy(np.where(np.arange(N + 1) >= N - 4, 4000.0, 1000.0))
    assert new_shift(x, np.arange(N + 1, dtype=np.int64) * 30) is not None


@pytest.mark.parametrize("shape", ["old step", "drift", "spike", "swing", "small step",
                                   "small on a long path", "flat"])
def test_shapes_that_are_not_a_new_shift_ask_nothing(shape: str) -> None:
    i = np.arange(N, dtype=np.float64)
    levels = {
        "old step": np.where(i >= 40, 4000.0, 1000.0),  # 10 minutes ago: no longer new
        "drift": 1000.0 + 15.0 * i,  # 900 µs over 30 minutes, no step
        "spike": np.where(i == 57, 30_000.0, 1000.0),
        "swing": 1000.0 + 400.0 * np.sin(2 * np.pi * i / 10),  # a 5-minute cycle
        "small step": np.where(i >= 52, 1080.0, 1000.0),  # 80 µs: under 100 µs
        "small on a long path": np.where(i >= 52, 188_500.0, 187_000.0),  # 1.5 ms: under 1%
        "flat": np.full(N, 1000.0),
    }[shape]
    assert new_shift(noisy(levels, seed=3), TIMES) is None


@pytest.mark.parametrize(("recent", "before", "rises"), [
    ((360, 36), (3240, 0), True),  # 10% from nothing
    ((360, 36), (3240, 324), False),  # 10% as before
    ((360, 2), (3240, 0), False),  # two probes are not a trend
    ((360, 3), (3240, 0), False),  # under 1%
    ((0, 0), (3240, 0), False),
    ((360, 360), (0, 0), True),  # everything lost, nothing before (a peer gone)
])
def test_loss_rises_when_it_is_a_real_share_and_well_above_before(
        recent: tuple[int, int], before: tuple[int, int], rises: bool) -> None:
    assert (rising_loss(recent, before) is not None) is rises


async def test_a_shift_and_rising_loss_each_ask_one_trace_of_their_pair(
        services: Any, db: Engine, org: Any) -> None:
    a, b, c, d = make_agents(db, org.org_id, [{"name": n} for n in "abcd"])
    now = aligned_now()
    start = now - timedelta(seconds=N * 30)
    shift = [1000.0] * 54 + [4000.0] * 6
    insert_mesh(db, org.org_id, a, b, start, shift, rate_hz=2)
    insert_mesh(db, org.org_id, c, d, start, [1000.0] * N, rate_hz=2, seed=1,
                loss_share=[0.0] * 54 + [0.2] * 6)
    insert_mesh(db, org.org_id, a, c, start, [1000.0] * N, rate_hz=2, seed=2,
                loss_share=[0.02] * N)  # lossy all along: nothing new
    # The worker has rolled up the minutes it could (all but the newest two); the pass reads
    # the rest raw.
    roll_up_mesh(db, uuid.UUID(org.org_id), start, 1)
    with db.begin() as conn:
        conn.execute(text("DELETE FROM mesh_rollups WHERE org_id = :o AND bucket_start >= :t"),
                     {"o": org.org_id, "t": now - timedelta(minutes=2)})
    sm = sessionmaker_for(services.database_url)
    async with sm() as session:
        # Every window has its level: rolled minutes' half-minute medians, then raw.
        _, levels = await triggers.pair_levels(session, uuid.UUID(org.org_id), start, now)
        assert np.isfinite(levels[(a, b)]).sum() == N
        made = await triggers.request_for_changes(session, now + timedelta(seconds=1),
                                                  orgs=[org.org_id])
        await session.commit()
    assert made == 2
    with db.connect() as conn:
        rows = conn.execute(text(
            "SELECT src_agent_id, dst_agent_id, trigger, reason FROM path_trace_requests "
            "WHERE org_id = :o ORDER BY trigger"), {"o": org.org_id}).all()
    assert [(r[0], r[1], r[2]) for r in rows] == [(a, b, "level_shift"), (c, d, "loss")]
    assert "shifted up by 3.00 ms" in rows[0][3]
    assert "loss rose to 20." in rows[1][3]

    # Later passes (or a second worker) ask nothing more for the same shift and loss.
    for later in (2, 31, 61):
        async with sm() as session:
            assert await triggers.request_for_changes(
                session, now + timedelta(seconds=later), orgs=[org.org_id]) == 0
            await session.commit()
