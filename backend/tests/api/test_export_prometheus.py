"""The Prometheus export over HTTP: samples go in through the ingest API, rollups run as the
worker runs them, and the scrape holds histograms whose counts are the samples, counters that
never go down between scrapes, and only the credential's org. The last test has Debian's
`prometheus` scrape the endpoint and answer `histogram_quantile` over its HTTP API."""

from __future__ import annotations

import math
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine

from stormwatch.devtools.services import free_port
from stormwatch.services import rollups
from stormwatch.services.analytics.sketches import Sketch
from stormwatch.services.export.prometheus import (
    BUCKET_RELATIVE_WIDTH,
    LATENCY_LADDER,
    export_origin,
)
from stormwatch.services.export.protobuf import NATIVE_RELATIVE_WIDTH
from tests.api.conftest import logged_in
from tests.conftest import ApiServer, Services
from tests.helpers import EnrolledAgent, enroll, post_batch, serving
from tests.notifications.servers import wait_until

MAX_SERIES = 12
# name: (provider, region, zone)
AGENTS = {
    "fra1": ("aws", "eu-central-1", "eu-central-1a"),
    "fra2": ("aws", "eu-central-1", "eu-central-1b"),
    "iad1": ("gcp", "us-east4", "us-east4-a"),
}
SELF_US, INTRA_US, CROSS_US = 40.0, 700.0, 90_000.0
EXPORT = "/api/v1/export/prometheus"

Pair = tuple[str, str]


@pytest.fixture(scope="module")
def server(services: Services) -> Iterator[ApiServer]:
    s = ApiServer(services, {"PROMETHEUS_EXPORT_MAX_SERIES": str(MAX_SERIES)})
    s.start()
    yield s
    s.stop()


@dataclass
class Fleet:
    org: Any
    agents: dict[str, EnrolledAgent]
    prefix: str
    ok: dict[Pair, list[float]] = field(default_factory=dict)
    lost: dict[Pair, int] = field(default_factory=dict)
    quorum_ok: dict[str, list[float]] = field(default_factory=dict)
    quorum_failed: dict[str, int] = field(default_factory=dict)

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.org.api_key}"}

    def scrape(self, api: httpx.Client, **params: str) -> dict[tuple[str, frozenset], float]:
        r = api.get(EXPORT, headers=self.headers(), params=params)
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("text/plain")
        return {(s.name, frozenset(s.labels.items())): s.value
                for fam in text_string_to_metric_families(r.text) for s in fam.samples}


def make_fleet(api: httpx.Client, make_org: Callable, prefix: str,
               agents: dict[str, tuple[str, str, str]]) -> Fleet:
    org = make_org()
    enrolled = {n: enroll(api, org.enrollment_token, f"{prefix}-{n}", provider=p, region=r,
                          zone=z, subnet=z) for n, (p, r, z) in agents.items()}
    return Fleet(org, enrolled, prefix)


def sample_span(seconds: float) -> tuple[datetime, datetime]:
    """Recent times, never before the export origin (counters count from there)."""
    now = datetime.now(UTC)
    return max(now - timedelta(seconds=seconds), export_origin(now)), now - timedelta(seconds=1)


