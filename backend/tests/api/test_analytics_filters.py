"""Filters and heatmap levels over HTTP: each filter (agents, regions, zones, providers,
topology class, payload size) restricts the answer to the series it documents, and heatmap
cells at node, zone and region level hold the statistic of exactly their pairs' samples
(above node level, pairs of distinct agents)."""

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

# name: (provider, region, zone, subnet)
AGENTS = {
    "a1": ("aws", "us-east-1", "us-east-1a", "s1"),
    "a2": ("aws", "us-east-1", "us-east-1a", "s2"),
    "a3": ("aws", "us-east-1", "us-east-1b", "s3"),
    "a4": ("aws", "eu-west-1", "eu-west-1a", "s4"),
    "g1": ("gcp", "europe-west1", "europe-west1-b", "s5"),
}
SECONDS = 600  # 10 minutes at 1 round/s: short enough for raw answers
SMALL_PAYLOAD = 64


class Mesh:
    def __init__(self, org: Any, agents: dict[str, EnrolledAgent], start: datetime,
                 samples: dict[tuple[str, str, int], np.ndarray]) -> None:
        self.org, self.agents, self.start, self.samples = org, agents, start, samples
        self.end = start + timedelta(seconds=SECONDS)
        self.name_of = {a.agent_id: n for n, a in agents.items()}

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.org.api_key}"}

    def values(self, pairs: set[tuple[str, str]], payload: int | None = None) -> np.ndarray:
        return np.concatenate([v for (s, d, p), v in self.samples.items()
                               if (s, d) in pairs and (payload is None or p == payload)])


@pytest.fixture(scope="module")
def mesh(client: httpx.Client, make_org: Callable, db: Engine) -> Mesh:  # noqa: F811
    org = make_org()
    agents = {n: enroll(client, org.enrollment_token, f"filt-{n}", provider=p, region=r,
                        zone=z, subnet=s) for n, (p, r, z, s) in AGENTS.items()}
    rng = np.random.default_rng(5)
    start = rollups.floor_time(datetime.now(UTC) - timedelta(minutes=25), 60)
    t0 = int(start.timestamp() * 1_000_000)
    names = list(AGENTS)
    samples: dict[tuple[str, str, int], np.ndarray] = {}
    for si, s in enumerate(names):
        peers = [agents[d].agent_id for d in names]
        cols: dict[str, list[Any]] = {k: [] for k in ("time_us", "peer_idx", "round",
                                                       "payload_bytes", "rtt_us", "status")}
        # Pair-specific medians, so a wrongly included pair moves the percentiles.
        for di, d in enumerate(names):
            payloads = [1024, SMALL_PAYLOAD] if (s, d) == ("a1", "a3") else [1024]
            for pi, payload in enumerate(payloads):
                median = 200.0 + 150.0 * si + 40.0 * di + (0 if payload == 1024 else 900)
                v = np.maximum(np.round(rng.lognormal(np.log(median), 0.3, SECONDS)), 1)
                samples[(s, d, payload)] = v
                cols["time_us"] += (t0 + np.arange(SECONDS) * 1_000_000 + di * 1000).tolist()
                cols["peer_idx"] += [di] * SECONDS
                # A payload size of its own runs on later rounds: one sample per peer and round.
                cols["round"] += list(range(pi * SECONDS, (pi + 1) * SECONDS))
                cols["payload_bytes"] += [payload] * SECONDS
                cols["rtt_us"] += v.astype(int).tolist()
                cols["status"] += [0] * SECONDS
        batch = {"batch_id": str(uuid.uuid4()), "agent_id": agents[s].agent_id,
                 "mesh": {"peers": peers, **cols}}
        r = post_batch(client, agents[s], batch)
        assert r.status_code == 202, r.text
    org_id = uuid.UUID(org.org_id)
    with db.begin() as conn:
        rollups.roll_up_minutes(conn, "mesh", start, start + timedelta(seconds=SECONDS + 60),
                                org_id)
        rollups.roll_up_coarse(conn, "mesh", 3600, [(org_id, start),
                                                    (org_id, start + timedelta(hours=1))])
    return Mesh(org, agents, start, samples)


def _pairs_of(names: set[str]) -> set[tuple[str, str]]:
    return {(s, d) for s in names for d in names}


