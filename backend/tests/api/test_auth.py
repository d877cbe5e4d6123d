from tests.helpers import enroll


def login(api, org):
    r = api.post("/api/v1/auth/login", json={"email": org.email, "password": org.password})
    assert r.status_code == 200, r.text
    return r


def test_login_sets_an_httponly_session_cookie_and_a_csrf_cookie(api, make_org):
    org = make_org()
    r = login(api, org)
    cookies = r.headers.get_list("set-cookie")
    session = next(c for c in cookies if c.startswith("sw_session="))
    csrf = next(c for c in cookies if c.startswith("sw_csrf="))
    assert "HttpOnly" in session and "SameSite=lax" in session
    assert "HttpOnly" not in csrf
    me = api.get("/api/v1/auth/me")
    assert me.status_code == 200
    assert me.json()["email"] == org.email


def test_it_refuses_a_wrong_password(api, make_org):
    org = make_org()
    r = api.post("/api/v1/auth/login", json={"email": org.email, "password": "nope"})
    assert r.status_code == 401
    assert "sw_session" not in r.cookies


def test_writes_with_the_cookie_need_the_csrf_header(api, make_org):
    org = make_org()
    login(api, org)
    assert api.post("/api/v1/api-keys", json={"name": "x"}).status_code == 403
    r = api.post("/api/v1/api-keys", json={"name": "x"},
                 headers={"X-CSRF-Token": "wrong"})
    assert r.status_code == 403
    r = api.post("/api/v1/api-keys", json={"name": "ci"},
                 headers={"X-CSRF-Token": api.cookies["sw_csrf"]})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["key"].startswith("swk_") and body["key"].startswith(body["prefix"])


def test_an_api_key_is_shown_once_and_stored_hashed(api, db, make_org):
    from sqlalchemy import text

    org = make_org()
    login(api, org)
    created = api.post("/api/v1/api-keys", json={"name": "ci"},
                       headers={"X-CSRF-Token": api.cookies["sw_csrf"]}).json()
    listed = api.get("/api/v1/api-keys").json()
    assert all("key" not in k for k in listed)
    with db.connect() as c:
        stored = c.execute(text("SELECT token_hash FROM api_keys WHERE id = :i"),
                           {"i": created["id"]}).scalar()
    assert created["key"] not in stored and len(stored) == 64


def test_an_api_key_sees_only_its_org(api, make_org):
    org_a, org_b = make_org(), make_org()
    enroll(api, org_a.enrollment_token, "a-1")
    b1 = enroll(api, org_b.enrollment_token, "b-1")
    a_key = {"Authorization": f"Bearer {org_a.api_key}"}
    names = [a["name"] for a in api.get("/api/v1/agents", headers=a_key).json()]
    assert names == ["a-1"]
    assert api.get(f"/api/v1/agents/{b1.agent_id}", headers=a_key).status_code == 404
    assert api.delete(f"/api/v1/agents/{b1.agent_id}", headers=a_key).status_code == 404
    assert api.get("/api/v1/org", headers=a_key).json()["id"] == org_a.org_id


def test_a_revoked_api_key_stops_working(api, make_org):
    org = make_org()
    login(api, org)
    csrf = {"X-CSRF-Token": api.cookies["sw_csrf"]}
    key = api.post("/api/v1/api-keys", json={"name": "tmp"}, headers=csrf).json()
    bearer = {"Authorization": f"Bearer {key['key']}"}
    assert api.get("/api/v1/agents", headers=bearer).status_code == 200
    assert api.delete(f"/api/v1/api-keys/{key['id']}", headers=csrf).status_code == 204
    assert api.get("/api/v1/agents", headers=bearer).status_code == 401


def test_logout_ends_the_session(api, make_org):
    org = make_org()
    login(api, org)
    r = api.post("/api/v1/auth/logout", headers={"X-CSRF-Token": api.cookies["sw_csrf"]})
    assert r.status_code == 204
    assert api.get("/api/v1/auth/me").status_code == 401
