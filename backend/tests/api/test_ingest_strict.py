"""Every class of bad input to ingest gets a 4xx naming the problem, and nothing is written:
wrong JSON types, unknown fields, non-finite numbers anywhere, bad text, media types and
encodings, broken gzip streams, repeated samples; and unknown query parameters anywhere."""

from __future__ import annotations

import copy
import gzip
import uuid
from typing import Any

import orjson
import pytest
from sqlalchemy import text

from tests.helpers import enroll, mesh_batch, now_us, post_batch


@pytest.fixture
def fleet(api, make_org):
    org = make_org()
    agents = [enroll(api, org.enrollment_token, f"node-{i}", provider="aws",
                     region="us-east-1", zone="us-east-1a") for i in range(3)]
    return org, agents


def written(db, org_id: str) -> int:
    """Rows of every sample table and batch ids of the org: all must stay 0 on an error."""
    with db.connect() as c:
        return sum(c.execute(text(f"SELECT count(*) FROM {t} WHERE org_id = :o"),
                             {"o": org_id}).scalar()
                   for t in ("mesh_samples", "quorum_samples", "storage_samples",
                             "throughput_samples", "ingest_batches"))


def quorum_batch(agent, rounds: int = 4) -> dict[str, Any]:
    t = now_us() - 2_000_000
    return {"batch_id": str(uuid.uuid4()), "agent_id": agent.agent_id, "quorum": {
        "groups": ["zone-majority"], "time_us": [t + r for r in range(rounds)],
        "group_idx": [0] * rounds, "round": list(range(rounds)), "k": [2] * rounds,
        "n": [3] * rounds, "latency_us": [500] * rounds, "status": [0] * rounds}}


def setter(*path: str | int, value: Any):
    def mutate(b: dict) -> None:
        target = b
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return mutate


@pytest.mark.parametrize(
    ("mutate", "loc", "kind"),
    [
        (setter("mesh", "rtt_us", 2, value="300"), ["body", "mesh", "rtt_us", 2], "int_type"),
        (setter("mesh", "status", 4, value=False), ["body", "mesh", "status", 4], "int_type"),
        (setter("mesh", "round", 1, value="1e8"), ["body", "mesh", "round", 1], "int_type"),
        (setter("mesh", "rtt_us", 6, value="nan"), ["body", "mesh", "rtt_us", 6], "int_type"),
        (setter("mesh", "time_us", 3, value=[1, 2]), ["body", "mesh", "time_us", 3],
         "int_type"),
        (setter("mesh", "payload_bytes", 0, value={"v": 1}),
         ["body", "mesh", "payload_bytes", 0], "int_type"),
        (setter("mesh", "rtt_us", 8, value=412.5), ["body", "mesh", "rtt_us", 8], "int_type"),
        (setter("mesh", "round", 5, value=1e8), ["body", "mesh", "round", 5], "int_type"),
        (setter("mesh", "status", 0, value=None), ["body", "mesh", "status", 0], "missing"),
    ],
    ids=["string-number", "boolean-status", "string-exponent", "string-nan", "nested-array",
         "nested-object", "fraction-in-integer-column", "float-in-integer-column",
         "null-where-required"],
)
def test_a_value_of_another_json_type_than_its_column_is_refused_at_that_value(
        api, db, fleet, mutate, loc, kind):
    org, agents = fleet
    batch = mesh_batch(agents[0], [a.agent_id for a in agents], rounds=4)
    mutate(batch)
    r = post_batch(api, agents[0], batch)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"][0]
    assert (detail["loc"], detail["type"]) == (loc, kind), detail
    assert written(db, org.org_id) == 0


def test_a_float_column_takes_integers_and_fractions_but_not_strings(api, db, fleet):
    org, agents = fleet
    t = now_us() - 2_000_000
    batch = {"batch_id": str(uuid.uuid4()), "agent_id": agents[0].agent_id, "throughput": {
        "peers": [agents[1].agent_id], "time_us": [t, t + 1], "peer_idx": [0, 0],
        "proto": ["tcp", "udp"], "experiment_id": [str(uuid.uuid4())] * 2,
        "direction": ["send", "send"], "bytes_per_s": [125000000, 1.5e8],
        "loss_ratio": [None, 0.01], "jitter_us": [None, 30]}}
    bad = copy.deepcopy(batch)
    bad["throughput"]["loss_ratio"][1] = "0.01"
    r = post_batch(api, agents[0], bad)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", "throughput", "loss_ratio", 1]
    assert r.json()["detail"][0]["type"] == "number_type"
    assert written(db, org.org_id) == 0
    assert post_batch(api, agents[0], batch).status_code == 202


