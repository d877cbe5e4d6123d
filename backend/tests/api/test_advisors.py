"""The advisors over HTTP on samples posted through the ingest API: each equation's terms
from the posted data and the catalog, the placement ranking on seed 001's RTTs, timeouts
equal to the order statistic of the posted samples, rankings with intervals, cached answers
(inline and from a real Celery worker), org prices overriding shipped ones, roles, tenants,
and bad input as 422 naming the field."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import pytest
from sqlalchemy import Engine, text

from stormwatch.core.security import hash_password
from stormwatch.services import rollups
from tests.conftest import REPO, ApiServer, Services
from tests.helpers import EnrolledAgent, enroll, now_us, post_batch

# Seed 001's round trips (ms) between Seoul, Dublin, São Paulo and Mumbai (Exp. 1 download
# columns from Seoul; Exp. 2 upload columns from Ireland; the rest symmetric to those or,
# São Paulo–Mumbai, not in the report: 300 ms).
REGIONS = {"seoul": "ap-northeast-2", "dublin": "eu-west-1", "saopaulo": "sa-east-1",
           "mumbai": "ap-south-1"}
RTT_MS = {("seoul", "dublin"): 252.1, ("seoul", "saopaulo"): 298.2, ("seoul", "mumbai"): 163.4,
          ("dublin", "saopaulo"): 185.8, ("dublin", "mumbai"): 122.1,
          ("saopaulo", "mumbai"): 300.0}
INTRA_MS = 1.0
ROUNDS = 400
STEP_US = 2_000_000  # a round every 2 s: 400 rounds span 13 minutes
SIZES = [100_000, 1_000_000, 10_000_000]
PLAIN_BASE_US = 20_000
PER_BYTE_US = 0.1  # 10 MB/s link: 0.1 µs per byte
COMPRESS_US_PER_BYTE = {"put": 0.02, "get": 0.005}
STORED_RATIO = 0.76


def rtt_ms(a: str, b: str) -> float:
    ra, rb = a.split("-")[0], b.split("-")[0]
    if ra == rb:
        return INTRA_MS
    return RTT_MS.get((ra, rb)) or RTT_MS[(rb, ra)]


@dataclass
class Seeded:
    org: Any
    agents: dict[str, EnrolledAgent]
    pair_values: np.ndarray  # seoul-a → dublin-a values posted (µs), losses excluded
    pair_losses: int
    quorum_values: np.ndarray
    target: str
    bare_target: str
    replicated: dict[int, np.ndarray]  # copies → first-of-k latencies (µs)
    raw_range: dict[str, str]  # under 3 h: answered from raw samples, exactly

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.org.api_key}"}


def _mesh(src: EnrolledAgent, peers: list[EnrolledAgent], rng: np.random.Generator,
          t0: int, special: dict[str, np.ndarray]) -> dict[str, Any]:
    cols: dict[str, list[Any]] = {"time_us": [], "peer_idx": [], "round": [],
                                  "payload_bytes": [], "rtt_us": [], "status": []}
    for i, p in enumerate(peers):
        if p.name in special:
            vals = special[p.name]
        elif p.name == src.name:
            vals = np.full(ROUNDS, 55.0)
        else:
            vals = rng.lognormal(np.log(rtt_ms(src.name, p.name) * 1000), 0.02, ROUNDS)
        for r in range(ROUNDS):
            cols["time_us"].append(t0 + r * STEP_US)
            cols["peer_idx"].append(i)
            cols["round"].append(r)
            cols["payload_bytes"].append(1024)
            v = vals[r]
            cols["rtt_us"].append(None if np.isnan(v) else int(v))
            cols["status"].append(1 if np.isnan(v) else 0)
    return {"batch_id": str(uuid.uuid4()), "agent_id": src.agent_id,
            "mesh": {"peers": [p.agent_id for p in peers], **cols}}


def _storage(agent: EnrolledAgent, target: str, t0: int, rows: list[dict[str, Any]]
             ) -> dict[str, Any]:
    keys = ["op", "variant", "content", "size_bytes", "stored_bytes", "copies",
            "concurrency", "latency_us"]
    n = len(rows)
    out: dict[str, Any] = {k: [r[k] for r in rows] for k in keys}
    out.update(targets=[target], time_us=[t0 + i * 1000 for i in range(n)],
               target_idx=[0] * n, attempt=[1] * n, ttfb_us=[None] * n, rtt_us=[1000] * n,
               bytes_per_s=[None] * n, status=[0] * n, error_class=[None] * n)
    return {"batch_id": str(uuid.uuid4()), "agent_id": agent.agent_id, "storage": out}


def _target(client: httpx.Client, headers: dict[str, str], name: str) -> str:
    r = client.post("/api/v1/storage-targets", headers=headers, json={
        "name": name, "provider": "s3", "region": "us-east-1", "bucket": "probe",
        "endpoint": f"https://{name}.storage.invalid", "credentials": {"source": "none"},
        "contents": ["text"], "assign_all": True})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


@pytest.fixture(scope="module")
def client(api_server: ApiServer) -> Iterator[httpx.Client]:
    with api_server.client() as c:
        yield c


@pytest.fixture(scope="module")
def seeded(client: httpx.Client, make_org: Callable, db: Engine) -> Seeded:
    org = make_org()
    agents: dict[str, EnrolledAgent] = {}
    for name, region in [("seoul-a", "seoul"), ("seoul-b", "seoul"), ("dublin-a", "dublin"),
                         ("saopaulo-a", "saopaulo"), ("mumbai-a", "mumbai")]:
        agents[name] = enroll(client, org.enrollment_token, name, provider="aws",
                              region=REGIONS[region], zone=REGIONS[region] + "a",
                              subnet=f"sub-{name}")
    # An agent that never measured: its region is known but has no data.
    agents["virginia-a"] = enroll(client, org.enrollment_token, "virginia-a", provider="aws",
                                  region="us-east-1", zone="us-east-1a", subnet="sub-v")
    rng = np.random.default_rng(20261123)
    t0 = now_us() - ROUNDS * STEP_US - 60_000_000
    pair = np.floor(rng.lognormal(np.log(252_100), 0.05, ROUNDS))
    lost = rng.choice(ROUNDS, 3, replace=False)
    pair[lost] = np.nan
    meshing = [a for n, a in agents.items() if n != "virginia-a"]
    for a in meshing:
        special = {"dublin-a": pair} if a.name == "seoul-a" else {}
        r = post_batch(client, a, _mesh(a, meshing, rng, t0, special))
        assert r.status_code == 202, r.text
    # Quorum Q2/3 latencies of seoul-a: slower than any single intra-region link.
    q = np.round(rng.lognormal(np.log(5_000), 0.3, ROUNDS))
    r = post_batch(client, agents["seoul-a"], {
        "batch_id": str(uuid.uuid4()), "agent_id": agents["seoul-a"].agent_id, "quorum": {
            "groups": ["seoul-majority"], "time_us": [t0 + i * STEP_US for i in range(ROUNDS)],
            "group_idx": [0] * ROUNDS, "round": list(range(ROUNDS)), "k": [2] * ROUNDS,
            "n": [3] * ROUNDS, "latency_us": [int(v) for v in q], "status": [0] * ROUNDS}})
    assert r.status_code == 202, r.text
    headers = {"Authorization": f"Bearer {org.api_key}"}
    target = _target(client, headers, "text-store")
    bare = _target(client, headers, "bare-store")
    rows: list[dict[str, Any]] = []
    for size in SIZES:
        stored = int(size * STORED_RATIO)
        for op in ("put", "get"):
            plain = PLAIN_BASE_US + size * PER_BYTE_US
            gz = PLAIN_BASE_US + size * COMPRESS_US_PER_BYTE[op] + stored * PER_BYTE_US
            for _ in range(5):
                rows.append({"op": op, "variant": "plain", "content": "text",
                             "size_bytes": size, "stored_bytes": size, "copies": 1,
                             "concurrency": 1, "latency_us": int(plain)})
                rows.append({"op": op, "variant": "gzip9", "content": "text",
                             "size_bytes": size, "stored_bytes": stored, "copies": 1,
                             "concurrency": 1, "latency_us": int(gz)})
    # Replication, 1 MB, F = 3: first of k of three independent lognormal copies.
    copies = rng.lognormal(np.log(80_000), 0.5, (200, 3))
    replicated = {k: np.round(copies[:, :k].min(axis=1)) for k in (1, 2, 3)}
    for k, vals in replicated.items():
        for v in vals:
            rows.append({"op": "get_first", "variant": "replicated", "content": "binary",
                         "size_bytes": 1_000_000, "stored_bytes": 1_000_000, "copies": k,
                         "concurrency": 3, "latency_us": int(v)})
    r = post_batch(client, agents["seoul-a"], _storage(agents["seoul-a"], target, t0, rows))
    assert r.status_code == 202, r.text
    plain_only = [x for x in rows if x["variant"] == "plain"]
    r = post_batch(client, agents["seoul-a"], _storage(agents["seoul-a"], bare, t0, plain_only))
    assert r.status_code == 202, r.text
    # What the worker's rollup passes do: the advisors' default ranges read rollups.
    org_id = uuid.UUID(org.org_id)
    start = rollups.floor_time(datetime.fromtimestamp(t0 / 1e6, UTC), 3600)
    end = datetime.now(UTC) + timedelta(minutes=1)
    with db.begin() as conn:
        for kind in ("mesh", "quorum", "storage"):
            rollups.roll_up_minutes(conn, kind, start, end, org_id)
            hours = [(org_id, start + timedelta(hours=h))
                     for h in range(int((end - start).total_seconds() // 3600) + 1)]
            fives = [(org_id, start + timedelta(minutes=5 * i))
                     for i in range(int((end - start).total_seconds() // 300) + 1)]
            rollups.roll_up_coarse(conn, kind, 300, fives)
            rollups.roll_up_coarse(conn, kind, 3600, hours)
            rollups.roll_up_coarse(conn, kind, 86400, hours)
    raw_range = {"start": (start - timedelta(minutes=1)).isoformat(), "end": end.isoformat()}
    return Seeded(org, agents, pair[~np.isnan(pair)], len(lost), q, target, bare, replicated,
                  raw_range)


def _ok(r: httpx.Response) -> dict[str, Any]:
    assert r.status_code == 200, r.text
    return r.json()


def _loc(r: httpx.Response) -> list[Any]:
    assert r.status_code == 422, r.text
    return r.json()["detail"][0]["loc"]


# --- compression -----------------------------------------------------------------------------


def test_compression_terms_come_from_the_measured_gzip_variant_and_the_catalog(
        client: httpx.Client, seeded: Seeded) -> None:
    body = _ok(client.post("/api/v1/advisors/compression", headers=seeded.headers,
                           json={"target_id": seeded.target}))
    assert body["status"] == "ok"
    assert body["prices"]["c_b_per_gb"] == 0.09  # aws us-east-1 internet egress, shipped
    assert body["prices"]["c_cpu_per_hour"] == 0.048
    rows = {r["size_bytes"]: r for r in body["sizes"]}
    assert set(rows) == set(SIZES)
    for size, row in rows.items():
        # t_c is what gzip costs beyond the plain transfer: 0.025 µs per original byte.
        t_c = size * sum(COMPRESS_US_PER_BYTE.values()) / 1e6
        assert row["t_c_s"] == pytest.approx(t_c, rel=0.03)
        delta = size - int(size * STORED_RATIO)
        assert row["delta_bytes"] == pytest.approx(delta)
        assert row["break_even_bps"] == pytest.approx(8 * delta / t_c, rel=0.03)
        terms = row["terms"]
        assert terms["lhs_usd"] == pytest.approx(row["t_c_s"] * 0.048 / 3600)
        assert terms["rhs_usd"] == pytest.approx(delta / 1e9 * (0.09 + 0.023))
        assert terms["pays"] is (terms["lhs_usd"] < terms["rhs_usd"])
        assert row["plain_get_ms"] == pytest.approx((PLAIN_BASE_US + size * PER_BYTE_US) / 1000,
                                                    rel=0.011)
    # 0.24 × 8 bit / 0.025 µs = 76.8 Mbit/s for every size: compression's latency break-even.
    assert rows[1_000_000]["break_even_bps"] == pytest.approx(76.8e6, rel=0.03)


def test_an_org_price_overrides_the_shipped_one_until_it_is_cleared(
        client: httpx.Client, seeded: Seeded) -> None:
    url = "/api/v1/pricing/aws/us-east-1/egress_internet_per_gb"
    fig = _ok(client.put(url, headers=seeded.headers,
                         json={"price_usd": 0.05, "source": "our contract, 2026-10"}))
    assert fig["origin"] == "org" and fig["shipped_price_usd"] == 0.09
    body = _ok(client.post("/api/v1/advisors/compression", headers=seeded.headers,
                           json={"target_id": seeded.target}))
    assert body["prices"]["c_b_per_gb"] == 0.05
    row = body["sizes"][0]
    assert row["terms"]["rhs_usd"] == pytest.approx(row["delta_bytes"] / 1e9 * (0.05 + 0.023))
    catalog = _ok(client.get("/api/v1/pricing", headers=seeded.headers))
    mine = [f for f in catalog["figures"] if f["origin"] == "org"]
    assert [(f["provider"], f["region"], f["item"]) for f in mine] == [
        ("aws", "us-east-1", "egress_internet_per_gb")]
    assert all(f["source"] for f in catalog["figures"])
    assert catalog["catalog_date"] and "check" in catalog["note"]
    assert client.delete(url, headers=seeded.headers).status_code == 204
    body = _ok(client.post("/api/v1/advisors/compression", headers=seeded.headers,
                           json={"target_id": seeded.target}))
    assert body["prices"]["c_b_per_gb"] == 0.09
    assert client.delete(url, headers=seeded.headers).status_code == 404


def test_setting_and_clearing_one_price_at_once_audit_one_create_and_never_answer_500(
        api_server: ApiServer, make_org: Callable) -> None:
    """Twelve first PUTs of one figure at once make one price.create entry (each read
    'nothing before' without the row lock); interleaved with deletes, each call answers 200,
    204 or 404."""
    org = make_org()
    headers = {"Authorization": f"Bearer {org.api_key}"}
    url = "/api/v1/pricing/aws/us-east-1/put_per_1k"

    def call(i: int) -> int:
        with api_server.client() as c:
            if i < 0:
                return c.delete(url, headers=headers).status_code
            return c.put(url, headers=headers, json={"price_usd": 0.005 + i / 1e4,
                                                     "source": f"contract {i}"}).status_code

    with ThreadPoolExecutor(12) as pool:
        assert list(pool.map(call, range(12))) == [200] * 12
    with api_server.client() as c:
        entries = c.get("/api/v1/audit", headers=headers,
                        params={"target_type": "price"}).json()["items"]
    assert sorted(e["action"] for e in entries) == ["price.create"] + ["price.update"] * 11
    with ThreadPoolExecutor(12) as pool:
        codes = list(pool.map(call, [i if i % 2 else -1 for i in range(48)]))
    assert set(codes) <= {200, 204, 404}, codes


@pytest.mark.parametrize(("path", "body", "loc"), [
    ("aws/us-east-1/put_per_1k", {"price_usd": -1, "source": "x"}, ["body", "price_usd"]),
    ("aws/us-east-1/put_per_1k", {"source": "x"}, ["body", "price_usd"]),
    ("aws/us-east-1/put_per_1k", {"price_usd": 1}, ["body", "source"]),
    ("aws/mars-north-1/put_per_1k", {"price_usd": 1, "source": "x"}, ["path", "region"]),
    ("aws/us-east-1/coffee_per_cup", {"price_usd": 1, "source": "x"}, ["path", "item"]),
])
def test_bad_prices_are_refused_naming_the_field(client: httpx.Client, seeded: Seeded,
                                                 path: str, body: dict, loc: list) -> None:
    assert _loc(client.put(f"/api/v1/pricing/{path}", headers=seeded.headers, json=body)) == loc


def test_compression_without_a_gzip_variant_says_what_is_missing(
        client: httpx.Client, seeded: Seeded) -> None:
    body = _ok(client.post("/api/v1/advisors/compression", headers=seeded.headers,
                           json={"target_id": seeded.bare_target}))
    assert body["status"] == "insufficient_data"
    assert any("gzip9 samples" in m for m in body["missing"])


# --- replication -----------------------------------------------------------------------------


def test_replication_terms_use_the_std_dev_drop_from_one_to_f_copies(
        client: httpx.Client, seeded: Seeded) -> None:
    body = _ok(client.post("/api/v1/advisors/replication", headers=seeded.headers, json={
        "target_id": seeded.target, "gets_per_month": 1e6, "value_per_ms_usd": 1e-6,
        **seeded.raw_range}))
    assert body["status"] == "ok"
    (row,) = body["sizes"]
    assert row["copies"] == 3
    by_k = {b["copies"]: b for b in row["by_copies"]}
    for k, vals in seeded.replicated.items():
        assert by_k[k]["std_ms"] == pytest.approx(np.std(vals, ddof=1) / 1000, rel=1e-6)
        assert by_k[k]["p90_ms"] == pytest.approx(np.quantile(vals, 0.9) / 1000, rel=0.011)
    # Seed 000 Figs. 9-10: both fall with more copies.
    assert by_k[1]["std_ms"] > by_k[2]["std_ms"] > by_k[3]["std_ms"]
    assert by_k[1]["p90_ms"] > by_k[3]["p90_ms"]
    dv = (np.std(seeded.replicated[1], ddof=1) - np.std(seeded.replicated[3], ddof=1)) / 1000
    t = row["terms"]
    assert t["delta_v_ms"] == pytest.approx(dv)
    assert t["lhs_usd"] == pytest.approx(1e6 * 1e-6 * dv)
    # 3 × 0.001 GB × (0.023 + 1e6 × 0.0004/1000 / 0.001) = 3 × 0.001 × 400.023
    assert t["rhs_usd"] == pytest.approx(3 * 0.001 * (0.023 + 400))
    assert t["pays"] is (t["lhs_usd"] > t["rhs_usd"])


def test_replication_refuses_negative_values_and_another_orgs_target(
        client: httpx.Client, seeded: Seeded, make_org: Callable) -> None:
    assert _loc(client.post("/api/v1/advisors/replication", headers=seeded.headers, json={
        "target_id": seeded.target, "gets_per_month": -1, "value_per_ms_usd": 1})) == [
        "body", "gets_per_month"]
    other = make_org()
    r = client.post("/api/v1/advisors/replication",
                    headers={"Authorization": f"Bearer {other.api_key}"},
                    json={"target_id": seeded.target, "gets_per_month": 1,
                          "value_per_ms_usd": 1})
    assert _loc(r) == ["body", "target_id"]


# --- placement -------------------------------------------------------------------------------

SEOUL_RUN = {"regions": list(REGIONS.values()), "uploader": "ap-northeast-2",
             "downloader": "ap-northeast-2", "file_bytes": 1 << 20, "block_bytes": 64 << 10,
             "trials": 4000}


def test_placement_on_measured_seoul_rtts_ranks_the_policies_as_seed_001_and_caches(
        client: httpx.Client, seeded: Seeded) -> None:
    # A pinned range: a default one ends at "now" to the minute, and a minute boundary
    # between the two requests would make the second a new question.
    run = {**SEOUL_RUN, **seeded.raw_range}
    body = _ok(client.post("/api/v1/advisors/placement", headers=seeded.headers, json=run))
    assert body["status"] == "ok" and body["computed_by"] == "api" and not body["cached"]
    down = {p["policy"]: p["download_ms"] for p in body["result"]["policies"]}
    local = [down["local"], down["local_closest"], down["local_farthest"]]
    assert down["random"] > down["two_random"] > max(local)
    # The matrix behind it is the measured one.
    i, j = SEOUL_RUN["regions"].index("ap-northeast-2"), SEOUL_RUN["regions"].index("eu-west-1")
    assert body["data"]["rtt_mean_ms"][i][j] == pytest.approx(252.1, rel=0.02)
    again = _ok(client.post("/api/v1/advisors/placement", headers=seeded.headers, json=run))
    assert again["cached"] is True and again["result"] == body["result"]


def test_placement_on_measured_rtts_gives_seed_001s_ireland_to_seoul_ordering(
        client: httpx.Client, seeded: Seeded) -> None:
    """§3: every block in flight, the farthest decides; one after another, it does not."""
    run = {**SEOUL_RUN, **seeded.raw_range, "uploader": "eu-west-1"}

    def slowest_first(body: dict[str, Any]) -> list[str]:
        return [p["policy"] for p in sorted(body["result"]["policies"],
                                            key=lambda p: -p["download_ms"])]

    body = _ok(client.post("/api/v1/advisors/placement", headers=seeded.headers, json=run))
    assert body["result"]["concurrency"] == 16
    assert slowest_first(body) == ["random", "local", "two_random", "local_closest",
                                   "local_farthest"]
    one_by_one = _ok(client.post("/api/v1/advisors/placement", headers=seeded.headers,
                                 json={**run, "concurrency": 1}))
    assert one_by_one["cached"] is False and one_by_one["result"]["concurrency"] == 1
    down = {p["policy"]: p["download_ms"] for p in one_by_one["result"]["policies"]}
    assert down["random"] < down["local"]


@pytest.mark.parametrize(("change", "loc"), [
    ({"concurrency": 0}, ["body", "concurrency"]),
    ({"block_bytes": 2 << 20}, ["body", "block_bytes"]),
    ({"uploader": "eu-central-1"}, ["body", "uploader"]),
    ({"regions": ["ap-northeast-2", "mars-north-1"]}, ["body", "regions"]),
    ({"regions": ["ap-northeast-2"]}, ["body", "regions"]),
    ({"trials": 100_000, "block_bytes": 1024}, ["body", "trials"]),
])
def test_bad_placement_input_is_refused_naming_the_field(
        client: httpx.Client, seeded: Seeded, change: dict, loc: list) -> None:
    run = {**SEOUL_RUN, **change}
    if "regions" in change:
        run["uploader"] = run["downloader"] = "ap-northeast-2"
    assert _loc(client.post("/api/v1/advisors/placement", headers=seeded.headers,
                            json=run)) == loc


def test_placement_with_an_unmeasured_region_says_which_pairs_are_missing(
        client: httpx.Client, seeded: Seeded) -> None:
    body = _ok(client.post("/api/v1/advisors/placement", headers=seeded.headers, json={
        **SEOUL_RUN, "regions": ["ap-northeast-2", "us-east-1"]}))
    assert body["status"] == "insufficient_data" and body["result"] is None
    assert "mesh RTT samples ap-northeast-2 → us-east-1" in body["missing"]


@pytest.fixture(scope="module")
def worker(services: Services) -> Iterator[subprocess.Popen[bytes]]:
    log = open(services.tmp / "worker-advisors.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "stormwatch.worker.app", "worker",
         "--pool", "solo", "--loglevel", "warning", "-Q", "celery"],
        env={**os.environ, "DATABASE_URL": services.database_url,
             "REDIS_URL": services.redis_url, "PYTHONPATH": str(REPO / "backend")},
        cwd=REPO / "backend", stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    yield proc
    proc.terminate()
    proc.wait(30)
    log.close()


def test_a_large_placement_run_is_computed_by_the_worker_and_polled(
        client: httpx.Client, seeded: Seeded, worker: subprocess.Popen[bytes],
        db: Engine) -> None:
    # 40 000 × 16 × 2 cells: over the inline bound; a pinned range, so the repeat below is
    # the same input however long the worker takes.
    run = {**SEOUL_RUN, **seeded.raw_range, "trials": 40_000}
    r = client.post("/api/v1/advisors/placement", headers=seeded.headers, json=run)
    assert r.status_code == 202, r.text
    h = r.json()["input_hash"]
    assert r.json()["status"] == "pending"
    deadline = time.monotonic() + 120
    while True:
        r = client.get(f"/api/v1/advisors/placement/{h}", headers=seeded.headers)
        if r.status_code == 200 or time.monotonic() > deadline:
            break
        assert r.status_code == 202, r.text
        time.sleep(0.2)
    body = _ok(r)
    assert body["status"] == "ok" and body["computed_by"] == "worker"
    assert body["result"]["trials"] == 40_000
    down = {p["policy"]: p["download_ms"] for p in body["result"]["policies"]}
    assert down["random"] > down["two_random"] > down["local"]
    with db.connect() as c:
        assert c.execute(text("SELECT status FROM advisor_results WHERE input_hash = :h"),
                         {"h": h}).scalar() == "done"
    # The same input again is the cached answer, not a second job.
    again = client.post("/api/v1/advisors/placement", headers=seeded.headers, json=run)
    assert again.status_code == 200 and again.json()["cached"] is True


# --- timeouts --------------------------------------------------------------------------------


def _exact_timeout(values: np.ndarray, losses: int, p: float) -> float:
    n = values.size + losses
    allowed = p * n - losses
    v = np.sort(values)
    return float(v[int(np.ceil(v.size - allowed)) - 1])


def test_a_pair_timeout_is_the_order_statistic_of_its_samples_with_losses_counted(
        client: httpx.Client, seeded: Seeded) -> None:
    # 36 msg/h tolerated 1/h: p = 1/36; 400 samples (3 lost) → 11.1 beyond T, enough.
    body = _ok(client.post("/api/v1/advisors/timeout", headers=seeded.headers, json={
        "scope": "pair", "src": seeded.agents["seoul-a"].agent_id,
        "dst": seeded.agents["dublin-a"].agent_id, "msg_rate_per_s": 0.01,
        "false_timeouts_per_hour": 1, **seeded.raw_range}))
    p = 1 / 36
    assert body["status"] == "ok" and body["exact"] is True
    assert body["samples"] == ROUNDS and body["losses"] == seeded.pair_losses
    assert body["timeout_us"] == _exact_timeout(seeded.pair_values, seeded.pair_losses, p)
    assert body["warning"] is None
    assert len(body["by_hour"]) == 24
    assert sum(h["samples"] for h in body["by_hour"]) == ROUNDS


def test_a_pair_timeout_at_a_high_message_rate_warns_that_the_tail_is_unsupported(
        client: httpx.Client, seeded: Seeded) -> None:
    body = _ok(client.post("/api/v1/advisors/timeout", headers=seeded.headers, json={
        "scope": "pair", "src": seeded.agents["seoul-a"].agent_id,
        "dst": seeded.agents["dublin-a"].agent_id, "msg_rate_per_s": 500,
        "false_timeouts_per_hour": 1}))
    # p = 1/1.8 M: with 3 losses in 400 no timeout can meet it, and no amount of data will;
    # the answer gives the best the data supports, both ways.
    assert body["achievable"] is False and "loss rate" in body["warning"]
    assert body["samples_needed"] is None
    best = body["best_probability"]
    assert best == pytest.approx((3 + 10) / body["samples"])
    assert body["best_false_timeouts_per_hour"] == pytest.approx(best * 500 * 3600)
    assert body["best_msg_rate_per_s"] == pytest.approx(1 / 3600 / best)
    assert body["best_timeout_ms"] > 0
    body = _ok(client.post("/api/v1/advisors/timeout", headers=seeded.headers, json={
        "scope": "pair", "src": seeded.agents["seoul-a"].agent_id,
        "dst": seeded.agents["mumbai-a"].agent_id, "msg_rate_per_s": 500,
        "false_timeouts_per_hour": 1}))
    assert body["samples_needed"] == 18_000_000
    assert "18000000 samples" in body["warning"]
    # At the samples' own rate, that many take far longer than the range they came from.
    assert body["time_needed_s"] > 1000 * 3600


def test_a_quorum_timeout_comes_from_quorum_latency_not_single_links(
        client: httpx.Client, seeded: Seeded) -> None:
    body = _ok(client.post("/api/v1/advisors/timeout", headers=seeded.headers, json={
        "scope": "quorum", "group_name": "seoul-majority", "msg_rate_per_s": 0.01,
        "false_timeouts_per_hour": 1, **seeded.raw_range}))
    assert body["samples"] == ROUNDS
    want = _exact_timeout(seeded.quorum_values, 0, 1 / 36)
    assert body["timeout_us"] == (want if body["exact"] else pytest.approx(want, rel=0.011))
    # Its members' single links inside Seoul are ~1 ms: the quorum's T is several times that.
    link = _ok(client.post("/api/v1/advisors/timeout", headers=seeded.headers, json={
        "scope": "pair", "src": seeded.agents["seoul-a"].agent_id,
        "dst": seeded.agents["seoul-b"].agent_id, "msg_rate_per_s": 0.01,
        "false_timeouts_per_hour": 1, **seeded.raw_range}))
    assert body["timeout_us"] > 5 * link["timeout_us"]


def test_a_tolerated_rate_above_the_message_rate_is_a_422_naming_it(
        client: httpx.Client, seeded: Seeded) -> None:
    assert _loc(client.post("/api/v1/advisors/timeout", headers=seeded.headers, json={
        "scope": "topology_class", "topology_class": "cross_region", "msg_rate_per_s": 0.1,
        "false_timeouts_per_hour": 3600})) == ["body", "false_timeouts_per_hour"]
    other = str(uuid.uuid4())
    assert _loc(client.post("/api/v1/advisors/timeout", headers=seeded.headers, json={
        "scope": "pair", "src": other, "dst": seeded.agents["dublin-a"].agent_id,
        "msg_rate_per_s": 1, "false_timeouts_per_hour": 1})) == ["body", "src"]


# --- rankings --------------------------------------------------------------------------------


def test_region_pairs_rank_by_median_with_intervals_around_each_figure(
        client: httpx.Client, seeded: Seeded) -> None:
    body = _ok(client.get("/api/v1/advisors/rankings", headers=seeded.headers,
                          params={"kind": "mesh", "level": "region_pair", "stat": "p50"}))
    rows = [r for r in body["rows"] if r["rank"] is not None]
    values = [r["value"] for r in rows]
    assert values == sorted(values)
    assert rows[0]["key"].endswith("→ aws/ap-northeast-2") and rows[0]["value"] < 2
    for r in rows:
        assert r["ci_low"] <= r["value"] <= r["ci_high"]
        assert r["ci_method"] in ("order_statistic", "order_statistic_sketch")
    top = max(rows, key=lambda r: r["value"])
    assert top["value"] == pytest.approx(300, rel=0.02)
    assert _loc(client.get("/api/v1/advisors/rankings", headers=seeded.headers,
                           params={"stat": "p150"})) == ["query", "stat"]


def test_storage_rankings_never_mix_object_sizes_in_one_row(
        client: httpx.Client, seeded: Seeded) -> None:
    params = {"kind": "storage", "level": "pair", "stat": "p50", "op": "get", **seeded.raw_range}
    body = _ok(client.get("/api/v1/advisors/rankings", headers=seeded.headers, params=params))
    keys = sorted(r["key"] for r in body["rows"])
    assert keys == sorted(f"{t}, {s}" for t in ("text-store", "bare-store")
                          for s in ("100 kB", "1 MB", "10 MB")), keys
    # The 100 kB GETs are the fastest rows: each row holds one size's samples only.
    assert body["rows"][0]["key"].endswith("100 kB")
    assert body["rows"][0]["value"] == pytest.approx((PLAIN_BASE_US + 100_000 * PER_BYTE_US)
                                                     / 1000, rel=0.02)
    one = _ok(client.get("/api/v1/advisors/rankings", headers=seeded.headers,
                         params={**params, "size_bytes": 1_000_000}))
    assert sorted(r["key"] for r in one["rows"]) == ["bare-store", "text-store"]


# --- roles -----------------------------------------------------------------------------------


def test_viewers_run_advisors_but_only_admins_change_prices(
        client: httpx.Client, seeded: Seeded, db: Engine, api_server: ApiServer) -> None:
    email = f"viewer-{uuid.uuid4().hex[:8]}@example.test"
    with db.begin() as c:
        c.execute(text("INSERT INTO users (id, org_id, email, password_hash, role) VALUES "
                       "(:i, :o, :e, :p, 'viewer')"),
                  {"i": uuid.uuid4(), "o": seeded.org.org_id, "e": email,
                   "p": hash_password("correct horse battery staple")})
    with api_server.client() as viewer:
        r = viewer.post("/api/v1/auth/login", json={"email": email,
                                                    "password": "correct horse battery staple"})
        assert r.status_code == 200, r.text
        csrf = {"X-CSRF-Token": viewer.cookies["sw_csrf"]}
        assert viewer.get("/api/v1/pricing").status_code == 200
        r = viewer.post("/api/v1/advisors/timeout", headers=csrf, json={
            "scope": "topology_class", "topology_class": "cross_region",
            "msg_rate_per_s": 1, "false_timeouts_per_hour": 1})
        assert r.status_code == 200, r.text
        r = viewer.put("/api/v1/pricing/aws/us-east-1/put_per_1k", headers=csrf,
                       json={"price_usd": 1, "source": "x"})
        assert r.status_code == 403
        assert viewer.delete("/api/v1/pricing/aws/us-east-1/put_per_1k",
                             headers=csrf).status_code == 403


def test_a_topology_class_timeout_over_the_default_day_reads_rollups(
        client: httpx.Client, seeded: Seeded) -> None:
    body = _ok(client.post("/api/v1/advisors/timeout", headers=seeded.headers, json={
        "scope": "topology_class", "topology_class": "cross_region", "msg_rate_per_s": 1,
        "false_timeouts_per_hour": 36}))
    assert body["status"] == "ok" and body["exact"] is False
    # 5 agents in 4 regions: 18 cross-region links of 400 rounds.
    assert body["samples"] == 18 * ROUNDS
    assert body["warning"] is None and body["timeout_ms"] > 100
