import copy
import uuid

import pytest
from sqlalchemy import text

from tests.helpers import enroll, mesh_batch, now_us, post_batch


def count_mesh(db, org_id: str) -> int:
    with db.connect() as c:
        return c.execute(text("SELECT count(*) FROM mesh_samples WHERE org_id = :o"),
                         {"o": org_id}).scalar()


@pytest.fixture
def fleet(api, make_org):
    org = make_org()
    agents = [enroll(api, org.enrollment_token, f"node-{i}", provider="aws",
                     region="us-east-1", zone=f"us-east-1{'ab'[i % 2]}") for i in range(3)]
    return org, agents


def test_it_stores_a_batch_and_a_retried_batch_adds_no_rows(api, db, fleet):
    org, agents = fleet
    peers = [a.agent_id for a in agents]
    batch = mesh_batch(agents[0], peers, rounds=100)
    first = post_batch(api, agents[0], batch)
    assert first.status_code == 202, first.text
    assert first.json()["accepted"]["mesh"] == 300
    assert count_mesh(db, org.org_id) == 300

    again = post_batch(api, agents[0], batch)
    assert again.status_code == 200
    assert again.json()["duplicate"] is True
    assert again.json()["accepted"]["mesh"] == 300
    assert count_mesh(db, org.org_id) == 300


def test_each_batch_records_its_oldest_sample_so_late_arrivals_are_known(api, db, fleet):
    from datetime import UTC, datetime, timedelta

    org, agents = fleet
    batch = mesh_batch(agents[0], [a.agent_id for a in agents], rounds=20)
    times = batch["mesh"]["time_us"]
    times[7] -= 3_600_000_000  # an hour old, in the middle of an unsorted batch
    assert post_batch(api, agents[0], batch).status_code == 202
    with db.connect() as c:
        oldest, received = c.execute(text(
            "SELECT oldest_sample_at, received_at FROM ingest_batches WHERE batch_id = :b"),
            {"b": batch["batch_id"]}).one()
    assert oldest == datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=min(times))
    assert received - oldest > timedelta(minutes=59)


def test_stored_rows_hold_exactly_the_values_sent(api, db, fleet):
    from datetime import UTC, datetime, timedelta

    org, agents = fleet
    peers = [a.agent_id for a in agents]
    batch = mesh_batch(agents[0], peers, rounds=60)
    m = batch["mesh"]
    m["round"] = [r + 2**40 for r in m["round"]]  # beyond 32 bits
    m["payload_bytes"] = [64 + i for i in range(len(m["time_us"]))]
    m["time_us"] = [t + i for i, t in enumerate(m["time_us"])]  # distinct microseconds
    assert post_batch(api, agents[0], batch).status_code == 202
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    sent = {(epoch + timedelta(microseconds=t), agents[0].agent_id, peers[p], r, pb, rtt, st)
            for t, p, r, pb, rtt, st in zip(m["time_us"], m["peer_idx"], m["round"],
                                            m["payload_bytes"], m["rtt_us"], m["status"],
                                            strict=True)}
    with db.connect() as c:
        stored = {(row[0], str(row[1]), str(row[2]), *row[3:]) for row in c.execute(text(
            "SELECT time, src_agent_id, dst_agent_id, round, payload_bytes, rtt_us, status "
            "FROM mesh_samples WHERE org_id = :o"), {"o": org.org_id})}
    assert len(sent) == len(m["time_us"]) == 180
    assert stored == sent
    assert any(s[5] is None for s in stored) and any(s[5] is not None for s in stored)


def test_it_keeps_losses_as_rows_with_a_status(api, db, fleet):
    org, agents = fleet
    batch = mesh_batch(agents[0], [a.agent_id for a in agents], rounds=50)
    assert post_batch(api, agents[0], batch).status_code == 202
    with db.connect() as c:
        lost = c.execute(text("SELECT count(*) FROM mesh_samples WHERE org_id = :o AND status = 1"
                              " AND rtt_us IS NULL"), {"o": org.org_id}).scalar()
    assert lost == sum(1 for s in batch["mesh"]["status"] if s == 1) > 0