def ingest(api: httpx.Client, db: Engine, fleet: Fleet, rng: np.random.Generator, rounds: int,
           median_us: Callable[[str, str], float], loss_every: int = 40,
           sigma: float = 0.3) -> dict[Pair, np.ndarray]:
    """Every agent probes every agent (itself too) `rounds` times and reports a quorum
    group; the minutes, hours and days they touch are rolled up. Returns this batch's RTTs."""
    start, end = sample_span(120)
    t0, t1 = int(start.timestamp() * 1e6), int(end.timestamp() * 1e6)
    names = list(fleet.agents)
    got: dict[Pair, np.ndarray] = {}
    for s in names:
        cols: dict[str, list[Any]] = {k: [] for k in ("time_us", "peer_idx", "round",
                                                       "payload_bytes", "rtt_us", "status")}
        times = np.sort(rng.integers(t0, t1, rounds))
        for di, d in enumerate(names):
            v = np.maximum(np.round(rng.lognormal(np.log(median_us(s, d)), sigma, rounds)), 1)
            lost = rng.random(rounds) < 1 / loss_every
            got[(s, d)] = v[~lost]
            fleet.ok.setdefault((s, d), []).extend(v[~lost].tolist())
            fleet.lost[(s, d)] = fleet.lost.get((s, d), 0) + int(lost.sum())
            cols["time_us"] += times.tolist()
            cols["peer_idx"] += [di] * rounds
            cols["round"] += list(range(rounds))
            cols["payload_bytes"] += [1024] * rounds
            cols["rtt_us"] += [None if x else int(y) for x, y in zip(lost, v, strict=True)]
            cols["status"] += [1 if x else 0 for x in lost]
        q = np.maximum(np.round(rng.lognormal(np.log(INTRA_US), 0.2, rounds)), 1)
        failed = rng.random(rounds) < 0.05
        fleet.quorum_ok.setdefault(s, []).extend(q[~failed].tolist())
        fleet.quorum_failed[s] = fleet.quorum_failed.get(s, 0) + int(failed.sum())
        quorum = {"groups": ["all3"], "time_us": times.tolist(), "group_idx": [0] * rounds,
                  "round": list(range(rounds)), "k": [2] * rounds, "n": [3] * rounds,
                  "latency_us": [None if x else int(y) for x, y in zip(failed, q, strict=True)],
                  "status": [1 if x else 0 for x in failed]}
        r = post_batch(api, fleet.agents[s], {
            "batch_id": str(uuid.uuid4()), "agent_id": fleet.agents[s].agent_id,
            "mesh": {"peers": [fleet.agents[d].agent_id for d in names], **cols},
            "quorum": quorum})
        assert r.status_code == 202, r.text
    roll_up(db, uuid.UUID(fleet.org.org_id), start, end)
    return got