@pytest.mark.parametrize(
    ("mutate", "loc"),
    [
        (setter("sent_at", value="2026-11-23T00:00:00Z"), ["body", "sent_at"]),
        (setter("mesh", "jitter_us", value=[0] * 12), ["body", "mesh", "jitter_us"]),
        (setter("mesh", "comment", value=None), ["body", "mesh", "comment"]),
    ],
    ids=["undocumented-top-level-field", "column-of-another-section", "unknown-null-column"],
)
def test_an_unknown_field_anywhere_is_refused_by_name(api, db, fleet, mutate, loc):
    org, agents = fleet
    batch = mesh_batch(agents[0], [a.agent_id for a in agents], rounds=4)
    mutate(batch)
    r = post_batch(api, agents[0], batch)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == loc
    assert r.json()["detail"][0]["type"] == "extra_forbidden"
    assert written(db, org.org_id) == 0


@pytest.mark.parametrize(
    ("replace", "by", "loc"),
    [
        (b'"batch_id":"', b'"batch_id":NaN,"x":"', ["body", "batch_id"]),
        (b'"peers":["', b'"peers":[Infinity,"', ["body", "mesh", "peers", 0]),
        (b'"payload_bytes":[', b'"payload_bytes":[-Infinity,',
         ["body", "mesh", "payload_bytes", 0]),
        (b'"round":[', b'"round":[' + b"1" * 400 + b",", ["body", "mesh", "round", 0]),
    ],
    ids=["nan-as-batch-id", "infinity-as-peer", "minus-infinity-first", "integer-beyond-double"],
)
def test_a_non_finite_number_anywhere_is_refused_at_its_path(api, db, fleet, replace, by, loc):
    org, agents = fleet
    batch = mesh_batch(agents[0], [a.agent_id for a in agents], rounds=2)
    raw = orjson.dumps(batch)
    assert replace in raw
    raw = raw.replace(replace, by, 1)
    r = api.post("/api/v1/ingest/batches", content=raw,
                 headers={**agents[0].headers, "Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    detail = r.json()["detail"][0]
    assert (detail["loc"], detail["type"]) == (loc, "finite_number"), detail
    assert written(db, org.org_id) == 0


@pytest.mark.parametrize(
    ("name", "kind"),
    [(b'"zone\\u0000majority"', "string_pattern_mismatch"),
     (b'"zone\\u001bmajority"', "string_pattern_mismatch"),
     (b'"zone\\ud800"', "string_unicode"),
     (b'"\\udfffzone"', "string_unicode")],
    ids=["nul", "escape-character", "lone-high-surrogate", "lone-low-surrogate"],
)
@pytest.mark.parametrize("gzip_body", [False, True], ids=["plain", "gzip"])
def test_a_group_name_with_a_control_character_or_lone_surrogate_is_refused_by_field(
        api, db, fleet, name, kind, gzip_body):
    org, agents = fleet
    raw = orjson.dumps(quorum_batch(agents[0])).replace(b'"zone-majority"', name)
    headers = {**agents[0].headers, "Content-Type": "application/json"}
    if gzip_body:
        raw, headers["Content-Encoding"] = gzip.compress(raw), "gzip"
    r = api.post("/api/v1/ingest/batches", content=raw, headers=headers)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"][0]
    assert (detail["loc"], detail["type"]) == (["body", "quorum", "groups", 0], kind), detail
    assert written(db, org.org_id) == 0
    assert post_batch(api, agents[0], quorum_batch(agents[0])).status_code == 202


@pytest.mark.parametrize(
    ("headers", "body"),
    [
        ({"Content-Type": "text/plain"}, None),
        ({"Content-Type": "application/x-www-form-urlencoded"}, None),
        ({"Content-Type": "application/xml"}, b"<batch/>"),
        ({}, None),
        ({"Content-Type": "application/json", "Content-Encoding": "br"}, None),
        ({"Content-Type": "application/json", "Content-Encoding": "deflate"}, None),
    ],
    ids=["text-plain", "form-encoded", "xml", "no-content-type", "brotli", "deflate"],
)
def test_a_body_that_is_not_declared_json_or_has_an_unknown_encoding_gets_415(
        api, db, fleet, headers, body):
    org, agents = fleet
    batch = mesh_batch(agents[0], [a.agent_id for a in agents], rounds=4)
    r = api.post("/api/v1/ingest/batches", content=body or orjson.dumps(batch),
                 headers={**agents[0].headers, **headers})
    assert r.status_code == 415, r.text
    assert "Content-" in r.json()["detail"]
    assert written(db, org.org_id) == 0
    # The charset parameter is fine.
    ok = api.post("/api/v1/ingest/batches", content=orjson.dumps(batch), headers={
        **agents[0].headers, "Content-Type": "application/json; charset=utf-8"})
    assert ok.status_code == 202, ok.text


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda gz: gz[:-8], "incomplete"),
        (lambda gz: gz[:-3], "incomplete"),
        (lambda gz: gz + b"garbage", "follow the end"),
        (lambda gz: gz + gz, "follow the end"),
        (lambda gz: orjson.dumps({"not": "gzip"}), "not"),
    ],
    ids=["no-trailer", "half-a-trailer", "trailing-garbage", "second-member", "not-gzip"],
)
def test_a_gzip_stream_must_be_complete_and_alone(api, db, fleet, damage, words):
    org, agents = fleet
    batch = mesh_batch(agents[0], [a.agent_id for a in agents], rounds=4)
    body = damage(gzip.compress(orjson.dumps(batch)))
    r = api.post("/api/v1/ingest/batches", content=body, headers={
        **agents[0].headers, "Content-Type": "application/json", "Content-Encoding": "gzip"})
    assert r.status_code == 422, r.text
    detail = r.json()["detail"][0]
    assert detail["loc"] == ["body"] and detail["type"] == "gzip_invalid", detail
    assert words in detail["msg"]
    assert written(db, org.org_id) == 0


