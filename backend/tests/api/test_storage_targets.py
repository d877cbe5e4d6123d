"""Storage targets: per-org CRUD, write-only credentials, assignment to agents and the
`storage.targets` entries agents receive in their config."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from tests.helpers import enroll, now_us, post_batch

SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCY-not-a-real-key"

@pytest.fixture
def storage_api(api: httpx.Client) -> httpx.Client:
    return api


def key(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"}


def s3_target(**over: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "aws use1", "provider": "s3", "region": "us-east-1", "bucket": "sw-probe",
        "interval_s": 600,
        "variants": {"gzip9": {"enabled": True}, "replication": {"enabled": True, "copies": 3}},
        "credentials": {"source": "inline", "access_key_id": "AKIAEXAMPLE",
                        "secret_access_key": SECRET},
    }
    body.update(over)
    return body


def test_a_target_is_created_listed_updated_and_deleted_within_its_org(storage_api, make_org):
    org = make_org()
    h = key(org.api_key)
    r = storage_api.post("/api/v1/storage-targets", json=s3_target(), headers=h)
    assert r.status_code == 201, r.text
    created = r.json()
    assert created["provider"] == "s3" and created["interval_s"] == 600
    assert created["sizes_bytes"]["binary"] == [1024, 10240, 102400, 1048576, 10485760]
    assert created["sizes_bytes"]["text"][-1] == 50 * 1024 * 1024
    assert created["variants"]["replication"]["copies"] == 3
    tid = created["id"]
    listed = storage_api.get("/api/v1/storage-targets", headers=h)
    assert listed.status_code == 200, listed.text
    assert [t["id"] for t in listed.json()] == [tid]
    r = storage_api.patch(f"/api/v1/storage-targets/{tid}", headers=h,
                          json={"interval_s": 300, "sizes_bytes": {"binary": [1024], "text": []}})
    assert r.status_code == 200, r.text
    assert r.json()["interval_s"] == 300 and r.json()["sizes_bytes"]["binary"] == [1024]
    assert r.json()["credentials"]["has_secret"] is True
    assert storage_api.get(f"/api/v1/storage-targets/{tid}", headers=h).json()["interval_s"] == 300
    assert storage_api.post("/api/v1/storage-targets", json=s3_target(),
                            headers=h).status_code == 409
    assert storage_api.delete(f"/api/v1/storage-targets/{tid}", headers=h).status_code == 204
    assert storage_api.get(f"/api/v1/storage-targets/{tid}", headers=h).status_code == 404


def test_inline_credentials_are_stored_encrypted_and_never_returned(storage_api, make_org, db,
                                                                    services):
    org = make_org()
    h = key(org.api_key)
    r = storage_api.post("/api/v1/storage-targets", json=s3_target(), headers=h)
    assert r.status_code == 201
    tid = r.json()["id"]
    reads = [r.text, storage_api.get("/api/v1/storage-targets", headers=h).text,
             storage_api.get(f"/api/v1/storage-targets/{tid}", headers=h).text,
             storage_api.patch(f"/api/v1/storage-targets/{tid}", headers=h,
                               json={"region": "us-east-2"}).text,
             storage_api.get("/api/v1/openapi.json").text]
    for body in reads:
        assert SECRET not in body and "AKIAEXAMPLE" not in body
    assert r.json()["credentials"] == {"source": "inline", "path": None, "env_vars": {},
                                       "has_secret": True, "account_name": None}
    with db.connect() as c:
        row = c.execute(text("SELECT credentials_ref::text, credentials_ciphertext "
                             "FROM storage_targets WHERE id = :i"), {"i": tid}).one()
    assert SECRET not in row[0] and row[1] and SECRET not in row[1]
    logs = "".join(p.read_text(errors="replace") for p in services.tmp.glob("api-*.log"))
    assert SECRET not in logs


def test_another_org_can_neither_see_nor_change_a_target(storage_api, make_org):
    mine, theirs = make_org(), make_org()
    tid = storage_api.post("/api/v1/storage-targets", json=s3_target(),
                           headers=key(mine.api_key)).json()["id"]
    other = key(theirs.api_key)
    assert storage_api.get("/api/v1/storage-targets", headers=other).json() == []
    assert storage_api.get(f"/api/v1/storage-targets/{tid}", headers=other).status_code == 404
    assert storage_api.patch(f"/api/v1/storage-targets/{tid}", headers=other,
                             json={"bucket": "x"}).status_code == 404
    assert storage_api.delete(f"/api/v1/storage-targets/{tid}", headers=other).status_code == 404


def test_agent_tokens_cannot_manage_targets_and_strangers_are_refused(storage_api, make_org):
    org = make_org()
    agent = enroll(storage_api, org.enrollment_token, "st-agent")
    assert storage_api.get("/api/v1/storage-targets", headers=agent.headers).status_code == 403
    assert storage_api.post("/api/v1/storage-targets", json=s3_target(),
                            headers=agent.headers).status_code == 403
    assert storage_api.get("/api/v1/storage-targets").status_code == 401


@pytest.mark.parametrize(("body", "loc"), [
    (s3_target(provider="dropbox"), ["body", "provider"]),
    (s3_target(interval_s=1), ["body", "interval_s"]),
    (s3_target(sizes_bytes={"binary": [0]}), ["body", "sizes_bytes", "binary", 0]),
    (s3_target(endpoint="ftp://host"), ["body", "endpoint"]),
    (s3_target(credentials={"source": "env", "access_key_id_var": "NOT A VAR"}),
     ["body", "credentials", "env", "access_key_id_var"]),
    (s3_target(credentials={"source": "file", "path": "relative.json"}),
     ["body", "credentials", "file", "path"]),
    (s3_target(variants={"concurrency": {"enabled": True, "levels": [0]}}),
     ["body", "variants", "concurrency", "levels", 0]),
    (s3_target(agent_ids=[str(uuid.uuid4())]), ["body", "agent_ids", 0]),
])
def test_an_invalid_target_is_rejected_naming_the_field(storage_api, make_org, body, loc):
    org = make_org()
    r = storage_api.post("/api/v1/storage-targets", json=body, headers=key(org.api_key))
    assert r.status_code == 422, r.text
    assert any(d["loc"][:len(loc)] == loc for d in r.json()["detail"]), r.json()
    assert SECRET not in r.text


def test_inline_credentials_must_fit_the_provider(storage_api, make_org):
    org = make_org()
    r = storage_api.post("/api/v1/storage-targets", headers=key(org.api_key), json=s3_target(
        provider="gcs", credentials={"source": "inline", "access_key_id": "a"}))
    assert r.status_code == 422


def test_an_agent_receives_only_its_enabled_targets_with_their_credentials(storage_api,
                                                                          make_org):
    org = make_org()
    h = key(org.api_key)
    a = enroll(storage_api, org.enrollment_token, "st-a")
    b = enroll(storage_api, org.enrollment_token, "st-b")
    only_a = storage_api.post("/api/v1/storage-targets", headers=h, json=s3_target(
        name="only a", agent_ids=[a.agent_id], endpoint="http://127.0.0.1:9000",
        path_style=True)).json()
    everyone = storage_api.post("/api/v1/storage-targets", headers=h, json={
        "name": "everyone", "provider": "azure", "bucket": "probe", "assign_all": True,
        "credentials": {"source": "env", "account_name_var": "SW_AZ_ACCOUNT",
                        "account_key_var": "SW_AZ_KEY"}}).json()
    storage_api.post("/api/v1/storage-targets", headers=h, json={
        "name": "disabled", "provider": "gcs", "bucket": "x", "assign_all": True,
        "enabled": False, "credentials": {"source": "none"}})

    cfg_a = storage_api.get("/api/v1/agent/config", headers=a.headers).json()
    cfg_b = storage_api.get("/api/v1/agent/config", headers=b.headers).json()
    by_id = {t["target_id"]: t for t in cfg_a["storage"]["targets"]}
    assert set(by_id) == {only_a["id"], everyone["id"]}
    assert [t["target_id"] for t in cfg_b["storage"]["targets"]] == [everyone["id"]]
    s3 = by_id[only_a["id"]]
    assert s3["credentials"] == {"source": "inline", "access_key_id": "AKIAEXAMPLE",
                                 "secret_access_key": SECRET}
    assert s3["prefix"] == f"stormwatch-probe/{a.agent_id}/"
    assert s3["endpoint"] == "http://127.0.0.1:9000" and s3["path_style"] is True
    assert set(s3["variants"]) == {"gzip9", "replication"}
    az = by_id[everyone["id"]]
    assert az["credentials"] == {"source": "env", "account_name_var": "SW_AZ_ACCOUNT",
                                 "account_key_var": "SW_AZ_KEY"}
    assert "endpoint" not in az and az["variants"] == {}

    etag = storage_api.get("/api/v1/agent/config", headers=b.headers).headers["etag"]
    storage_api.patch(f"/api/v1/storage-targets/{only_a['id']}", headers=h,
                      json={"agent_ids": [a.agent_id, b.agent_id]})
    changed = storage_api.get("/api/v1/agent/config",
                              headers={**b.headers, "If-None-Match": etag})
    assert changed.status_code == 200
    assert len(changed.json()["storage"]["targets"]) == 2


def test_ingest_accepts_storage_samples_for_the_orgs_own_target_only(storage_api, make_org, db):
    org, other = make_org(), make_org()
    agent = enroll(storage_api, org.enrollment_token, "st-ingest")
    mine = storage_api.post("/api/v1/storage-targets", headers=key(org.api_key),
                            json=s3_target(assign_all=True)).json()["id"]
    theirs = storage_api.post("/api/v1/storage-targets", headers=key(other.api_key),
                              json=s3_target()).json()["id"]
    t = now_us() - 2_000_000

    def batch(target: str) -> dict[str, Any]:
        return {"batch_id": str(uuid.uuid4()), "agent_id": agent.agent_id, "storage": {
            "targets": [target], "time_us": [t, t + 1000], "target_idx": [0, 0],
            "op": ["put", "get"], "variant": ["plain", "plain"], "content": ["binary", "binary"],
            "size_bytes": [1024, 1024], "stored_bytes": [1024, 1024], "copies": [1, 1],
            "concurrency": [1, 1], "attempt": [1, 2], "latency_us": [5000, None],
            "ttfb_us": [4000, None], "rtt_us": [300, 300], "bytes_per_s": [None, None],
            "status": [0, 3], "error_class": [None, "not_found"]}}

    r = post_batch(storage_api, agent, batch(mine))
    assert r.status_code == 202, r.text
    assert post_batch(storage_api, agent, batch(theirs)).status_code == 422
    with db.connect() as c:
        rows = c.execute(text("SELECT op, attempt, error_class FROM storage_samples "
                              "WHERE target_id = :t ORDER BY time"), {"t": mine}).all()
    assert [tuple(r) for r in rows] == [("put", 1, None), ("get", 2, "not_found")]


def test_a_target_whose_secret_cannot_be_decrypted_is_withheld_from_agents(services):
    from stormwatch.core.security import encrypt_secret
    from stormwatch.models.storage_target import StorageTarget
    from stormwatch.services.storage_targets import agent_entry

    agent_id = uuid.uuid4()
    target = StorageTarget(
        id=uuid.uuid4(), provider="azure", bucket="c", prefix="p/", path_style=False,
        interval_s=600, op_timeout_ms=1000, contents=["binary"],
        sizes_bytes={"binary": [1024], "text": []}, variants={}, credentials_source="inline",
        credentials_ref={"account_name": "acct"}, endpoint="", region="",
        credentials_ciphertext=encrypt_secret('{"account_key": "a2V5"}'))
    entry = agent_entry(target, agent_id)
    assert entry is not None
    assert entry["credentials"] == {"source": "inline", "account_name": "acct",
                                    "account_key": "a2V5"}
    assert entry["prefix"] == f"p/{agent_id}/"
    target.credentials_ciphertext = "gAAAAAB-not-a-token-made-with-this-key"
    assert agent_entry(target, agent_id) is None