def _summary(client: httpx.Client, mesh: Mesh, **params: Any) -> dict[tuple[str, str], Any]:  # noqa: F811
    r = client.get("/api/v1/analytics/mesh/summary", headers=mesh.headers, params={
        "start": mesh.start.isoformat(), "end": mesh.end.isoformat(), "group_by": "pair",
        "resolution": "raw", **params})
    assert r.status_code == 200, r.text
    return {(mesh.name_of[g["group"][0]], mesh.name_of[g["group"][1]]): g
            for g in r.json()["groups"]}


def _ids(mesh: Mesh, *names: str) -> list[str]:
    return [mesh.agents[n].agent_id for n in names]


CASES: list[tuple[str, dict[str, Any], set[tuple[str, str]]]] = [
    ("no filter", {}, _pairs_of(set(AGENTS))),
    ("agents", {"agents": ["a1", "a3"]}, _pairs_of({"a1", "a3"})),
    ("regions", {"regions": ["us-east-1"]}, _pairs_of({"a1", "a2", "a3"})),
    ("regions, comma separated", {"regions": ["us-east-1,europe-west1"]},
     _pairs_of({"a1", "a2", "a3", "g1"})),
    ("zones", {"zones": ["aws/us-east-1/us-east-1a", "gcp/europe-west1/europe-west1-b"]},
     _pairs_of({"a1", "a2", "g1"})),
    ("zones, comma separated", {"zones": ["aws/us-east-1/us-east-1b,aws/eu-west-1/eu-west-1a"]},
     _pairs_of({"a3", "a4"})),
    ("providers", {"providers": ["gcp"]}, {("g1", "g1")}),
    ("providers aws", {"providers": ["aws"]}, _pairs_of({"a1", "a2", "a3", "a4"})),
    ("topology class", {"topology_class": ["cross_az"]},
     {("a1", "a3"), ("a3", "a1"), ("a2", "a3"), ("a3", "a2")}),
    ("topology classes", {"topology_class": ["cross_subnet", "self"]},
     {("a1", "a2"), ("a2", "a1")} | {(n, n) for n in AGENTS}),
    ("src and topology class", {"src": ["a1"], "topology_class": ["cross_region",
                                                                  "cross_provider"]},
     {("a1", "a4"), ("a1", "g1")}),
    ("src, dst and regions", {"src": ["a1", "a4"], "dst": ["a4", "g1"],
                              "regions": ["eu-west-1", "europe-west1"]}, {("a4", "a4"),
                                                                         ("a4", "g1")}),
    ("no match", {"providers": ["azure"]}, set()),
]


@pytest.mark.parametrize(("case", "params", "pairs"), CASES, ids=[c[0] for c in CASES])
def test_each_filter_restricts_the_answer_to_its_series(client: httpx.Client,  # noqa: F811
                                                        mesh: Mesh, case: str,
                                                        params: dict[str, Any],
                                                        pairs: set[tuple[str, str]]) -> None:
    q = {k: (_ids(mesh, *v) if k in ("agents", "src", "dst") else v) for k, v in params.items()}
    got = _summary(client, mesh, **q)
    assert set(got) == pairs
    for (s, d), g in got.items():
        values = mesh.values({(s, d)})
        assert g["count"] == values.size
        assert g["percentiles"]["p50"] == float(np.quantile(values, 0.5, method="lower"))
    if pairs:
        # The same filters without grouping: one distribution of exactly those samples.
        r = client.get("/api/v1/analytics/mesh/summary", headers=mesh.headers, params={
            "start": mesh.start.isoformat(), "end": mesh.end.isoformat(), "resolution": "raw",
            **q})
        (g,) = r.json()["groups"]
        values = mesh.values(pairs)
        assert g["count"] == values.size
        for label, p in (("p5", 5), ("p50", 50), ("p99", 99)):
            assert g["percentiles"][label] == float(np.percentile(values, p, method="lower"))


def test_the_payload_size_filter_keeps_only_that_payload(client: httpx.Client,  # noqa: F811
                                                          mesh: Mesh) -> None:
    small = _summary(client, mesh, payload_bytes=str(SMALL_PAYLOAD))
    assert set(small) == {("a1", "a3")}
    values = mesh.values({("a1", "a3")}, SMALL_PAYLOAD)
    assert small[("a1", "a3")]["count"] == values.size
    assert small[("a1", "a3")]["percentiles"]["p50"] == np.quantile(values, 0.5, method="lower")
    normal = _summary(client, mesh, payload_bytes="1024", src=mesh.agents["a1"].agent_id)
    assert normal[("a1", "a3")]["count"] == SECONDS
    both = _summary(client, mesh, payload_bytes=f"1024,{SMALL_PAYLOAD}",
                    src=mesh.agents["a1"].agent_id)
    assert both[("a1", "a3")]["count"] == 2 * SECONDS
    by_payload = client.get("/api/v1/analytics/mesh/summary", headers=mesh.headers, params={
        "start": mesh.start.isoformat(), "end": mesh.end.isoformat(), "resolution": "raw",
        "group_by": "payload_bytes"}).json()
    assert {g["group"]: g["count"] for g in by_payload["groups"]} == {
        1024: len(AGENTS) ** 2 * SECONDS, SMALL_PAYLOAD: SECONDS}


