"""Ingest and rollups against a model: random valid batches (retried, sent twice, hours late,
out of order, rollup passes in between) through the real HTTP ingest and the worker's rollup
pass, and random invalid ones. Every accepted sample is counted exactly once in raw rows and
at every rollup level (counts, sums, min and max equal to the model's, p50/p99 within the
sketch's relative accuracy); every refused batch writes nothing.

HYPOTHESIS_PROFILE=soak runs far more examples than the default (derandomized) run."""

from __future__ import annotations

import gzip
import os
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import orjson
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, create_engine, text

from stormwatch.core.security import hash_password
from stormwatch.devtools.bootstrap import create_org_sync
from stormwatch.devtools.services import run_migrations
from stormwatch.services import rollups
from stormwatch.services.analytics.sketches import RELATIVE_ACCURACY, decode
from tests.conftest import ADMIN_PASSWORD, ApiServer, Services
from tests.helpers import EnrolledAgent, enroll, now_us

# Registered here, not in a conftest: other modules register profiles of their own.
_CHECKS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
settings.register_profile("ingest_default", max_examples=12, derandomize=True, deadline=None,
                          suppress_health_check=_CHECKS, print_blob=True)
settings.register_profile("ingest_soak", max_examples=300, deadline=None,
                          suppress_health_check=_CHECKS, print_blob=True)
PROFILE = settings.get_profile(
    "ingest_soak" if os.environ.get("HYPOTHESIS_PROFILE") == "soak" else "ingest_default")

LEVELS = (60, 300, 3600, 86400)
PCTS = (0.5, 0.99)
# Hours back from now a sample may be (the raw retention is 14 days); at least two minutes
# back, so the rollup pass, which leaves the last 30 s unsettled, reaches every sample.
MIN_AGE_S, MAX_AGE_S = 120, 30 * 3600
DAY_US = 86_400_000_000


@dataclass(frozen=True)
class Sample:
    peer: int  # 0 or 1: the two peers of the sending agent
    age_us: int  # how long before the example's start the sample was taken
    rtt_us: int | None  # None when lost


@dataclass(frozen=True)
class Invalid:
    kind: str
    batch: int  # the valid batch the bad one is a copy of
    index: int  # which sample (modulo the batch's size) is spoilt


BAD_KINDS = ("negative_rtt", "nan_rtt", "string_rtt", "fractional_rtt", "unknown_status",
             "unknown_peer", "too_old", "duplicate_key", "rtt_when_lost", "fractional_round")


def samples_strategy(anchors: list[int]) -> st.SearchStrategy[Sample]:
    rtt = st.one_of(st.none(), st.integers(0, 3000), st.integers(1, 600_000_000))
    return st.builds(
        Sample, peer=st.integers(0, 1),
        age_us=st.tuples(st.sampled_from(anchors), st.integers(0, 900_000_000)).map(
            lambda t: t[0] * 1_000_000 + t[1]),
        rtt_us=rtt)


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    # A few anchors, so that samples share minutes, hours and days.
    anchors = draw(st.lists(st.integers(MIN_AGE_S, MAX_AGE_S), min_size=1, max_size=4))
    batches = draw(st.lists(st.lists(samples_strategy(anchors), min_size=1, max_size=30),
                            min_size=1, max_size=5))
    # Each batch sent 1-3 times (retries and whole-batch duplicates), in any order.
    sends = [("send", b) for b, _ in enumerate(batches)
             for _ in range(draw(st.integers(1, 3)))]
    invalid = draw(st.lists(st.builds(Invalid, st.sampled_from(BAD_KINDS),
                                      st.integers(0, len(batches) - 1), st.integers(0, 1000)),
                            max_size=3))
    events: list[tuple[str, Any]] = [*sends, *(("invalid", i) for i in invalid)]
    events += [("roll", None)] * draw(st.integers(0, 3))
    order = draw(st.permutations(events))
    return {"batches": batches, "events": order, "gzip": draw(st.booleans())}


@dataclass
class Fleet:
    org_id: str
    sender: EnrolledAgent
    peers: list[str]


@pytest.fixture(scope="module")
def own_database(services: Services) -> Iterator[str]:
    """A database of this module's own: each example drains the rollups, and in the worker's
    shared database that meant rolling up every minute the earlier test files marked."""
    name = f"ingest_model_{uuid.uuid4().hex[:8]}"
    admin = f"host=127.0.0.1 port={services.pg.port} user={services.pg.user} dbname=postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = services.database_url.rsplit("/", 1)[0] + f"/{name}"
    run_migrations(url)
    yield url
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def db(own_database: str) -> Iterator[Engine]:
    engine = create_engine(own_database.replace("+asyncpg", "+psycopg"), pool_pre_ping=True)
    yield engine
    engine.dispose()