def test_a_sample_repeated_for_the_same_peer_and_round_is_refused_at_the_repeat(
        api, db, fleet):
    org, agents = fleet
    batch = mesh_batch(agents[0], [a.agent_id for a in agents], rounds=5)
    m = batch["mesh"]
    # Sample 13 becomes a second sample of sample 4's peer and round (values differ).
    m["peer_idx"][13], m["round"][13] = m["peer_idx"][4], m["round"][4]
    r = post_batch(api, agents[0], batch)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"][0]
    assert (detail["loc"], detail["type"]) == (["body", "mesh", "round", 13], "duplicate_sample")
    assert written(db, org.org_id) == 0
    # The same round to another peer, or the same peer in another round, is not a repeat.
    ok = mesh_batch(agents[0], [a.agent_id for a in agents], rounds=5)
    assert post_batch(api, agents[0], ok).status_code == 202


def test_a_quorum_sample_repeated_for_the_same_group_and_round_is_refused(api, db, fleet):
    org, agents = fleet
    batch = quorum_batch(agents[0], rounds=4)
    batch["quorum"]["round"][3] = 1
    r = post_batch(api, agents[0], batch)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", "quorum", "round", 3]
    assert written(db, org.org_id) == 0


@pytest.mark.parametrize(
    ("path", "param"),
    [
        ("/api/v1/agents", "adjusted"),
        ("/api/v1/analytics/mesh/heatmap", "adjusted"),
        ("/api/v1/analytics/mesh/summary", "windw_s"),
        ("/api/v1/org", "org_id"),
    ],
    ids=["listing", "analysis-without-that-option", "misspelt-option", "org-from-the-query"],
)
def test_an_unknown_query_parameter_is_refused_by_name(api, make_org, path, param):
    org = make_org()
    headers = {"Authorization": f"Bearer {org.api_key}"}
    r = api.get(path, params={param: "1"}, headers=headers)
    assert r.status_code == 422, r.text
    assert r.json()["detail"] == [{"loc": ["query", param], "msg": "unknown query parameter",
                                   "type": "extra_forbidden"}]
    assert api.get(path, headers=headers).status_code == 200


