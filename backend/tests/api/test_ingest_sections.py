import uuid

from sqlalchemy import text

from tests.helpers import enroll, now_us, post_batch


def test_it_stores_quorum_and_throughput_sections_in_one_batch(api, db, make_org):
    org = make_org()
    a = enroll(api, org.enrollment_token, "q-a")
    b = enroll(api, org.enrollment_token, "q-b")
    t = now_us() - 5_000_000
    exp = str(uuid.uuid4())
    batch = {
        "batch_id": str(uuid.uuid4()), "agent_id": a.agent_id,
        "quorum": {"groups": ["zone-majority"], "time_us": [t, t + 10_000],
                   "group_idx": [0, 0], "round": [1, 2], "k": [2, 2], "n": [3, 3],
                   "latency_us": [510, None], "status": [0, 1]},
        "throughput": {"peers": [b.agent_id], "time_us": [t, t + 1_000_000],
                       "peer_idx": [0, 0], "proto": ["tcp", "tcp"],
                       "experiment_id": [exp, exp], "direction": ["send", "send"],
                       "bytes_per_s": [1.2e8, 1.1e8], "loss_ratio": [None, None],
                       "jitter_us": [None, None]},
    }
    r = post_batch(api, a, batch)
    assert r.status_code == 202, r.text
    assert r.json()["accepted"] == {"mesh": 0, "quorum": 2, "storage": 0, "throughput": 2}
    with db.connect() as c:
        q = c.execute(text("SELECT round, k, n, latency_us, status FROM quorum_samples "
                           "WHERE org_id = :o ORDER BY round"), {"o": org.org_id}).all()
        tp = c.execute(text("SELECT count(*) FROM throughput_samples WHERE org_id = :o"),
                       {"o": org.org_id}).scalar()
    assert [tuple(row) for row in q] == [(1, 2, 3, 510, 0), (2, 2, 3, None, 1)]
    assert tp == 2


def test_a_bad_throughput_column_rejects_the_whole_batch(api, db, make_org):
    org = make_org()
    a = enroll(api, org.enrollment_token, "q-a")
    t = now_us() - 5_000_000
    batch = {
        "batch_id": str(uuid.uuid4()), "agent_id": a.agent_id,
        "quorum": {"groups": ["g"], "time_us": [t], "group_idx": [0], "round": [1], "k": [1],
                   "n": [1], "latency_us": [100], "status": [0]},
        "throughput": {"peers": [a.agent_id], "time_us": [t], "peer_idx": [0],
                       "proto": ["sctp"], "experiment_id": [str(uuid.uuid4())],
                       "direction": ["send"], "bytes_per_s": [1.0], "loss_ratio": [None],
                       "jitter_us": [None]},
    }
    r = post_batch(api, a, batch)
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", "throughput", "proto", 0]
    with db.connect() as c:
        assert c.execute(text("SELECT count(*) FROM quorum_samples WHERE org_id = :o"),
                         {"o": org.org_id}).scalar() == 0


def test_a_quorum_k_above_n_is_invalid(api, make_org):
    org = make_org()
    a = enroll(api, org.enrollment_token, "q-a")
    t = now_us() - 5_000_000
    batch = {"batch_id": str(uuid.uuid4()), "agent_id": a.agent_id,
             "quorum": {"groups": ["g"], "time_us": [t], "group_idx": [0], "round": [1],
                        "k": [4], "n": [3], "latency_us": [100], "status": [0]}}
    r = post_batch(api, a, batch)
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", "quorum", "k", 0]