@pytest.fixture(scope="module")
def make_org(own_database: str) -> Callable[..., Any]:
    counter = iter(range(1, 1_000_000))
    password_hash = hash_password(ADMIN_PASSWORD)

    def make() -> Any:
        n = next(counter)
        return create_org_sync(own_database, f"Model {n}", f"model{n}-{os.getpid()}@example.test",
                               password=ADMIN_PASSWORD, password_hash=password_hash)

    return make


@pytest.fixture(scope="module")
def client(services: Services, own_database: str) -> Iterator[httpx.Client]:
    server = ApiServer(services, {"DATABASE_URL": own_database})
    server.start()
    try:
        with server.client() as c:
            yield c
    finally:
        server.stop()


def new_fleet(client: httpx.Client, make_org: Callable[..., Any]) -> Fleet:
    org = make_org()
    agents = [enroll(client, org.enrollment_token, f"prop-{uuid.uuid4().hex[:8]}-{i}",
                     provider="aws", region="us-east-1") for i in range(3)]
    return Fleet(org.org_id, agents[0], [a.agent_id for a in agents[1:]])


def batch_body(fleet: Fleet, batch_id: str, samples: list[Sample], start_us: int, b: int
               ) -> dict[str, Any]:
    return {"batch_id": batch_id, "agent_id": fleet.sender.agent_id, "mesh": {
        "peers": list(fleet.peers),
        "time_us": [start_us - s.age_us for s in samples],
        "peer_idx": [s.peer for s in samples],
        # Distinct rounds: every raw row of the example is told apart.
        "round": [b * 1000 + i for i in range(len(samples))],
        "payload_bytes": [1024] * len(samples),
        "rtt_us": [s.rtt_us for s in samples],
        "status": [0 if s.rtt_us is not None else 1 for s in samples]}}


def spoil(body: dict[str, Any], bad: Invalid) -> tuple[bytes, list[str | int], str]:
    """A copy of a valid batch, batch id included, with one bad sample (or key): its JSON
    and the 422's loc. The valid batch sent after it must still be stored."""
    body = orjson.loads(orjson.dumps(body))
    m = body["mesh"]
    i = bad.index % len(m["time_us"])
    loc: list[str | int] = ["body", "mesh", "rtt_us", i]
    if bad.kind in ("negative_rtt", "nan_rtt", "string_rtt", "fractional_rtt"):
        m["status"][i] = 0
        m["rtt_us"][i] = {"negative_rtt": -3, "nan_rtt": "__NaN__", "string_rtt": "fast",
                          "fractional_rtt": 400.5}[bad.kind]
    elif bad.kind == "rtt_when_lost":
        m["status"][i], m["rtt_us"][i] = 1, 400
    elif bad.kind == "unknown_status":
        m["status"][i], m["rtt_us"][i] = 9, None
        loc = ["body", "mesh", "status", i]
    elif bad.kind == "unknown_peer":
        m["peers"][m["peer_idx"][i]] = str(uuid.uuid4())
        loc = ["body", "mesh", "peers", m["peer_idx"][i]]
    elif bad.kind == "too_old":
        m["time_us"][i] = now_us() - 15 * DAY_US
        loc = ["body", "mesh", "time_us", i]
    elif bad.kind == "fractional_round":
        m["round"][i] = 0.5
        loc = ["body", "mesh", "round", i]
    raw = orjson.dumps(body).replace(b'"__NaN__"', b"NaN")
    if bad.kind == "duplicate_key":
        raw = b'{"batch_id":"%s",' % body["batch_id"].encode() + raw[1:]
        loc = ["body", "batch_id"]
    return raw, loc, bad.kind


def post(client: httpx.Client, agent: EnrolledAgent, raw: bytes, gz: bool) -> httpx.Response:
    headers = {**agent.headers, "Content-Type": "application/json"}
    if gz:
        raw, headers["Content-Encoding"] = gzip.compress(raw), "gzip"
    return client.post("/api/v1/ingest/batches", content=raw, headers=headers)


def stored_counts(db: Engine, org_id: str) -> tuple[int, int, int]:
    """Raw rows, stored batch ids and marked minutes of an org."""
    with db.connect() as c:
        return tuple(c.execute(text(  # type: ignore[return-value]
            f"SELECT count(*) FROM {table} WHERE org_id = :o"), {"o": org_id}).scalar() or 0
            for table in ("mesh_samples", "ingest_batches", "rollup_dirty_minutes"))


def one_pass(db: Engine) -> None:
    rollups.run_minute_pass(db, "mesh")