def test_a_query_value_with_a_control_character_is_refused_by_name(api, make_org):
    # Found by the fuzzer: a NUL in a filter reached PostgreSQL, which refuses it in text.
    org = make_org()
    headers = {"Authorization": f"Bearer {org.api_key}"}
    r = api.get("/api/v1/analytics/storage/daily-medians",
                params=[("content", "bin\x00ary"), ("content", "text")], headers=headers)
    assert r.status_code == 422, r.text
    assert r.json()["detail"] == [{"loc": ["query", "content"],
                                   "msg": "control characters are not allowed",
                                   "type": "string_pattern_mismatch"}]


@pytest.mark.parametrize(
    ("replace", "by", "loc"),
    [
        (b'"batch_id":"', b'"batch_id":"00000000-0000-4000-8000-000000000000","batch_id":"',
         ["body", "batch_id"]),
        (b'"rtt_us":[', b'"rtt_us":[1,2],"rtt_us":[', ["body", "mesh", "rtt_us"]),
        (b'"mesh":{', b'"mesh":{},"mesh":{', ["body", "mesh"]),
        # A colon escaped in a string must not hide the repeat from a count of colons.
        (b'"agent_id":"', b'"x\\u003ay":1,"agent_id":"x","agent_id":"', ["body", "agent_id"]),
    ],
    ids=["batch-id-twice", "column-twice", "section-twice", "behind-an-escaped-colon"],
)
@pytest.mark.parametrize("gzip_body", [False, True], ids=["plain", "gzip"])
def test_a_key_given_twice_anywhere_is_refused_by_name(api, db, fleet, replace, by, loc,
                                                        gzip_body):
    org, agents = fleet
    batch = mesh_batch(agents[0], [a.agent_id for a in agents], rounds=2)
    raw = orjson.dumps(batch)
    assert replace in raw
    raw = raw.replace(replace, by, 1)
    headers = {**agents[0].headers, "Content-Type": "application/json"}
    if gzip_body:
        raw = gzip.compress(raw)
        headers["Content-Encoding"] = "gzip"
    r = api.post("/api/v1/ingest/batches", content=raw, headers=headers)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"][0]
    assert (detail["loc"], detail["type"]) == (loc, "duplicate_key"), detail
    assert repr(loc[-1]) in detail["msg"] or f'"{loc[-1]}"' in detail["msg"], detail
    assert written(db, org.org_id) == 0


def test_colons_inside_names_are_no_repeated_keys(api, db, fleet):
    """Colons in strings, plain and escaped, count for nothing in the repeat check."""
    org, agents = fleet
    raw = orjson.dumps(quorum_batch(agents[0])).replace(b'"zone-majority"',
                                                        b'"zone:majority\\u003a2:3"')
    r = api.post("/api/v1/ingest/batches", content=raw,
                 headers={**agents[0].headers, "Content-Type": "application/json"})
    assert r.status_code == 202, r.text


def test_a_mesh_reply_from_another_agent_is_a_loss_with_its_own_status(api, db, fleet):
    org, agents = fleet
    batch = mesh_batch(agents[0], [a.agent_id for a in agents], rounds=2)
    mesh = batch["mesh"]
    mesh["status"][1], mesh["rtt_us"][1] = 5, None  # 5 wrong_peer: no RTT, a loss
    assert post_batch(api, agents[0], batch).status_code == 202
    with db.connect() as c:
        assert c.execute(text("SELECT count(*) FROM mesh_samples WHERE org_id = :o AND "
                              "status = 5 AND rtt_us IS NULL"), {"o": org.org_id}).scalar() == 1
    bad = mesh_batch(agents[0], [a.agent_id for a in agents], rounds=2)
    bad["mesh"]["status"][0] = 5  # keeps its RTT
    r = post_batch(api, agents[0], bad)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "mesh", "rtt_us", 0]
    bad = mesh_batch(agents[0], [a.agent_id for a in agents], rounds=2)
    bad["mesh"]["status"][0], bad["mesh"]["rtt_us"][0] = 6, None
    r = post_batch(api, agents[0], bad)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "mesh", "status", 0]
    # Only the mesh has peers to mistake: a quorum sample of status 5 is refused.
    q = quorum_batch(agents[0])
    q["quorum"]["status"][0], q["quorum"]["latency_us"][0] = 5, None
    r = post_batch(api, agents[0], q)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "quorum", "status", 0]
