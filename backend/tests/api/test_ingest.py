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
    ],
    ids=["negative-rtt", "absurd-rtt", "string-rtt", "future-time", "unknown-agent",
         "index-out-of-range", "length-mismatch", "unknown-status", "bad-batch-id"],
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


def test_it_rejects_nan_as_invalid_json(api, db, fleet):
    org, agents = fleet
    body = (b'{"batch_id":"%s","agent_id":"%s","mesh":{"peers":["%s"],"time_us":[%d],'
            b'"peer_idx":[0],"round":[1],"payload_bytes":[1024],"rtt_us":[NaN],"status":[0]}}'
            % (str(uuid.uuid4()).encode(), agents[0].agent_id.encode(),
               agents[1].agent_id.encode(), now_us()))
    r = api.post("/api/v1/ingest/batches", content=body,
                 headers={**agents[0].headers, "Content-Type": "application/json"})
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body"]
    assert count_mesh(db, org.org_id) == 0


def test_it_rejects_a_batch_over_the_size_limit_with_413(api, fleet):
    _, agents = fleet
    r = api.post("/api/v1/ingest/batches", content=b"x" * (9 * 1024 * 1024),
                 headers={**agents[0].headers, "Content-Type": "application/json"})
    assert r.status_code == 413


def test_it_rejects_a_gzip_bomb_with_413(api, fleet):
    import gzip

    _, agents = fleet
    bomb = gzip.compress(b" " * (70 * 1024 * 1024))
    r = api.post("/api/v1/ingest/batches", content=bomb,
                 headers={**agents[0].headers, "Content-Type": "application/json",
                          "Content-Encoding": "gzip"})
    assert r.status_code == 413


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
    # Naming B's agent as a peer from A's agent:
    r = post_batch(api, agents_a[0], mesh_batch(agents_a[0], [b1.agent_id], rounds=5))
    assert r.status_code == 403
    # Posting as B's agent with A's token:
    r = post_batch(api, agents_a[0], mesh_batch(b1, [b1.agent_id], rounds=5))
    assert r.status_code == 403
    assert count_mesh(db, org_a.org_id) == 0
    assert count_mesh(db, org_b.org_id) == 0


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


def test_late_samples_mark_their_already_rolled_minutes_for_a_re_roll(api, db, fleet):
    org, agents = fleet
    with db.begin() as c:
        before = c.execute(text("SELECT rolled_until FROM rollup_watermarks "
                                "WHERE kind = 'mesh:60'")).scalar()
        c.execute(text("INSERT INTO rollup_watermarks (kind, rolled_until, updated_at) "
                       "VALUES ('mesh:60', now(), now()) ON CONFLICT (kind) DO UPDATE "
                       "SET rolled_until = now()"))
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
                c.execute(text("DELETE FROM rollup_watermarks WHERE kind = 'mesh:60'"))
            else:
                c.execute(text("UPDATE rollup_watermarks SET rolled_until = :b "
                               "WHERE kind = 'mesh:60'"), {"b": before})
