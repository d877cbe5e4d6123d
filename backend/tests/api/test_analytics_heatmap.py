"""Heatmap cells over HTTP: a region or zone cell holds the pairs between agents of those
regions or zones, never an agent's self-loop (which the node view keeps), and a percentile
cell says how many samples lie beyond it."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import pytest

from stormwatch.services import rollups
from tests.helpers import EnrolledAgent, enroll, post_batch

# name: (region, zone)
AGENTS = {
    "e1": ("eu-west-1", "eu-west-1a"),
    "e2": ("eu-west-1", "eu-west-1b"),
    "k1": ("ap-northeast-2", "ap-northeast-2a"),
    "k2": ("ap-northeast-2", "ap-northeast-2a"),
    "u1": ("us-east-1", "us-east-1a"),  # alone in its region: only a self-loop there
}
SECONDS = 120  # two minutes at 1 round/s, as on a freshly started fleet
SELF_US, INTRA_US, CROSS_US = 38.0, 900.0, 80_000.0


class Fleet:
    def __init__(self, org: Any, agents: dict[str, EnrolledAgent], start: datetime,
                 samples: dict[tuple[str, str], np.ndarray]) -> None:
        self.org, self.agents, self.start, self.samples = org, agents, start, samples
        self.end = start + timedelta(seconds=SECONDS)

    def heatmap(self, api: httpx.Client, level: str, stat: str) -> dict[tuple[str, str], Any]:
        r = api.get("/api/v1/analytics/mesh/heatmap",
                    headers={"Authorization": f"Bearer {self.org.api_key}"},
                    params={"start": self.start.isoformat(), "end": self.end.isoformat(),
                            "level": level, "stat": stat, "resolution": "raw"})
        assert r.status_code == 200, r.text
        return {(c["src"], c["dst"]): c for c in r.json()["cells"]}

    def values(self, pairs: set[tuple[str, str]]) -> np.ndarray:
        return np.concatenate([self.samples[p] for p in sorted(pairs)])


@pytest.fixture(scope="module")
def fleet(client: httpx.Client, make_org: Callable) -> Fleet:  # noqa: F811
    org = make_org()
    agents = {n: enroll(client, org.enrollment_token, f"hm-{n}", provider="aws", region=r,
                        zone=z, subnet=n) for n, (r, z) in AGENTS.items()}
    rng = np.random.default_rng(11)
    start = rollups.floor_time(datetime.now(UTC) - timedelta(minutes=10), 60)
    t0 = int(start.timestamp() * 1_000_000)
    names = list(AGENTS)
    samples: dict[tuple[str, str], np.ndarray] = {}
    for s in names:
        cols: dict[str, list[Any]] = {k: [] for k in ("time_us", "peer_idx", "round",
                                                       "payload_bytes", "rtt_us", "status")}
        for di, d in enumerate(names):
            median = (SELF_US if s == d else INTRA_US if AGENTS[s][0] == AGENTS[d][0]
                      else CROSS_US)
            v = np.maximum(np.round(rng.lognormal(np.log(median), 0.2, SECONDS)), 1)
            samples[(s, d)] = v
            cols["time_us"] += (t0 + np.arange(SECONDS) * 1_000_000 + di * 1000).tolist()
            cols["peer_idx"] += [di] * SECONDS
            cols["round"] += list(range(SECONDS))
            cols["payload_bytes"] += [1024] * SECONDS
            cols["rtt_us"] += v.astype(int).tolist()
            cols["status"] += [0] * SECONDS
        r = post_batch(client, agents[s], {
            "batch_id": str(uuid.uuid4()), "agent_id": agents[s].agent_id,
            "mesh": {"peers": [agents[d].agent_id for d in names], **cols}})
        assert r.status_code == 202, r.text
    return Fleet(org, agents, start, samples)


LABEL = {"node": lambda n: f"hm-{n}", "zone": lambda n: f"aws/{AGENTS[n][0]}/{AGENTS[n][1]}",
         "region": lambda n: AGENTS[n][0]}


@pytest.mark.parametrize("level", ["region", "zone"])
def test_region_and_zone_cells_leave_self_loops_out(client: httpx.Client,  # noqa: F811
                                                    fleet: Fleet, level: str) -> None:
    label = LABEL[level]
    groups: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for s in AGENTS:
        for d in AGENTS:
            if s != d:
                groups.setdefault((label(s), label(d)), set()).add((s, d))
    p50 = fleet.heatmap(client, level, "p50")
    count = fleet.heatmap(client, level, "count")
    # A region or zone with one agent has no pair inside it: its diagonal cell stays empty.
    assert set(p50) == set(groups)
    for key, pairs in groups.items():
        values = fleet.values(pairs)
        assert count[key]["value"] == values.size, key
        assert p50[key]["value"] == float(np.quantile(values, 0.5, method="lower")), key
    inside = (("eu-west-1", "eu-west-1") if level == "region"
              else ("aws/ap-northeast-2/ap-northeast-2a",) * 2)
    assert p50[inside]["value"] > INTRA_US / 2
    assert (label("u1"), label("u1")) not in p50


def test_the_node_view_keeps_each_agent_s_self_loop(client: httpx.Client,  # noqa: F811
                                                    fleet: Fleet) -> None:
    p50 = fleet.heatmap(client, "node", "p50")
    assert set(p50) == {(f"hm-{s}", f"hm-{d}") for s in AGENTS for d in AGENTS}
    for n in AGENTS:
        cell = p50[(f"hm-{n}", f"hm-{n}")]
        values = fleet.samples[(n, n)]
        assert cell["count"] == values.size
        assert cell["value"] == float(np.quantile(values, 0.5, method="lower"))
        assert cell["value"] < INTRA_US / 2


def test_percentile_cells_count_the_samples_beyond_them(client: httpx.Client,  # noqa: F811
                                                        fleet: Fleet) -> None:
    key = ("eu-west-1", "eu-west-1")
    values = np.sort(fleet.values({("e1", "e2"), ("e2", "e1")}))
    for stat, q in (("p50", 0.5), ("p99.99", 0.9999)):
        cell = fleet.heatmap(client, "region", stat)[key]
        rank = int(np.floor(q * (values.size - 1)))
        assert cell["value"] == float(values[rank])
        assert cell["beyond"] == values.size - 1 - rank
    # Two minutes of two pairs leave nothing beyond p99.99: too few to support it.
    assert fleet.heatmap(client, "region", "p99.99")[key]["beyond"] < 10
    assert fleet.heatmap(client, "region", "mean")[key]["beyond"] is None


def test_same_named_zones_of_different_regions_or_providers_stay_apart(
        client: httpx.Client, make_org: Callable) -> None:  # noqa: F811
    """Zone "1" of two Azure regions, and a "rack1" at two providers, are four places: a zone
    cell is keyed by provider, region and zone, never by the zone's name alone."""
    org = make_org()
    sites = {"w": ("azure", "westeurope", "1"), "e": ("azure", "eastus", "1"),
             "p": ("onprem", "lab", "rack1"), "q": ("colo", "lab", "rack1")}
    agents = {n: enroll(client, org.enrollment_token, f"zn-{n}", provider=pv, region=r, zone=z)
              for n, (pv, r, z) in sites.items()}
    start = rollups.floor_time(datetime.now(UTC) - timedelta(minutes=10), 60)
    t0 = int(start.timestamp() * 1_000_000)
    names = list(sites)
    for i, s in enumerate(names):
        n = len(names) * 10
        r = post_batch(client, agents[s], {
            "batch_id": str(uuid.uuid4()), "agent_id": agents[s].agent_id,
            "mesh": {"peers": [agents[d].agent_id for d in names],
                     "time_us": [t0 + k * 1_000_000 for k in range(n)],
                     "peer_idx": [k % len(names) for k in range(n)], "round": list(range(n)),
                     "payload_bytes": [1024] * n,
                     "rtt_us": [1000 * (i + 1) + 10 * (k % len(names)) for k in range(n)],
                     "status": [0] * n}})
        assert r.status_code == 202, r.text
    f = Fleet(org, agents, start, {})
    cells = f.heatmap(client, "zone", "count")
    label = {n: "/".join(site) for n, site in sites.items()}
    assert set(cells) == {(label[s], label[d]) for s in names for d in names if s != d}
    assert all(c["value"] == 10 for c in cells.values())