@pytest.mark.parametrize(
    ("mutate", "loc"),
    [
        (lambda b: b["mesh"]["rtt_us"].__setitem__(5, -3), ["body", "mesh", "rtt_us", 5]),
        (lambda b: b["mesh"]["rtt_us"].__setitem__(7, 10**12), ["body", "mesh", "rtt_us", 7]),
        (lambda b: b["mesh"]["rtt_us"].__setitem__(3, "fast"), ["body", "mesh", "rtt_us", 3]),
        (lambda b: b["mesh"]["time_us"].__setitem__(9, now_us() + 3600 * 10**6),
         ["body", "mesh", "time_us", 9]),
        (lambda b: b["mesh"]["peers"].__setitem__(1, str(uuid.uuid4())),
         ["body", "mesh", "peers", 1]),
        (lambda b: b["mesh"]["peer_idx"].__setitem__(2, 99), ["body", "mesh", "peer_idx", 2]),
        (lambda b: b["mesh"]["status"].pop(), ["body", "mesh", "status"]),
        (lambda b: b["mesh"]["status"].__setitem__(0, 9), ["body", "mesh", "status", 0]),
        (lambda b: b.__setitem__("batch_id", "not-a-uuid"), ["body", "batch_id"]),
        (lambda b: b["mesh"]["round"].__setitem__(4, 2**53 + 1), ["body", "mesh", "round", 4]),
    ],
    ids=["negative-rtt", "absurd-rtt", "string-rtt", "future-time", "unknown-agent",
         "index-out-of-range", "length-mismatch", "unknown-status", "bad-batch-id",
         "inexact-round"],
)
def test_it_rejects_an_invalid_batch_naming_the_field_and_writes_nothing(
        api, db, fleet, mutate, loc):
    org, agents = fleet
    batch = mesh_batch(agents[0], [a.agent_id for a in agents], rounds=20)
    bad = copy.deepcopy(batch)
    mutate(bad)
    r = post_batch(api, agents[0], bad)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == loc
    assert count_mesh(db, org.org_id) == 0
    with db.connect() as c:
        assert c.execute(text("SELECT count(*) FROM ingest_batches WHERE org_id = :o"),
                         {"o": org.org_id}).scalar() == 0


def count_batches(db, org_id: str) -> int:
    with db.connect() as c:
        return c.execute(text("SELECT count(*) FROM ingest_batches WHERE org_id = :o"),
                         {"o": org_id}).scalar()


def raw_mesh_body(agents, rtt_us: list[bytes], time_us: bytes | None = None) -> bytes:
    """A mesh batch written by hand, since no JSON encoder emits NaN or Infinity."""
    n = len(rtt_us)
    t = time_us or b",".join(b"%d" % (now_us() - 1_000_000 + i) for i in range(n))
    return (b'{"batch_id":"%s","agent_id":"%s","mesh":{"peers":["%s"],"time_us":[%s],'
            b'"peer_idx":[%s],"round":[%s],"payload_bytes":[%s],"rtt_us":[%s],"status":[%s]}}'
            % (str(uuid.uuid4()).encode(), agents[0].agent_id.encode(),
               agents[1].agent_id.encode(), t, b",".join([b"0"] * n),
               b",".join(b"%d" % i for i in range(n)), b",".join([b"1024"] * n),
               b",".join(rtt_us), b",".join([b"0"] * n)))


@pytest.mark.parametrize(
    ("rtt", "time_us", "loc", "token"),
    [
        ([b"400", b"410", b"420", b"NaN", b"430"], None, ["body", "mesh", "rtt_us", 3], "NaN"),
        ([b"400", b"Infinity"], None, ["body", "mesh", "rtt_us", 1], "Infinity"),
        ([b"400", b"-Infinity"], None, ["body", "mesh", "rtt_us", 1], "-Infinity"),
        ([b"400", b"1e999"], None, ["body", "mesh", "rtt_us", 1], "finite"),
        ([b"400", b"410"], b"%d,NaN" % now_us(), ["body", "mesh", "time_us", 1], "NaN"),
    ],
    ids=["nan-rtt", "infinity-rtt", "minus-infinity-rtt", "overflowing-rtt", "nan-time"],
)
@pytest.mark.parametrize("gzip_body", [False, True], ids=["plain", "gzip"])
def test_it_rejects_a_non_finite_number_naming_its_field_and_index(
        api, db, fleet, rtt, time_us, loc, token, gzip_body):
    import gzip

    org, agents = fleet
    body = raw_mesh_body(agents, rtt, time_us)
    headers = {**agents[0].headers, "Content-Type": "application/json"}
    if gzip_body:
        body, headers["Content-Encoding"] = gzip.compress(body), "gzip"
    r = api.post("/api/v1/ingest/batches", content=body, headers=headers)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"][0]
    assert detail["loc"] == loc
    assert token in detail["msg"] and "finite" in detail["msg"]
    assert count_mesh(db, org.org_id) == 0
    assert count_batches(db, org.org_id) == 0