def roll_up(db: Engine, org_id: uuid.UUID, start: datetime, end: datetime) -> None:
    """What the worker's pass does for these minutes: minutes, then 5-minute buckets, hours
    and days, in one transaction."""
    lo = rollups.floor_time(start, 60)
    hi = rollups.floor_time(end, 60) + timedelta(minutes=1)
    minutes = [lo + timedelta(minutes=i) for i in range(int((hi - lo).total_seconds()) // 60)]
    with db.begin() as conn:
        for kind in ("mesh", "quorum"):
            rollups.roll_up_minutes(conn, kind, lo, hi, org_id)
            for level in rollups.COARSE_LEVELS:
                buckets = sorted({rollups.floor_time(m, level) for m in minutes})
                rollups.roll_up_coarse(conn, kind, level, [(org_id, b) for b in buckets])


def median_by_place(s: str, d: str) -> float:
    if s == d:
        return SELF_US
    return INTRA_US if AGENTS[s][1] == AGENTS[d][1] else CROSS_US


@pytest.fixture(scope="module")
def fleet(client: httpx.Client, db: Engine, make_org: Callable) -> Fleet:
    f = make_fleet(client, make_org, "px", AGENTS)
    ingest(client, db, f, np.random.default_rng(5), 300, median_by_place)
    return f


def pair_labels(fleet: Fleet, s: str, d: str) -> dict[str, str]:
    ps, pd = AGENTS[s], AGENTS[d]
    return {"src_agent": f"{fleet.prefix}-{s}", "src_provider": ps[0], "src_region": ps[1],
            "src_zone": ps[2], "dst_agent": f"{fleet.prefix}-{d}", "dst_provider": pd[0],
            "dst_region": pd[1], "dst_zone": pd[2]}


def histogram(scrape: dict[tuple[str, frozenset], float], metric: str,
              labels: dict[str, str]) -> tuple[list[tuple[float, float]], float, float]:
    """(le, cumulative count) pairs, count and sum of the series whose labels include
    `labels` (exactly one series must match)."""
    want = set(labels.items())
    matches = {frozenset(kv for kv in key if kv[0] != "le") for (name, key) in scrape
               if name == metric + "_count" and want <= key}
    assert len(matches) == 1, (metric, labels, matches)
    series = matches.pop()
    buckets = sorted((float(dict(key)["le"]), v) for (name, key), v in scrape.items()
                     if name == metric + "_bucket" and series <= key)
    return (buckets, scrape[(metric + "_count", series)], scrape[(metric + "_sum", series)])


def check_histogram(buckets: list[tuple[float, float]], count: float, values: np.ndarray
                    ) -> None:
    les = [le for le, _ in buckets]
    assert les[:-1] == LATENCY_LADDER.bounds().tolist() and math.isinf(les[-1])
    counts = [c for _, c in buckets]
    assert all(b >= a for a, b in zip(counts, counts[1:], strict=False))
    assert counts[-1] == count == values.size
    # Each bucket counts the values at or below its boundary (exact up to the float
    # rounding of values that sit on a boundary, which these integers never do).
    for le, c in buckets[:-1]:
        assert c == np.sum(values <= le * 1e6 * (1 + 1e-12)), le


def test_pair_level_series_count_every_sample_and_every_loss(client: httpx.Client,
                                                             fleet: Fleet) -> None:
    scrape = fleet.scrape(client, level="pair", kind="mesh")
    assert {name for name, _ in scrape} == {
        "stormwatch_mesh_rtt_seconds_bucket", "stormwatch_mesh_rtt_seconds_count",
        "stormwatch_mesh_rtt_seconds_sum", "stormwatch_mesh_lost_total"}
    for (s, d), ok in fleet.ok.items():
        labels = pair_labels(fleet, s, d)
        values = np.asarray(ok)
        buckets, count, total = histogram(scrape, "stormwatch_mesh_rtt_seconds", labels)
        check_histogram(buckets, count, values)
        assert total == pytest.approx(values.sum() / 1e6, rel=1e-9)
        lost = [v for (name, key), v in scrape.items()
                if name == "stormwatch_mesh_lost_total" and set(labels.items()) <= key]
        assert lost == [fleet.lost[(s, d)]]
    topology = {dict(key)["topology_class"] for (name, key) in scrape
                if name == "stormwatch_mesh_rtt_seconds_count"}
    assert topology == {"self", "cross_az", "cross_provider"}


def test_region_level_is_the_default_and_leaves_self_loops_out(client: httpx.Client,
                                                               fleet: Fleet) -> None:
    scrape = fleet.scrape(client)
    cells: dict[tuple[str, str], list[float]] = {}
    for (s, d), ok in fleet.ok.items():
        if s != d:
            cells.setdefault((AGENTS[s][1], AGENTS[d][1]), []).extend(ok)
    series = {frozenset(kv for kv in key if kv[0] != "le") for (name, key) in scrape
              if name == "stormwatch_mesh_rtt_seconds_count"}
    assert {dict(k)["src_region"] + ">" + dict(k)["dst_region"] for k in series} == {
        f"{a}>{b}" for a, b in cells}
    for (src, dst), ok in cells.items():
        buckets, count, _ = histogram(scrape, "stormwatch_mesh_rtt_seconds",
                                      {"src_region": src, "dst_region": dst})
        check_histogram(buckets, count, np.asarray(ok))
    # Quorum groups per region, with their failures.
    q = {dict(key)["region"]: v for (name, key), v in scrape.items()
         if name == "stormwatch_quorum_latency_seconds_count"}
    failed = {dict(key)["region"]: v for (name, key), v in scrape.items()
              if name == "stormwatch_quorum_failures_total"}
    for region in {p[1] for p in AGENTS.values()}:
        names = [n for n, p in AGENTS.items() if p[1] == region]
        assert q[region] == sum(len(fleet.quorum_ok[n]) for n in names)
        assert failed[region] == sum(fleet.quorum_failed[n] for n in names)
    assert {dict(key)["quorum"] for (name, key) in scrape
            if name == "stormwatch_quorum_latency_seconds_count"} == {"Q2/3"}


def test_a_later_scrape_never_has_a_smaller_counter(client: httpx.Client, db: Engine,
                                                    make_org: Callable) -> None:
    f = make_fleet(client, make_org, "mono", AGENTS)
    rng = np.random.default_rng(8)
    ingest(client, db, f, rng, 100, median_by_place)
    scrapes = [f.scrape(client, level="pair")]
    for _ in range(2):
        ingest(client, db, f, rng, 60, median_by_place)
        scrapes.append(f.scrape(client, level="pair"))
    for before, after in zip(scrapes, scrapes[1:], strict=False):
        assert set(before) <= set(after)
        shrunk = {k: (v, after[k]) for k, v in before.items() if after[k] < v}
        assert not shrunk
        grew = [k for k, v in before.items() if after[k] > v]
        assert grew
    count = sum(v for (name, _), v in scrapes[-1].items()
                if name == "stormwatch_mesh_rtt_seconds_count")
    assert count == sum(len(v) for v in f.ok.values())


def test_openmetrics_when_the_scraper_asks_for_it(client: httpx.Client, fleet: Fleet) -> None:
    r = client.get(EXPORT, params={"kind": "mesh"}, headers={
        **fleet.headers(), "Accept": "application/openmetrics-text;version=1.0.0,"
        "text/plain;version=0.0.4;q=0.5"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/openmetrics-text")
    assert r.text.endswith("# EOF\n")
    families = {f.name: f for f in openmetrics_families(r.text)}
    assert families["stormwatch_mesh_rtt_seconds"].type == "histogram"
    assert families["stormwatch_mesh_lost"].type == "counter"
    counts = [s.value for s in families["stormwatch_mesh_rtt_seconds"].samples
              if s.name.endswith("_count")]
    assert sum(counts) == sum(len(v) for (s, d), v in fleet.ok.items() if s != d)


def test_the_delimited_protobuf_when_the_scraper_asks_for_it(client: httpx.Client,
                                                            fleet: Fleet) -> None:
    r = client.get(EXPORT, params={"kind": "mesh", "level": "pair"}, headers={
        **fleet.headers(), "Accept": "application/vnd.google.protobuf;proto=io.prometheus."
        "client.MetricFamily;encoding=delimited,text/plain;version=0.0.4;q=0.2"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/vnd.google.protobuf")
    # Two length-prefixed MetricFamily messages, each starting with its name (field 1).
    body, names = r.content, []
    while body:
        size, n = 0, 0
        while True:
            size |= (body[n] & 0x7F) << (7 * n)
            n += 1
            if not body[n - 1] & 0x80:
                break
        message, body = body[n:n + size], body[n + size:]
        assert message[0] == 0x0A
        names.append(message[2:2 + message[1]].decode())
    assert names == ["stormwatch_mesh_rtt_seconds", "stormwatch_mesh_lost_total"]


def test_credentials_and_tenants(client: httpx.Client, fleet: Fleet,
                                 make_org: Callable) -> None:
    r = client.get(EXPORT)
    assert r.status_code == 401
    r = client.get(EXPORT, headers={"Authorization": "Bearer swk_notakey"})
    assert r.status_code == 401
    agent = fleet.agents["fra1"]
    r = client.get(EXPORT, headers=agent.headers)
    assert r.status_code == 403
    other = make_org()
    r = client.get(EXPORT, params={"level": "pair"},
                   headers={"Authorization": f"Bearer {other.api_key}"})
    assert r.status_code == 200, r.text
    assert not [s for fam in text_string_to_metric_families(r.text) for s in fam.samples]
    assert fleet.prefix not in r.text and "eu-central-1" not in r.text
    r = client.get(EXPORT, params={"level": "pair"}, headers={
        "Authorization": f"Bearer {other.api_key}",
        "Accept": "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily"})
    assert r.status_code == 200 and r.content == b""


def test_a_read_scoped_key_scrapes_and_changes_nothing(server: ApiServer, client: httpx.Client,
                                                       fleet: Fleet) -> None:
    with logged_in(server, fleet.org.email, fleet.org.password) as admin:
        r = admin.post("/api/v1/api-keys", json={"name": "prometheus", "scope": "read"})
        assert r.status_code == 201, r.text
        assert r.json()["scope"] == "read"
        key = r.json()["key"]
        r = admin.post("/api/v1/api-keys", json={"name": "bad", "scope": "write"})
        assert r.status_code == 422 and "scope" in r.text
    reader = {"Authorization": f"Bearer {key}"}
    r = client.get(EXPORT, params={"kind": "mesh"}, headers=reader)
    assert r.status_code == 200, r.text
    assert "stormwatch_mesh_rtt_seconds_bucket{" in r.text
    r = client.post("/api/v1/enrollment-tokens", json={"name": "nope"}, headers=reader)
    assert r.status_code == 403 and "admin" in r.text
    keys = client.get("/api/v1/api-keys", headers=reader).json()
    assert {k["name"]: k["scope"] for k in keys}["prometheus"] == "read"
    # Keys made without a scope stay admins.
    assert {k["scope"] for k in keys if k["name"] != "prometheus"} == {"admin"}


@pytest.mark.parametrize(("params", "param", "says"), [
    ({"level": "node"}, "level", "region"),
    ({"kind": "disk"}, "kind", "mesh"),
    ({"levels": "pair"}, "levels", "levels"),
])
def test_bad_parameters_are_422_naming_them(client: httpx.Client, fleet: Fleet,
                                            params: dict[str, str], param: str,
                                            says: str) -> None:
    r = client.get(EXPORT, params=params, headers=fleet.headers())
    assert r.status_code == 422, r.text
    assert param in r.text and says in r.text


def test_pair_level_beyond_the_series_limit_is_refused_naming_it(
        client: httpx.Client, db: Engine, make_org: Callable) -> None:
    four = {**AGENTS, "iad2": ("gcp", "us-east4", "us-east4-b")}
    f = make_fleet(client, make_org, "big", four)
    ingest(client, db, f, np.random.default_rng(3), 20, lambda s, d: INTRA_US)
    r = client.get(EXPORT, params={"level": "pair", "kind": "mesh"}, headers=f.headers())
    assert r.status_code == 422, r.text
    assert "16" in r.text and f"limit of {MAX_SERIES}" in r.text
    assert "PROMETHEUS_EXPORT_MAX_SERIES" in r.text
    # The region level of the same fleet stays within it: two regions, four cells.
    assert len({k for (name, k) in f.scrape(client, kind="mesh")
                if name == "stormwatch_mesh_rtt_seconds_count"}) == 4


# --- Debian's prometheus scraping the endpoint ------------------------------------------

PROMETHEUS = shutil.which("prometheus")
PAIR = ("fra1", "iad1")


class Prometheus:
    def __init__(self, base_url: str) -> None:
        self.api = httpx.Client(base_url=base_url, timeout=30)

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        r = self.api.get("/api/v1/query", params={"query": promql,
                                                  "time": f"{at or time.time():.3f}"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def value(self, promql: str, at: float | None = None) -> float | None:
        result = self.query(promql, at)
        assert len(result) <= 1, result
        return float(result[0]["value"][1]) if result else None


@pytest.fixture
def prometheus(request: pytest.FixtureRequest, server: ApiServer, make_org: Callable,
               tmp_path: Path) -> Iterator[tuple[Prometheus, Any]]:
    """Prometheus scraping a new org's pair-level mesh series every second; with the
    parameter "native" it runs with native histograms on (and so scrapes the protobuf)."""
    native = getattr(request, "param", "") == "native"
    if PROMETHEUS is None:
        pytest.skip("no prometheus binary (scripts/bootstrap.sh test installs Debian's)")
    org = make_org()
    host, port = server.base_url.removeprefix("http://").split(":")
    config = tmp_path / "prometheus.yml"
    config.write_text(f"""global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: stormwatch
    metrics_path: {EXPORT}
    params: {{level: [pair], kind: [mesh]}}
    authorization: {{credentials: {org.api_key}}}
    static_configs: [{{targets: ["{host}:{port}"]}}]
""")
    web = free_port()
    cmd = [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
           f"--web.listen-address=127.0.0.1:{web}",
           *(["--enable-feature=native-histograms"] if native else [])]
    with serving(cmd, {}, tmp_path, tmp_path / "prometheus.log", web, ready_s=60):
        prom = Prometheus(f"http://127.0.0.1:{web}")
        wait_until("prometheus ready", 60,
                   lambda: prom.api.get("/-/ready").status_code == 200)
        try:
            yield prom, org
        finally:
            prom.api.close()


def test_prometheus_histogram_quantile_matches_stormwatch_s_p99(
        client: httpx.Client, db: Engine, prometheus: tuple[Prometheus, Any]) -> None:
    prom, org = prometheus
    f = Fleet(org, {n: enroll(client, org.enrollment_token, f"prom-{n}", provider=p, region=r,
                              zone=z, subnet=z) for n, (p, r, z) in AGENTS.items()}, "prom")
    sel = (f'src_agent="prom-{PAIR[0]}",dst_agent="prom-{PAIR[1]}"')
    count = f"stormwatch_mesh_rtt_seconds_count{{{sel}}}"
    up = "up{job='stormwatch'}"
    wait_until("a successful scrape", 60, lambda: prom.value(up) == 1.0)
    before = time.time()
    rng = np.random.default_rng(2026)
    # A first batch makes the series exist, so the increase over the window is the second's.
    ingest(client, db, f, rng, 50, median_by_place)
    first = len(f.ok[PAIR])
    wait_until("the first batch scraped", 60, lambda: prom.value(count) == first)
    second = ingest(client, db, f, rng, 3000, median_by_place, sigma=0.5)[PAIR]
    wait_until("the second batch scraped", 60, lambda: prom.value(count) == len(f.ok[PAIR]))
    at = time.time()
    window_s = math.ceil(at - before) + 2
    promql = (f"histogram_quantile(0.99, sum by (le) (increase("
              f"stormwatch_mesh_rtt_seconds_bucket{{{sel}}}[{window_s}s])))")
    answer = prom.value(promql, at)
    own = float(np.quantile(second, 0.99, method="lower")) / 1e6
    # What Stormwatch's analyses report from the rollups: the sketch's p99 (1% accuracy).
    sketched = (Sketch.from_values(second).quantile(0.99) or 0.0) / 1e6
    print(f"\nPromQL: {promql}\n  Prometheus: {answer:.6f} s   Stormwatch p99 of the same "
          f"{second.size} samples: {own:.6f} s exact, {sketched:.6f} s sketched   "
          f"(bucket width {BUCKET_RELATIVE_WIDTH:.1%})")
    assert answer is not None
    assert abs(answer / own - 1) <= BUCKET_RELATIVE_WIDTH
    assert abs(answer / sketched - 1) <= BUCKET_RELATIVE_WIDTH
    # Since the origin: every sample and every loss of the pair.
    lost = prom.value(f"stormwatch_mesh_lost_total{{{sel}}}", at)
    print(f"  lost: Prometheus {lost}, ingested {f.lost[PAIR]}")
    assert lost == f.lost[PAIR] > 0
    total = prom.value(f"histogram_quantile(0.99, stormwatch_mesh_rtt_seconds_bucket{{{sel}}})",
                       at)
    every = float(np.quantile(np.asarray(f.ok[PAIR]), 0.99, method="lower")) / 1e6
    assert total is not None and abs(total / every - 1) <= BUCKET_RELATIVE_WIDTH
    assert first > 0


@pytest.mark.parametrize("prometheus", ["native"], indirect=True)
def test_prometheus_native_histograms_from_the_protobuf_export(
        client: httpx.Client, db: Engine, prometheus: tuple[Prometheus, Any]) -> None:
    prom, org = prometheus
    f = Fleet(org, {n: enroll(client, org.enrollment_token, f"nat-{n}", provider=p, region=r,
                              zone=z, subnet=z) for n, (p, r, z) in AGENTS.items()}, "nat")
    sel = f'src_agent="nat-{PAIR[0]}",dst_agent="nat-{PAIR[1]}"'
    count = f"histogram_count(stormwatch_mesh_rtt_seconds{{{sel}}})"
    wait_until("a successful scrape", 60, lambda: prom.value("up{job='stormwatch'}") == 1.0)
    before = time.time()
    rng = np.random.default_rng(2027)
    ingest(client, db, f, rng, 50, median_by_place)
    wait_until("the first batch scraped", 60, lambda: prom.value(count) == len(f.ok[PAIR]))
    second = ingest(client, db, f, rng, 3000, median_by_place, sigma=0.5)[PAIR]
    wait_until("the second batch scraped", 60, lambda: prom.value(count) == len(f.ok[PAIR]))
    # Scraped as a native histogram: no classic bucket series exist.
    assert prom.query(f"stormwatch_mesh_rtt_seconds_bucket{{{sel}}}") == []
    at = time.time()
    promql = (f"histogram_quantile(0.99, sum(increase(stormwatch_mesh_rtt_seconds{{{sel}}}"
              f"[{math.ceil(at - before) + 2}s])))")
    answer = prom.value(promql, at)
    sketched = (Sketch.from_values(second).quantile(0.99) or 0.0) / 1e6
    own = float(np.quantile(second, 0.99, method="lower")) / 1e6
    print(f"\nPromQL: {promql}\n  Prometheus (native): {answer:.6f} s   Stormwatch p99 of the "
          f"same {second.size} samples: {own:.6f} s exact, {sketched:.6f} s sketched   "
          f"(native bucket width {NATIVE_RELATIVE_WIDTH:.1%})")
    assert answer is not None
    # A sketch bin lands whole in the native bucket of its value: one bucket each way.
    assert abs(answer / sketched - 1) <= 2 * NATIVE_RELATIVE_WIDTH
    assert abs(answer / own - 1) <= 2 * NATIVE_RELATIVE_WIDTH + 0.01
    total = prom.value(f"histogram_sum(stormwatch_mesh_rtt_seconds{{{sel}}})", at)
    assert total == pytest.approx(sum(f.ok[PAIR]) / 1e6, rel=1e-9)
    lost = prom.value(f"stormwatch_mesh_lost_total{{{sel}}}", at)
    assert lost == f.lost[PAIR] > 0
