"""What the fuzzing suite found, each pinned by a test: a 500 on a rename to a taken name,
numbers read as date-times, strings read as booleans, a 400 for an undecodable body, and
statuses the schema did not document."""

from __future__ import annotations

import pytest

from stormwatch.main import app


@pytest.fixture
def key(api, make_org) -> dict[str, str]:
    return {"Authorization": f"Bearer {make_org().api_key}"}


def target(api, key, name: str) -> dict:
    r = api.post("/api/v1/storage-targets", headers=key, json={
        "name": name, "provider": "s3", "region": "us-east-1", "bucket": f"{name}-probe",
        "credentials": {"source": "none"}})
    assert r.status_code == 201, r.text
    return r.json()


def test_renaming_a_storage_target_to_a_taken_name_with_new_agents_is_a_409(api, key):
    target(api, key, "first")
    second = target(api, key, "second")
    r = api.patch(f"/api/v1/storage-targets/{second['id']}", headers=key,
                  json={"name": "first", "agent_ids": []})
    assert r.status_code == 409, r.text
    assert api.get(f"/api/v1/storage-targets/{second['id']}", headers=key).json()["name"] == \
        "second"


@pytest.mark.parametrize("start", ["0.5", "1732250000", "-3", "1e9"])
def test_a_number_is_not_taken_as_a_date_time(api, key, start):
    r = api.get("/api/v1/analytics/mesh/summary", params={"start": start}, headers=key)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["query", "start"]
    ok = api.get("/api/v1/analytics/mesh/summary", params={"start": "2026-11-23T00:00:00Z"},
                 headers=key)
    assert ok.status_code == 200, ok.text


def test_an_enrollment_token_expiry_must_be_a_date_time_not_a_number(api, key):
    r = api.post("/api/v1/enrollment-tokens", headers=key,
                 json={"name": "t", "expires_at": 1893456000})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", "expires_at"]


@pytest.mark.parametrize("value", ["yes", "true", 1, 0])
def test_a_boolean_field_takes_only_json_booleans(api, key, value):
    r = api.post("/api/v1/storage-targets", headers=key, json={
        "name": "b", "provider": "s3", "region": "us-east-1", "bucket": "b-probe",
        "credentials": {"source": "none"}, "assign_all": value})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", "assign_all"]
    r = api.patch("/api/v1/org", headers=key, json={"mesh_settings": {"enabled": value}})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", "mesh_settings", "enabled"]


def test_a_body_that_is_not_utf8_json_is_a_422_at_the_body(api, key):
    r = api.post("/api/v1/api-keys", headers={**key, "Content-Type": "application/json"},
                 content=b"\xbc\x9f~\x1a\xe3")
    assert r.status_code == 422, r.text
    assert r.json()["detail"] == [{"loc": ["body"], "msg": "the body is not valid UTF-8 JSON",
                                   "type": "json_invalid"}]


def test_every_operation_documents_the_refusals_every_route_can_send():
    for path, item in app.openapi()["paths"].items():
        for method, op in item.items():
            assert {"401", "403", "422", "503"} <= op["responses"].keys(), (method, path)
            # An id in the path can name nothing; upserts (PUT) and analyses' kinds cannot.
            if "{" in path and method != "put" and not path.startswith("/api/v1/analytics/"):
                assert "404" in op["responses"], (method, path)