@pytest.mark.parametrize(
    ("body", "position"),
    [
        (b'{"batch_id": "x", "mesh": {"rtt_us": [1, 2,]}}', "column 43"),
        (b'{"batch_id": "x", "mesh": {"rtt_us": [NaN, 2,]}}', "column 46"),
        (b'{"batch_id": "x"', "column 17"),
    ],
    ids=["trailing-comma", "trailing-comma-after-nan", "truncated"],
)
def test_it_rejects_malformed_json_naming_the_position(api, db, fleet, body, position):
    org, agents = fleet
    r = api.post("/api/v1/ingest/batches", content=body,
                 headers={**agents[0].headers, "Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    detail = r.json()["detail"][0]
    assert detail["loc"] == ["body"] and detail["type"] == "json_invalid"
    assert "line 1" in detail["msg"] and position in detail["msg"], detail["msg"]
    assert count_batches(db, org.org_id) == 0


def padded(batch: dict, size: int) -> bytes:
    """A valid batch followed by JSON whitespace up to `size` bytes: only its size is wrong."""
    import orjson

    raw = orjson.dumps(batch)
    return raw + b" " * (size - len(raw))


def test_it_rejects_a_batch_over_the_size_limit_with_413_and_writes_nothing(api, db, fleet):
    org, agents = fleet
    batch = mesh_batch(agents[0], [a.agent_id for a in agents], rounds=20)
    before = count_mesh(db, org.org_id), count_batches(db, org.org_id)
    r = api.post("/api/v1/ingest/batches", content=padded(batch, 9 * 1024 * 1024),
                 headers={**agents[0].headers, "Content-Type": "application/json"})
    assert r.status_code == 413, r.text
    assert (count_mesh(db, org.org_id), count_batches(db, org.org_id)) == before == (0, 0)
    # The same batch within the limit is stored: the 413 was about size alone.
    assert post_batch(api, agents[0], batch).status_code == 202
    assert count_mesh(db, org.org_id) == 60


def test_it_rejects_a_gzip_bomb_with_413_and_writes_nothing(api, db, fleet):
    import gzip

    org, agents = fleet
    batch = mesh_batch(agents[0], [a.agent_id for a in agents], rounds=20)
    bomb = gzip.compress(padded(batch, 70 * 1024 * 1024))
    assert len(bomb) < 8 * 1024 * 1024  # passes the compressed limit, fails the inflated one
    before = count_mesh(db, org.org_id), count_batches(db, org.org_id)
    r = api.post("/api/v1/ingest/batches", content=bomb,
                 headers={**agents[0].headers, "Content-Type": "application/json",
                          "Content-Encoding": "gzip"})
    assert r.status_code == 413, r.text
    assert (count_mesh(db, org.org_id), count_batches(db, org.org_id)) == before == (0, 0)
    assert post_batch(api, agents[0], batch).status_code == 202
    assert count_mesh(db, org.org_id) == 60


def test_it_refuses_a_missing_or_unknown_token(api, fleet):
    _, agents = fleet
    batch = mesh_batch(agents[0], [agents[0].agent_id], rounds=1)
    assert api.post("/api/v1/ingest/batches", json=batch).status_code == 401
    r = api.post("/api/v1/ingest/batches", json=batch,
                 headers={"Authorization": "Bearer swa_notarealtokenatallreallynotatall"})
    assert r.status_code == 401


def test_an_agent_cannot_post_as_another_agent(api, db, fleet):
    org, agents = fleet
    batch = mesh_batch(agents[1], [agents[0].agent_id], rounds=5)
    r = post_batch(api, agents[0], batch)
    assert r.status_code == 403
    assert count_mesh(db, org.org_id) == 0


def test_an_agent_of_org_a_cannot_write_samples_for_org_b_agents(api, db, make_org, fleet):
    org_a, agents_a = fleet
    org_b = make_org()
    b1 = enroll(api, org_b.enrollment_token, "b-node")
    # Naming B's agent as a peer from A's agent is invalid content: 422 at the field, worded
    # exactly like an id that exists nowhere, so it tells nothing about org B.
    peers = [a.agent_id for a in agents_a] + [b1.agent_id]
    foreign = post_batch(api, agents_a[0], mesh_batch(agents_a[0], peers, rounds=5))
    assert foreign.status_code == 422, foreign.text
    nowhere = str(uuid.uuid4())
    unknown = post_batch(api, agents_a[0], mesh_batch(agents_a[0], peers[:3] + [nowhere],
                                                      rounds=5))
    assert unknown.status_code == 422, unknown.text
    assert foreign.json() == {"detail": [{"loc": ["body", "mesh", "peers", 3],
                                          "msg": f"unknown agent id {b1.agent_id}",
                                          "type": "value_error"}]}
    assert unknown.json()["detail"][0]["msg"].replace(nowhere, b1.agent_id) == \
        foreign.json()["detail"][0]["msg"]
    # The same for a throughput peer.
    t = now_us() - 2_000_000
    r = post_batch(api, agents_a[0], {
        "batch_id": str(uuid.uuid4()), "agent_id": agents_a[0].agent_id,
        "mesh": mesh_batch(agents_a[0], peers[:3], rounds=5)["mesh"],
        "throughput": {"peers": [agents_a[1].agent_id, b1.agent_id], "time_us": [t, t],
                       "peer_idx": [0, 1], "proto": ["tcp", "tcp"],
                       "experiment_id": [str(uuid.uuid4())] * 2, "direction": ["send"] * 2,
                       "bytes_per_s": [1e8, 1e8], "loss_ratio": [None, None],
                       "jitter_us": [None, None]}})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", "throughput", "peers", 1]
    # Posting as B's agent with A's token is a foreign credential: 403.
    r = post_batch(api, agents_a[0], mesh_batch(b1, [b1.agent_id], rounds=5))
    assert r.status_code == 403
    assert count_mesh(db, org_a.org_id) == 0
    assert count_mesh(db, org_b.org_id) == 0
    assert count_batches(db, org_a.org_id) == 0
    with db.connect() as c:
        assert c.execute(text("SELECT count(*) FROM throughput_samples WHERE org_id = :o"),
                         {"o": org_a.org_id}).scalar() == 0


def test_a_storage_target_of_another_org_reads_as_an_unknown_target(api, db, make_org, fleet):
    org_a, agents_a = fleet
    org_b = make_org()
    theirs = api.post("/api/v1/storage-targets", headers={
        "Authorization": f"Bearer {org_b.api_key}"}, json={
        "name": "b's bucket", "provider": "s3", "region": "us-east-1", "bucket": "b-probe",
        "credentials": {"source": "none"}})
    assert theirs.status_code == 201, theirs.text
    t = now_us() - 2_000_000

    def batch(target: str) -> dict:
        return {"batch_id": str(uuid.uuid4()), "agent_id": agents_a[0].agent_id, "storage": {
            "targets": [target], "time_us": [t], "target_idx": [0], "op": ["put"],
            "variant": ["plain"], "content": ["binary"], "size_bytes": [1024],
            "stored_bytes": [1024], "copies": [1], "concurrency": [1], "attempt": [1],
            "latency_us": [5000], "ttfb_us": [4000], "rtt_us": [300], "bytes_per_s": [None],
            "status": [0], "error_class": [None]}}

    nowhere = str(uuid.uuid4())
    foreign = post_batch(api, agents_a[0], batch(theirs.json()["id"]))
    unknown = post_batch(api, agents_a[0], batch(nowhere))
    assert foreign.status_code == unknown.status_code == 422, foreign.text
    assert foreign.json()["detail"][0]["loc"] == ["body", "storage", "targets", 0]
    assert unknown.json()["detail"][0] == {
        **foreign.json()["detail"][0],
        "msg": foreign.json()["detail"][0]["msg"].replace(theirs.json()["id"], nowhere)}
    assert count_batches(db, org_a.org_id) == 0


def test_an_agent_token_cannot_read_org_data(api, fleet):
    _, agents = fleet
    for path in ("/api/v1/agents", "/api/v1/api-keys", "/api/v1/users", "/api/v1/org"):
        assert api.get(path, headers=agents[0].headers).status_code == 403, path


def test_a_concurrent_retry_of_the_same_batch_is_stored_once(api_server, db, fleet):
    from concurrent.futures import ThreadPoolExecutor

    org, agents = fleet
    batch = mesh_batch(agents[0], [a.agent_id for a in agents], rounds=200)

    def send(_: int) -> int:
        with api_server.client() as c:
            return post_batch(c, agents[0], batch).status_code

    with ThreadPoolExecutor(4) as pool:
        codes = sorted(pool.map(send, range(4)))
    assert codes == [200, 200, 200, 202]
    assert count_mesh(db, org.org_id) == 600


def test_late_samples_mark_their_already_claimed_minutes_for_a_re_roll(api, db, fleet):
    org, agents = fleet
    with db.begin() as c:
        # As text: an unclaimed claim is -infinity, which Python datetimes cannot hold.
        before = c.execute(text("SELECT rolled_until::text FROM rollup_watermarks "
                                "WHERE kind = 'mesh:60:claim'")).scalar()
        # Claimed up to five minutes ago: the late batch (20 min old) falls before it and the
        # fresh one (a second old) after it, whatever second of the minute the test runs in.
        c.execute(text("INSERT INTO rollup_watermarks (kind, rolled_until, updated_at) "
                       "VALUES ('mesh:60:claim', date_trunc('minute', now()) - "
                       "interval '5 minutes', now()) "
                       "ON CONFLICT (kind) DO UPDATE SET rolled_until = EXCLUDED.rolled_until"))
    try:
        late_start = now_us() - 20 * 60 * 1_000_000
        batch = mesh_batch(agents[0], [agents[1].agent_id], rounds=3, start_us=late_start)
        assert post_batch(api, agents[0], batch).status_code == 202
        with db.connect() as c:
            marked = c.execute(text("SELECT count(*) FROM rollup_dirty_minutes WHERE "
                                    "kind = 'mesh' AND org_id = :o"), {"o": org.org_id}).scalar()
        assert marked == 1
        fresh = mesh_batch(agents[0], [agents[1].agent_id], rounds=3)
        assert post_batch(api, agents[0], fresh).status_code == 202
        with db.connect() as c:
            assert c.execute(text("SELECT count(*) FROM rollup_dirty_minutes WHERE "
                                  "kind = 'mesh' AND org_id = :o"),
                             {"o": org.org_id}).scalar() == 1
    finally:
        with db.begin() as c:
            c.execute(text("DELETE FROM rollup_dirty_minutes WHERE org_id = :o"),
                      {"o": org.org_id})
            if before is None:
                c.execute(text("DELETE FROM rollup_watermarks WHERE kind = 'mesh:60:claim'"))
            else:
                c.execute(text("UPDATE rollup_watermarks SET rolled_until = CAST(:b AS "
                               "timestamptz) WHERE kind = 'mesh:60:claim'"), {"b": before})


def test_an_agent_writes_storage_samples_only_for_targets_assigned_to_it(api, db, fleet):
    org, agents = fleet
    key = {"Authorization": f"Bearer {org.api_key}"}

    def target(name: str, **assignment: object) -> str:
        r = api.post("/api/v1/storage-targets", headers=key, json={
            "name": name, "provider": "s3", "region": "us-east-1", "bucket": f"{name}-probe",
            "credentials": {"source": "none"}, **assignment})
        assert r.status_code == 201, r.text
        return r.json()["id"]

    mine = target("mine", agent_ids=[agents[0].agent_id])
    everyone = target("everyone", assign_all=True)
    t = now_us() - 2_000_000

    def batch(agent, targets: list[str]) -> dict:
        n = len(targets)
        return {"batch_id": str(uuid.uuid4()), "agent_id": agent.agent_id, "storage": {
            "targets": targets, "time_us": [t + i for i in range(n)],
            "target_idx": list(range(n)), "op": ["put"] * n, "variant": ["plain"] * n,
            "content": ["binary"] * n, "size_bytes": [1024] * n, "stored_bytes": [1024] * n,
            "copies": [1] * n, "concurrency": [1] * n, "attempt": [1] * n,
            "latency_us": [5000] * n, "ttfb_us": [4000] * n, "rtt_us": [300] * n,
            "bytes_per_s": [None] * n, "status": [0] * n, "error_class": [None] * n}}

    def stored(agent) -> int:
        with db.connect() as c:
            return c.execute(text("SELECT count(*) FROM storage_samples WHERE agent_id = :a"),
                             {"a": agent.agent_id}).scalar()

    # Agent 1 is not assigned `mine`: its batch is refused at that target, whole.
    r = post_batch(api, agents[1], batch(agents[1], [everyone, mine]))
    assert r.status_code == 422, r.text
    assert r.json()["detail"] == [{"loc": ["body", "storage", "targets", 1],
                                   "msg": f"storage target {mine} is not assigned to this agent",
                                   "type": "value_error"}]
    assert stored(agents[1]) == 0 and count_batches(db, org.org_id) == 0
    # A target on every agent, and one assigned to the sender, are taken.
    assert post_batch(api, agents[1], batch(agents[1], [everyone])).status_code == 202
    assert post_batch(api, agents[0], batch(agents[0], [everyone, mine])).status_code == 202
    assert (stored(agents[0]), stored(agents[1])) == (2, 1)
