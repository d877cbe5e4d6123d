"""A week of storage samples from several providers, posted through the ingest API, read
back as the shape of seed 000 Tables 1 and 2: median PUT/GET by provider and size, raw and
RTT-adjusted, equal to the medians of the posted data."""

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
from tests.helpers import enroll, post_batch

PROVIDERS = {"s3": 1.0, "azure": 0.4, "gcs": 1.6}  # latency scale per provider
SIZES = [1_000, 10_000, 1_000_000]
OPS = ["put", "get"]
CYCLE_S = 600  # every 10 minutes, seed 000's schedule


def _targets(db: Engine, org_id: str) -> dict[str, uuid.UUID]:
    with db.begin() as conn:
        out = {}
        for provider in PROVIDERS:
            tid = uuid.uuid4()
            conn.execute(text(
                "INSERT INTO storage_targets (id, org_id, name, provider, bucket, contents, "
                "sizes_bytes, credentials_source, assign_all) VALUES (:i, :o, :n, :p, "
                "'probe', '[\"binary\"]'::jsonb, '{}'::jsonb, 'none', true)"),
                {"i": tid, "o": org_id, "n": f"{provider}-probe", "p": provider})
            out[provider] = tid
    return out


def test_week_of_storage_medians_by_provider_and_size(client: httpx.Client,  # noqa: F811
                                                     make_org: Callable, db: Engine) -> None:
    org = make_org()
    headers = {"Authorization": f"Bearer {org.api_key}"}
    agent = enroll(client, org.enrollment_token, "storage-probe-1", provider="aws",
                   region="us-west-2", zone="us-west-2a")
    targets = _targets(db, org.org_id)
    rng = np.random.default_rng(11)
    now = datetime.now(UTC)
    start = rollups.floor_time(now - timedelta(days=7) + timedelta(minutes=30), 3600)
    cycles = int((now - timedelta(minutes=5) - start).total_seconds() // CYCLE_S)
    posted: list[dict[str, Any]] = []
    for provider, scale in PROVIDERS.items():
        for size in SIZES:
            for op in OPS:
                base_ms = scale * (150 + size / 2_000) * (1.3 if op == "put" else 1.0)
                lat = rng.lognormal(np.log(base_ms * 1000), 0.5, cycles)
                rtt = rng.lognormal(np.log(scale * 20_000), 0.3, cycles)
                failed = rng.random(cycles) < 0.01
                for i in range(cycles):
                    posted.append({"t": start + timedelta(seconds=i * CYCLE_S + 5),
                                   "provider": provider, "size": size, "op": op,
                                   "lat": None if failed[i] else int(lat[i]),
                                   "rtt": int(rtt[i]), "failed": bool(failed[i])})
    order = sorted(range(len(posted)), key=lambda i: posted[i]["t"])
    tids = list(targets.values())
    for chunk in np.array_split(np.array(order), 14):
        rows = [posted[i] for i in chunk]
        batch = {"batch_id": str(uuid.uuid4()), "agent_id": agent.agent_id, "storage": {
            "targets": [str(t) for t in tids],
            "time_us": [int(r["t"].timestamp() * 1_000_000) for r in rows],
            "target_idx": [tids.index(targets[r["provider"]]) for r in rows],
            "op": [r["op"] for r in rows], "variant": ["plain"] * len(rows),
            "content": ["binary"] * len(rows), "size_bytes": [r["size"] for r in rows],
            "stored_bytes": [r["size"] for r in rows], "copies": [1] * len(rows),
            "concurrency": [1] * len(rows), "attempt": [1] * len(rows),
            "latency_us": [r["lat"] for r in rows], "ttfb_us": [None] * len(rows),
            "rtt_us": [r["rtt"] for r in rows], "bytes_per_s": [None] * len(rows),
            "status": [3 if r["failed"] else 0 for r in rows],
            "error_class": ["server_error" if r["failed"] else None for r in rows]}}
        resp = post_batch(client, agent, batch)
        assert resp.status_code == 202, resp.text

    org_uuid = uuid.UUID(org.org_id)
    with db.begin() as conn:
        rollups.roll_up_minutes(conn, "storage", start, now, org_uuid)
        hours = [(org_uuid, start + timedelta(hours=h))
                 for h in range(int((now - start).total_seconds() // 3600) + 1)]
        rollups.roll_up_coarse(conn, "storage", 3600, hours)
        rollups.roll_up_coarse(conn, "storage", 86400, hours)

    def expected(provider: str, op: str, size: int) -> tuple[np.ndarray, np.ndarray, float]:
        rows = [r for r in posted if (r["provider"], r["op"], r["size"]) == (provider, op, size)]
        ok = [r for r in rows if not r["failed"]]
        lat = np.array([r["lat"] for r in ok], dtype=float)
        adj = np.maximum(lat - np.array([r["rtt"] for r in ok], dtype=float), 0)
        return lat, adj, (len(rows) - len(ok)) / len(rows)

    params = {"start": start.isoformat(), "end": now.isoformat()}
    for resolution, rel, method in (("raw", 1e-9, "lower"), ("1h", 0.01, "lower"),
                                    ("1d", 0.01, "lower")):
        r = client.get("/api/v1/analytics/storage/comparison", headers=headers,
                       params={**params, "resolution": resolution, "variant": "plain"})
        assert r.status_code == 200, r.text
        table = {(x["provider"], x["op"], x["size_bytes"]): x for x in r.json()["rows"]}
        assert len(table) == len(PROVIDERS) * len(SIZES) * len(OPS)
        for (provider, op, size), row in table.items():
            lat, adj, failure_rate = expected(provider, op, size)
            for field, values in (("median_latency_ms", lat), ("median_adj_latency_ms", adj)):
                want = float(np.quantile(values, 0.5, method=method)) / 1000
                assert abs(row[field] - want) / want <= rel, (resolution, field, row[field], want)
            assert row["failure_rate"] == pytest.approx(failure_rate)
            assert row["median_latency_per_bit_ns"] == pytest.approx(
                row["median_latency_ms"] * 1e6 / (size * 8))

    # Daily medians (seed 000 §5.2): each UTC day's median of the posted samples.
    r = client.get("/api/v1/analytics/storage/daily-medians", headers=headers,
                   params={**params, "resolution": "raw", "op": "get", "size_bytes": 1_000_000})
    assert r.status_code == 200, r.text
    series = {s["provider"]: s["days"] for s in r.json()["series"]}
    assert set(series) == set(PROVIDERS)
    for provider, days in series.items():
        assert len(days) in (7, 8)
        for d in days:
            day = datetime.fromisoformat(d["day"]).date()
            vals = np.array([x["lat"] for x in posted if x["provider"] == provider and
                             x["op"] == "get" and x["size"] == 1_000_000 and not x["failed"]
                             and x["t"].date() == day], dtype=float)
            assert d["median_latency_ms"] == np.quantile(vals, 0.5, method="lower") / 1000


def test_replication_std_dev_and_p90_by_number_of_copies(client: httpx.Client,  # noqa: F811
                                                         make_org: Callable, db: Engine) -> None:
    """Seed 000 Figs. 9-10: first-of-k GET latency by k, from replicated cycles."""
    org = make_org()
    headers = {"Authorization": f"Bearer {org.api_key}"}
    agent = enroll(client, org.enrollment_token, "replica-probe", provider="aws",
                   region="us-east-1", zone="us-east-1a")
    tid = _targets(db, org.org_id)["s3"]
    rng = np.random.default_rng(12)
    now = datetime.now(UTC)
    start = rollups.floor_time(now - timedelta(minutes=55), 60)
    cycles, copies, sizes = 200, 3, [1_000, 100_000]
    rows: list[dict[str, Any]] = []
    first_of: dict[tuple[int, int], list[float]] = {}
    for i in range(cycles):
        t = start + timedelta(seconds=15 * i)
        for size in sizes:
            lat = rng.lognormal(np.log(30_000 + size / 10), 0.6, copies)
            failed = rng.random(copies) < 0.03
            for j in range(copies):
                rows.append({"t": t, "op": "put", "size": size, "copies": copies, "conc": 1,
                             "lat": int(lat[j] * 1.5), "failed": False})
                rows.append({"t": t, "op": "get", "size": size, "copies": copies,
                             "conc": copies, "lat": None if failed[j] else int(lat[j]),
                             "failed": bool(failed[j])})
            for k in range(1, copies + 1):
                ok = [int(lat[j]) for j in range(k) if not failed[j]]
                rows.append({"t": t, "op": "get_first", "size": size, "copies": k, "conc": k,
                             "lat": min(ok) if ok else None, "failed": not ok})
                if ok:
                    first_of.setdefault((size, k), []).append(float(min(ok)))
    n = len(rows)
    batch = {"batch_id": str(uuid.uuid4()), "agent_id": agent.agent_id, "storage": {
        "targets": [str(tid)], "time_us": [int(r["t"].timestamp() * 1_000_000) for r in rows],
        "target_idx": [0] * n, "op": [r["op"] for r in rows], "variant": ["replicated"] * n,
        "content": ["binary"] * n, "size_bytes": [r["size"] for r in rows],
        "stored_bytes": [r["size"] for r in rows], "copies": [r["copies"] for r in rows],
        "concurrency": [r["conc"] for r in rows], "attempt": [1] * n,
        "latency_us": [r["lat"] for r in rows], "ttfb_us": [None] * n, "rtt_us": [None] * n,
        "bytes_per_s": [None] * n, "status": [3 if r["failed"] else 0 for r in rows],
        "error_class": ["server_error" if r["failed"] else None for r in rows]}}
    resp = post_batch(client, agent, batch)
    assert resp.status_code == 202, resp.text
    org_uuid = uuid.UUID(org.org_id)
    with db.begin() as conn:
        rollups.roll_up_minutes(conn, "storage", start, now, org_uuid)
        rollups.roll_up_coarse(conn, "storage", 3600, [(org_uuid, start), (org_uuid, now)])

    params = {"start": start.isoformat(), "end": now.isoformat()}
    for resolution, rel, method in (("raw", 1e-9, "lower"), ("1h", 0.01, "lower")):
        r = client.get("/api/v1/analytics/storage/replication", headers=headers,
                       params={**params, "resolution": resolution})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["source"]["resolution"] == resolution
        table = {(x["op"], x["size_bytes"], x["copies"]): x for x in body["rows"]}
        assert set(table) == ({("put", s, copies) for s in sizes}
                              | {("get", s, copies) for s in sizes}
                              | {("get_first", s, k) for s in sizes for k in (1, 2, 3)})
        for (size, k), values in first_of.items():
            row = table[("get_first", size, k)]
            v = np.array(values)
            assert row["count"] == v.size
            assert row["std_ms"] == pytest.approx(np.std(v, ddof=1) / 1000, rel=1e-9)
            assert row["mean_ms"] == pytest.approx(v.mean() / 1000, rel=1e-9)
            want = float(np.quantile(v, 0.9, method=method)) / 1000
            assert abs(row["p90_ms"] - want) / want <= rel, (resolution, size, k)
        # More copies, less spread and a lower p90 (the figures' finding, built into the data).
        for size in sizes:
            stds = [table[("get_first", size, k)]["std_ms"] for k in (1, 2, 3)]
            p90s = [table[("get_first", size, k)]["p90_ms"] for k in (1, 2, 3)]
            assert stds == sorted(stds, reverse=True) and p90s == sorted(p90s, reverse=True)

    only = client.get("/api/v1/analytics/storage/replication", headers=headers, params={
        **params, "resolution": "raw", "op": "get_first", "size_bytes": "100000"}).json()
    assert {(x["op"], x["size_bytes"]) for x in only["rows"]} == {("get_first", 100_000)}
    elsewhere = client.get("/api/v1/analytics/storage/replication", headers=headers, params={
        **params, "resolution": "raw", "regions": "eu-west-1"}).json()
    assert elsewhere["rows"] == []