def drain(db: Engine) -> None:
    """Rollup passes as the worker runs them until every settled minute is rolled and no
    marked minute is left (a deadline, not a pass count)."""
    deadline = time.monotonic() + 600
    while True:
        end = rollups.floor_time(datetime.now(UTC) - rollups.SETTLE, 60)
        one_pass(db)
        with db.connect() as c:
            dirty = c.execute(text(
                "SELECT count(*) FROM rollup_dirty_minutes WHERE kind = 'mesh'")).scalar()
            wm = c.execute(text(
                "SELECT rolled_until FROM rollup_watermarks WHERE kind = 'mesh:60'")).scalar()
        if dirty == 0 and wm is not None and wm >= end:
            return
        assert time.monotonic() < deadline, f"rollups not drained: {dirty} marked, wm {wm}"


def check_against_model(db: Engine, fleet: Fleet, accepted: list[tuple[datetime, str, int,
                                                                        int | None]]) -> None:
    with db.connect() as c:
        raw = sorted(
            (r[0], str(r[1]), r[2], r[3]) for r in c.execute(text(
                "SELECT time, dst_agent_id, round, rtt_us FROM mesh_samples WHERE org_id = :o"),
                {"o": fleet.org_id}))
        rows = c.execute(text(
            "SELECT bucket_s, bucket_start, dst_agent_id, sample_count, failure_count, "
            "rtt_us_count, rtt_us_min, rtt_us_max, rtt_us_sum, rtt_us_sketch FROM mesh_rollups "
            "WHERE org_id = :o"), {"o": fleet.org_id}).all()
    # Raw: each accepted sample exactly once.
    # (time, peer, round) tells rows apart, so sorting never compares the RTTs.
    assert raw == sorted(accepted)
    model: dict[tuple[int, datetime, str], list[int | None]] = defaultdict(list)
    for t, dst, _, rtt in accepted:
        for level in LEVELS:
            model[(level, rollups.floor_time(t, level), dst)].append(rtt)
    got = {(r.bucket_s, r.bucket_start, str(r.dst_agent_id)): r for r in rows}
    assert sorted(got) == sorted(model), "rollup buckets differ from the model's"
    for key, vals in model.items():
        r = got[key]
        ok = np.array([v for v in vals if v is not None], dtype=np.float64)
        want = (len(vals), len(vals) - ok.size, ok.size,
                float(ok.min()) if ok.size else None, float(ok.max()) if ok.size else None,
                float(ok.sum()))
        have = (r.sample_count, r.failure_count, r.rtt_us_count, r.rtt_us_min, r.rtt_us_max,
                r.rtt_us_sum)
        assert have == want, (key, have, want)
        sketch = decode(bytes(r.rtt_us_sketch))
        assert sketch.count == ok.size, key
        for q in PCTS if ok.size else ():
            exact = float(np.quantile(ok, q, method="lower"))
            est = sketch.quantile(q)
            assert est is not None, key
            assert abs(est - exact) <= RELATIVE_ACCURACY * exact * (1 + 1e-9), (key, q, est,
                                                                                 exact)


@settings(PROFILE)
@given(scenario=scenarios())
def test_every_accepted_sample_is_counted_once_in_raw_and_every_rollup_level(
        db: Engine, client: httpx.Client, make_org: Callable[..., Any],
        scenario: dict[str, Any]) -> None:
    fleet = new_fleet(client, make_org)
    start_us = now_us()
    batches = scenario["batches"]
    bodies = [batch_body(fleet, str(uuid.uuid4()), s, start_us, b)
              for b, s in enumerate(batches)]
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    accepted: list[tuple[datetime, str, int, int | None]] = []
    sent: set[int] = set()
    for event, arg in scenario["events"]:
        if event == "roll":
            one_pass(db)
        elif event == "send":
            r = post(client, fleet.sender, orjson.dumps(bodies[arg]), scenario["gzip"])
            assert r.status_code == (200 if arg in sent else 202), r.text
            assert r.json()["accepted"]["mesh"] == len(batches[arg])
            assert r.json()["duplicate"] is (arg in sent)
            if arg not in sent:
                sent.add(arg)
                m = bodies[arg]["mesh"]
                accepted += [(epoch + timedelta(microseconds=t), fleet.peers[p], rnd, rtt)
                             for t, p, rnd, rtt in zip(m["time_us"], m["peer_idx"],
                                                       m["round"], m["rtt_us"], strict=True)]
        else:
            before = stored_counts(db, fleet.org_id)
            raw, loc, kind = spoil(bodies[arg.batch], arg)
            r = post(client, fleet.sender, raw, scenario["gzip"])
            assert r.status_code == 422, (kind, r.status_code, r.text)
            assert r.json()["detail"][0]["loc"] == loc, (kind, r.text)
            assert stored_counts(db, fleet.org_id) == before, kind
    assert stored_counts(db, fleet.org_id)[:2] == (len(accepted), len(sent))
    drain(db)
    check_against_model(db, fleet, accepted)
