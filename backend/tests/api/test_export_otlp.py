"""The OTLP/HTTP export: an org points it at its collector, and the pushes (the worker's
and the test button's) carry its measured distributions as exponential histograms and loss
counters, decoded here with the OpenTelemetry protobuf definitions by a local receiver."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import httpx
import numpy as np
import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.metrics.v1 import metrics_pb2 as pb
from sqlalchemy import Engine, text

from stormwatch.core.egress import Policy
from stormwatch.services.export import otlp
from stormwatch.services.export.prometheus import export_origin
from stormwatch.services.export.protobuf import NATIVE_RELATIVE_WIDTH
from tests.alert_helpers import sessionmaker_for
from tests.api.conftest import logged_in
from tests.api.test_export_prometheus import AGENTS, Fleet, ingest, make_fleet, median_by_place
from tests.conftest import LOOPBACK_ALLOWED, ApiServer, Services
from tests.notifications.servers import HttpReceiver

OTLP = "/api/v1/export/otlp"
BASE = 2 ** (2.0 ** -5)


@pytest.fixture(scope="module")
def server(services: Services) -> Iterator[ApiServer]:
    s = ApiServer(services, {"EGRESS_ALLOW": LOOPBACK_ALLOWED})
    s.start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def fleet(client: httpx.Client, db: Engine, make_org: Callable) -> Fleet:
    f = make_fleet(client, make_org, "ot", AGENTS)
    ingest(client, db, f, np.random.default_rng(7), 300, median_by_place)
    return f


@pytest.fixture
def collector() -> Iterator[HttpReceiver]:
    with HttpReceiver() as r:
        r.default = (200, ExportMetricsServiceResponse().SerializeToString())
        yield r


def base_url(r: HttpReceiver) -> str:
    return f"http://127.0.0.1:{r.port}"


def decoded(body: bytes) -> dict[str, pb.Metric]:
    req = ExportMetricsServiceRequest.FromString(body)
    (rm,) = req.resource_metrics
    (sm,) = rm.scope_metrics
    return {m.name: m for m in sm.metrics}


def attrs(point: pb.ExponentialHistogramDataPoint | pb.NumberDataPoint) -> dict[str, str]:
    return {kv.key: kv.value.string_value for kv in point.attributes}


def quantile(point: pb.ExponentialHistogramDataPoint, q: float) -> float:
    """The upper boundary of the bucket holding the q-th sample (what a reader would say)."""
    rank = q * point.count
    seen = point.zero_count
    for j, c in enumerate(point.positive.bucket_counts):
        seen += c
        if seen >= rank:
            return float(BASE ** (point.positive.offset + j + 1))
    raise AssertionError("rank beyond the buckets")


def test_a_push_carries_every_sample_in_its_buckets_and_every_loss_in_its_counter(
        client: httpx.Client, fleet: Fleet, collector: HttpReceiver) -> None:
    r = client.put(OTLP, headers=fleet.headers(), json={
        "endpoint_url": base_url(collector), "level": "pair", "kinds": ["mesh"],
        "headers": {"x-api-key": "collector-key-1"}})
    assert r.status_code == 200, r.text
    assert r.json()["header_names"] == ["x-api-key"] and "collector-key-1" not in r.text
    r = client.post(OTLP + "/test", headers=fleet.headers())
    assert r.status_code == 200, r.text
    assert r.json()["ok"] is True and r.json()["status"] == 200, r.json()
    (req,) = collector.requests
    assert req.path == "/v1/metrics"
    headers = {k.lower(): v for k, v in req.headers.items()}
    assert headers["content-type"] == "application/x-protobuf"
    assert headers["x-api-key"] == "collector-key-1"
    metrics = decoded(req.body)
    assert set(metrics) == {"stormwatch.mesh.rtt", "stormwatch.mesh.lost"}
    rtt, lost = metrics["stormwatch.mesh.rtt"], metrics["stormwatch.mesh.lost"]
    assert rtt.unit == "s"
    hist = rtt.exponential_histogram
    assert hist.aggregation_temporality == pb.AGGREGATION_TEMPORALITY_CUMULATIVE
    assert lost.sum.is_monotonic
    origin_ns = int(export_origin(datetime.now(UTC)).timestamp()) * 10**9
    points = {(attrs(p)["src_agent"], attrs(p)["dst_agent"]): p for p in hist.data_points}
    losses = {(attrs(p)["src_agent"], attrs(p)["dst_agent"]): p.as_double
              for p in lost.sum.data_points}
    assert len(points) == len(AGENTS) ** 2 == len(losses)
    for (s, d), values in fleet.ok.items():
        p = points[(f"ot-{s}", f"ot-{d}")]
        assert p.start_time_unix_nano == origin_ns and p.scale == 5
        assert sum(p.positive.bucket_counts) + p.zero_count == p.count == len(values)
        assert p.sum == pytest.approx(sum(values) * 1e-6, rel=1e-9)
        assert losses[(f"ot-{s}", f"ot-{d}")] == fleet.lost[(s, d)]
        # A bucket's answer is within its width and the sketch's 2% of the exact one.
        exact = float(np.quantile(np.asarray(values) * 1e-6, 0.99, method="inverted_cdf"))
        assert quantile(p, 0.99) == pytest.approx(exact, rel=NATIVE_RELATIVE_WIDTH + 0.021)
        a = attrs(p)
        assert (a["src_region"], a["dst_provider"]) == (AGENTS[s][1], AGENTS[d][0])


def test_the_worker_s_pass_pushes_each_due_org_once_and_records_failures(
        services: Services, client: httpx.Client, fleet: Fleet, collector: HttpReceiver,
        db: Engine) -> None:
    r = client.put(OTLP, headers=fleet.headers(), json={
        "endpoint_url": base_url(collector) + "/custom/metrics", "interval_s": 30})
    assert r.status_code == 200, r.text
    org = uuid.UUID(fleet.org.org_id)
    with db.begin() as c:  # due now, whatever the test button did
        c.execute(text("UPDATE otlp_exports SET last_attempt_at = NULL WHERE org_id = :o"),
                  {"o": org})
    sm = sessionmaker_for(services.database_url)
    t0 = datetime.now(UTC)

    def at(s: float) -> datetime:
        return datetime.fromtimestamp(t0.timestamp() + s, UTC)

    def state() -> dict:
        return client.get(OTLP, headers=fleet.headers()).json()

    # The push checks the address again: loopback is refused where the operator did not
    # allow it (this process has no EGRESS_ALLOW), and nothing is sent.
    asyncio.run(otlp.push_due(sm, 2000, at(0)))
    assert collector.requests == []
    assert "refused by the egress policy" in state()["last_error"]
    allowed = Policy.parse(LOOPBACK_ALLOWED)
    collector.script = [(503, "overloaded")]

    async def twice(t: datetime) -> tuple[dict, dict]:
        return (await otlp.push_due(sm, 2000, t, allowed),
                await otlp.push_due(sm, 2000, t, allowed))

    asyncio.run(twice(at(10)))  # not due yet: 10 s of a 30 s interval
    assert collector.requests == []
    first, second = asyncio.run(twice(at(30)))
    assert [q.path for q in collector.requests] == ["/custom/metrics"]
    assert second == {"pushed": 0, "failed": 0}
    s = state()
    assert s["failures_in_a_row"] == 2 and s["last_error"] == "HTTP 503: overloaded"
    # The next pass, once due, succeeds: the region level by default, every kind.
    assert asyncio.run(otlp.push_due(sm, 2000, at(60), allowed))["pushed"] >= 1
    metrics = decoded(collector.requests[-1].body)
    assert {"stormwatch.mesh.rtt", "stormwatch.quorum.latency",
            "stormwatch.quorum.failures"} <= set(metrics)
    assert "src_agent" not in attrs(metrics["stormwatch.mesh.rtt"]
                                    .exponential_histogram.data_points[0])
    s = state()
    assert datetime.fromisoformat(s["last_success_at"]) == at(60)
    assert s["failures_in_a_row"] == 0 and s["last_error"] is None
    assert s["last_data_points"] > 0


def test_a_partial_success_says_how_many_points_the_collector_rejected(
        client: httpx.Client, fleet: Fleet, collector: HttpReceiver) -> None:
    reply = ExportMetricsServiceResponse()
    reply.partial_success.rejected_data_points = 3
    reply.partial_success.error_message = "too many attributes"
    collector.default = (200, reply.SerializeToString())
    assert client.put(OTLP, headers=fleet.headers(), json={
        "endpoint_url": base_url(collector)}).status_code == 200
    r = client.post(OTLP + "/test", headers=fleet.headers()).json()
    assert r["ok"] is False and r["transient"] is False
    assert r["detail"] == "HTTP 200: 3 data points rejected: too many attributes"


@pytest.mark.parametrize("url", ["http://169.254.169.254/v1/metrics", "http://10.1.2.3:4318",
                                 "ftp://collector.example.com/"])
def test_a_collector_at_a_refused_address_is_a_422_naming_the_field(
        client: httpx.Client, fleet: Fleet, url: str) -> None:
    r = client.put(OTLP, headers=fleet.headers(), json={"endpoint_url": url})
    assert r.status_code == 422, r.text
    assert "endpoint_url" in str(r.json()["detail"])


@pytest.mark.parametrize(("body", "says"), [
    ({"headers": {"Content-Type": "text/plain"}}, "set by the export itself"),
    ({"headers": {"bad name": "x"}}, "not a header name"),
    ({"headers": {"x-key": "a\r\nb"}}, "no line breaks"),
    ({"kinds": []}, "kinds"),
    ({"kinds": ["mesh", "mesh"]}, "each kind once"),
    ({"level": "node"}, "level"),
    ({"interval_s": 5}, "interval_s"),
])
def test_bad_settings_are_422_naming_the_problem(client: httpx.Client, fleet: Fleet,
                                                 collector: HttpReceiver, body: dict,
                                                 says: str) -> None:
    r = client.put(OTLP, headers=fleet.headers(),
                   json={"endpoint_url": base_url(collector), **body})
    assert r.status_code == 422 and says in r.text, r.text


def test_roles_and_tenants(server: ApiServer, client: httpx.Client, fleet: Fleet,
                           make_org: Callable, collector: HttpReceiver) -> None:
    assert client.put(OTLP, headers=fleet.headers(), json={
        "endpoint_url": base_url(collector), "headers": {"authorization": "Bearer s3cret"}}
    ).status_code == 200
    with logged_in(server, fleet.org.email, fleet.org.password) as admin:
        r = admin.post("/api/v1/api-keys", json={"name": "otlp-reader", "scope": "read"})
        reader = {"Authorization": f"Bearer {r.json()['key']}"}
        log = admin.get("/api/v1/audit", params={"target_type": "otlp_export"})
        assert log.status_code == 200 and "s3cret" not in log.text
    assert client.get(OTLP, headers=reader).status_code == 200
    for method, path in (("PUT", OTLP), ("DELETE", OTLP), ("POST", OTLP + "/test")):
        r = client.request(method, path, headers=reader, json={"endpoint_url": "http://x"})
        assert r.status_code == 403 and "admin" in r.text, (method, r.text)
    agent = fleet.agents["fra1"].headers
    assert client.get(OTLP, headers=agent).status_code == 403
    other = {"Authorization": f"Bearer {make_org().api_key}"}
    r = client.get(OTLP, headers=other)
    assert r.status_code == 404 and "PUT /api/v1/export/otlp" in r.text
    assert client.post(OTLP + "/test", headers=other).status_code == 404
    assert client.delete(OTLP, headers=fleet.headers()).status_code == 204
    assert client.get(OTLP, headers=fleet.headers()).status_code == 404