def test_filters_that_do_not_apply_to_a_kind_get_a_422_naming_them(
        client: httpx.Client, mesh: Mesh) -> None:  # noqa: F811
    params = {"start": mesh.start.isoformat(), "end": mesh.end.isoformat()}
    for kind, name, value in (("storage", "topology_class", "cross_az"),
                              ("quorum", "payload_bytes", "1024"),
                              ("storage", "dst", mesh.agents["a1"].agent_id),
                              ("mesh", "op", "get"),
                              ("mesh", "target", str(uuid.uuid4())),
                              ("mesh", "topology_class", "cross_galaxy")):
        r = client.get(f"/api/v1/analytics/{kind}/summary", headers=mesh.headers,
                       params={**params, name: value})
        assert r.status_code == 422, (kind, name, r.text)
        assert r.json()["detail"][0]["loc"] == ["query", name], r.text


LEVELS = {"node": lambda n: f"filt-{n}", "zone": lambda n: "/".join(AGENTS[n][:3]),
          "region": lambda n: AGENTS[n][1]}


@pytest.mark.parametrize("level", list(LEVELS))
@pytest.mark.parametrize("resolution", ["raw", "1h"])
def test_heatmap_cells_hold_the_statistic_of_their_pairs(client: httpx.Client,  # noqa: F811
                                                         mesh: Mesh, level: str,
                                                         resolution: str) -> None:
    label = LEVELS[level]
    stats = {"p50": 0.5, "p99": 0.99, "p99.9": 0.999}
    cells: dict[str, dict[tuple[str, str], Any]] = {}
    for stat in [*stats, "mean", "count"]:
        r = client.get("/api/v1/analytics/mesh/heatmap", headers=mesh.headers, params={
            "start": mesh.start.isoformat(), "end": mesh.end.isoformat(), "level": level,
            "stat": stat, "resolution": resolution, "payload_bytes": "1024"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["source"]["resolution"] == resolution
        cells[stat] = {(c["src"], c["dst"]): c for c in body["cells"]}
    groups: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for s in AGENTS:
        for d in AGENTS:
            # Self-loops are cells of the node view only.
            if level == "node" or s != d:
                groups.setdefault((label(s), label(d)), set()).add((s, d))
    assert set(cells["p50"]) == set(groups)
    assert body["rows"] == sorted({k[0] for k in groups})
    assert body["columns"] == sorted({k[1] for k in groups})
    for key, pairs in groups.items():
        values = mesh.values(pairs, 1024)
        assert cells["count"][key]["value"] == values.size
        assert cells["mean"][key]["value"] == pytest.approx(values.mean())
        for stat, q in stats.items():
            got = cells[stat][key]["value"]
            if resolution == "raw":
                assert got == float(np.quantile(values, q, method="lower"))
            else:
                want = float(np.quantile(values, q, method="lower"))
                assert abs(got - want) / want <= 0.01, (key, stat, got, want)


def test_a_range_older_than_the_raw_retention_is_answered_from_rollups(
        client: httpx.Client, make_org: Callable, db: Engine) -> None:  # noqa: F811
    org = make_org()
    headers = {"Authorization": f"Bearer {org.api_key}"}
    a = enroll(client, org.enrollment_token, "old-a", provider="aws", region="us-east-1")
    b = enroll(client, org.enrollment_token, "old-b", provider="aws", region="us-east-1")
    start = rollups.floor_time(datetime.now(UTC) - timedelta(hours=30), 60)
    v = np.round(np.random.default_rng(8).lognormal(np.log(700), 0.3, SECONDS))
    t0 = int(start.timestamp() * 1_000_000)
    r = post_batch(client, a, {"batch_id": str(uuid.uuid4()), "agent_id": a.agent_id, "mesh": {
        "peers": [b.agent_id], "time_us": (t0 + np.arange(SECONDS) * 1_000_000).tolist(),
        "peer_idx": [0] * SECONDS, "round": list(range(SECONDS)),
        "payload_bytes": [1024] * SECONDS, "rtt_us": v.astype(int).tolist(),
        "status": [0] * SECONDS}})
    assert r.status_code == 202, r.text
    with db.begin() as conn:
        rollups.roll_up_minutes(conn, "mesh", start, start + timedelta(seconds=SECONDS),
                                uuid.UUID(org.org_id))
    r = client.patch("/api/v1/org", json={"raw_retention_days": 1}, headers=headers)
    assert r.status_code == 200, r.text
    params = {"start": start.isoformat(),
              "end": (start + timedelta(seconds=SECONDS)).isoformat(),
              "src": a.agent_id, "dst": b.agent_id}
    body = client.get("/api/v1/analytics/mesh/summary", headers=headers, params=params).json()
    assert body["source"]["resolution"] == "1m"  # a 10-minute pair range, but raw is gone
    (g,) = body["groups"]
    assert g["count"] == SECONDS
    want = float(np.quantile(v, 0.5, method="lower"))
    assert abs(g["percentiles"]["p50"] - want) / want <= 0.01
    r = client.get("/api/v1/analytics/mesh/series", headers=headers,
                   params={**params, "window_s": 30})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "window_s"]
    r = client.get("/api/v1/analytics/mesh/series", headers=headers,
                   params={**params, "window_s": 120})
    assert r.status_code == 200 and r.json()["source"]["resolution"] == "1m"
    assert sum(w["count"] for w in r.json()["groups"][0]["windows"]) == SECONDS


def test_a_zone_filter_selects_its_region_s_zone_only(client: httpx.Client,  # noqa: F811
                                                     make_org: Callable) -> None:
    """Zone "1" of two Azure regions, and a zone "1" at another provider, are three places: a
    zone filter is a provider/region/zone key, the same key the zone heatmap shows."""
    org = make_org()
    sites = {"w": ("azure", "westeurope", "1"), "e": ("azure", "eastus", "1"),
             "o": ("onprem", "westeurope", "1")}
    agents = {n: enroll(client, org.enrollment_token, f"zf-{n}", provider=pv, region=r, zone=z)
              for n, (pv, r, z) in sites.items()}
    start = rollups.floor_time(datetime.now(UTC) - timedelta(minutes=10), 60)
    t0 = int(start.timestamp() * 1_000_000)
    names = list(sites)
    for s in names:
        n = len(names) * 10
        r = post_batch(client, agents[s], {
            "batch_id": str(uuid.uuid4()), "agent_id": agents[s].agent_id,
            "mesh": {"peers": [agents[d].agent_id for d in names],
                     "time_us": [t0 + k * 1_000_000 for k in range(n)],
                     "peer_idx": [k % len(names) for k in range(n)], "round": list(range(n)),
                     "payload_bytes": [1024] * n, "rtt_us": [1000 + k for k in range(n)],
                     "status": [0] * n}})
        assert r.status_code == 202, r.text
    headers = {"Authorization": f"Bearer {org.api_key}"}
    params = {"start": start.isoformat(), "end": (start + timedelta(minutes=5)).isoformat(),
              "group_by": "pair", "resolution": "raw"}
    name_of = {a.agent_id: n for n, a in agents.items()}

    def pairs(zones: str) -> set[tuple[str, str]]:
        r = client.get("/api/v1/analytics/mesh/summary", headers=headers,
                       params={**params, "zones": zones})
        assert r.status_code == 200, r.text
        return {(name_of[g["group"][0]], name_of[g["group"][1]]) for g in r.json()["groups"]}

    assert pairs("azure/westeurope/1") == {("w", "w")}
    assert pairs("azure/eastus/1") == {("e", "e")}
    assert pairs("azure/westeurope/1,onprem/westeurope/1") == _pairs_of({"w", "o"})
    for bad, words in (("1", "provider/region/zone"), ("azure/northeurope/1", "no agent"),
                       ("azure/westeurope", "provider/region/zone")):
        r = client.get("/api/v1/analytics/mesh/summary", headers=headers,
                       params={**params, "zones": bad})
        assert r.status_code == 422, (bad, r.text)
        (detail,) = r.json()["detail"]
        assert detail["loc"] == ["query", "zones"] and words in detail["msg"], (bad, detail)
