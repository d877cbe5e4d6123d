"""Session rules: a new session at every login, every session of a user ended by a password
change or removal, idle and absolute timeouts (the clock is moved through the session row)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx
from sqlalchemy import Engine, text

from stormwatch.core.config import Settings
from stormwatch.core.security import hash_token

PASSWORD = "correct horse battery staple"


def login(api: httpx.Client, email: str, password: str = PASSWORD) -> httpx.Response:
    r = api.post("/api/v1/auth/login", json={"email": email, "password": password})
    assert r.status_code == 200, r.text
    return r


@contextmanager
def signed_in(api_server, email: str, password: str = PASSWORD) -> Iterator[httpx.Client]:
    with api_server.client() as client:
        login(client, email, password)
        yield client


def as_cookie(api_server, token: str) -> httpx.Client:
    return api_server.client(cookies={"sw_session": token})


def age_session(db: Engine, token: str, column: str, seconds: int) -> None:
    with db.begin() as c:
        n = c.execute(text(f"UPDATE user_sessions SET {column} = {column} - make_interval("
                           "secs => :s) WHERE token_hash = :h"),
                      {"s": seconds, "h": hash_token(token)}).rowcount
    assert n == 1


def test_login_gives_a_new_session_and_ends_the_one_it_was_sent_with(api_server, make_org):
    org = make_org()
    with signed_in(api_server, org.email) as client:
        old = client.cookies["sw_session"]
        r = login(client, org.email)
        new = r.cookies["sw_session"]
        assert new != old
        assert client.get("/api/v1/auth/me").status_code == 200
    with as_cookie(api_server, old) as stale:
        r = stale.get("/api/v1/auth/me")
        assert r.status_code == 401, r.text


def test_a_password_change_ends_every_session_of_the_user(api_server, make_org):
    org = make_org()
    with signed_in(api_server, org.email) as other, \
            signed_in(api_server, org.email) as client:
        old = client.cookies["sw_session"]
        r = client.post("/api/v1/auth/password",
                        json={"current_password": PASSWORD,
                              "new_password": "a much longer new passphrase"},
                        headers={"X-CSRF-Token": client.cookies["sw_csrf"]})
        assert r.status_code == 200, r.text
        # The other browser is signed out; this one continues on a fresh session.
        assert other.get("/api/v1/auth/me").status_code == 401
        assert client.cookies["sw_session"] != old
        assert client.get("/api/v1/auth/me").status_code == 200
        with as_cookie(api_server, old) as stale:
            assert stale.get("/api/v1/auth/me").status_code == 401
        assert client.post("/api/v1/auth/login", json={
            "email": org.email, "password": PASSWORD}).status_code == 401
        login(client, org.email, "a much longer new passphrase")


def test_two_password_changes_at_once_one_wins_and_the_other_is_told(api_server, make_org):
    """Both browsers send the right current password at the same moment: the one that comes
    second no longer knows it, so it is refused, rather than both answered 200 and the
    first one's new password silently overwritten."""
    from concurrent.futures import ThreadPoolExecutor

    org = make_org()
    news = ["the first new passphrase", "the second new passphrase"]
    with signed_in(api_server, org.email) as a, signed_in(api_server, org.email) as b:
        def change(c: httpx.Client, new: str) -> int:
            return c.post("/api/v1/auth/password", headers={"X-CSRF-Token": c.cookies["sw_csrf"]},
                          json={"current_password": PASSWORD, "new_password": new}).status_code

        with ThreadPoolExecutor(2) as pool:
            codes = list(pool.map(change, [a, b], news))
        # The loser is told: 403 when its current password no longer matches, or 401 when the
        # winner's change has already ended its session (a change ends the other sessions).
        assert sorted(codes) in ([200, 401], [200, 403]), codes
        winner = news[codes.index(200)]
    with api_server.client() as c:
        assert login(c, org.email, winner).status_code == 200


def test_a_password_change_needs_the_current_password_and_a_valid_new_one(api_server,
                                                                           make_org):
    org = make_org()
    with signed_in(api_server, org.email) as client:
        csrf = {"X-CSRF-Token": client.cookies["sw_csrf"]}
        r = client.post("/api/v1/auth/password", headers=csrf, json={
            "current_password": "wrong", "new_password": "a much longer new passphrase"})
        assert r.status_code == 403 and "current_password" in r.text, r.text
        r = client.post("/api/v1/auth/password", headers=csrf, json={
            "current_password": PASSWORD, "new_password": "short"})
        assert r.status_code == 422 and "new_password" in r.text, r.text
        r = client.post("/api/v1/auth/password", json={
            "current_password": PASSWORD, "new_password": "a much longer new passphrase"})
        assert r.status_code == 403 and "X-CSRF-Token" in r.text, r.text
        # Nothing changed: the session and the old password still work.
        assert client.get("/api/v1/auth/me").status_code == 200
        login(client, org.email)


def test_an_api_key_cannot_change_a_password(api, make_org):
    org = make_org()
    r = api.post("/api/v1/auth/password", headers={"Authorization": f"Bearer {org.api_key}"},
                 json={"current_password": PASSWORD, "new_password": "a much longer one!!"})
    assert r.status_code == 403, r.text


def test_removing_a_user_ends_their_sessions(api_server, make_org):
    org = make_org()
    with signed_in(api_server, org.email) as admin:
        csrf = {"X-CSRF-Token": admin.cookies["sw_csrf"]}
        r = admin.post("/api/v1/users", headers=csrf, json={
            "email": f"viewer-{org.org_id}@example.test", "password": PASSWORD,
            "role": "viewer"})
        assert r.status_code == 201, r.text
        with signed_in(api_server, r.json()["email"]) as viewer:
            assert viewer.get("/api/v1/auth/me").status_code == 200
            assert admin.delete(f"/api/v1/users/{r.json()['id']}",
                                headers=csrf).status_code == 204
            assert viewer.get("/api/v1/auth/me").status_code == 401


def test_an_idle_session_expires(api_server, db, make_org):
    org = make_org()
    with signed_in(api_server, org.email) as client:
        token = client.cookies["sw_session"]
        idle_s = Settings().session_idle_timeout_min * 60  # the server's, from the same env
        # Just inside the idle timeout the session still works...
        age_session(db, token, "last_seen_at", idle_s - 120)
        assert client.get("/api/v1/auth/me").status_code == 200
        # ...and that use counted as activity: it starts the idle clock again.
        age_session(db, token, "last_seen_at", idle_s - 120)
        assert client.get("/api/v1/auth/me").status_code == 200
        age_session(db, token, "last_seen_at", idle_s + 60)
        r = client.get("/api/v1/auth/me")
        assert r.status_code == 401 and "expired" in r.text, r.text


def test_a_session_ends_at_the_absolute_timeout_however_active(api_server, db, make_org):
    org = make_org()
    with signed_in(api_server, org.email) as client:
        token = client.cookies["sw_session"]
        absolute_s = Settings().session_absolute_timeout_h * 3600
        age_session(db, token, "created_at", absolute_s - 120)
        assert client.get("/api/v1/auth/me").status_code == 200
        age_session(db, token, "created_at", 180)
        r = client.get("/api/v1/auth/me")
        assert r.status_code == 401 and "expired" in r.text, r.text


def test_use_is_recorded_at_most_once_a_minute(api_server, db, make_org):
    org = make_org()
    with signed_in(api_server, org.email) as client:
        token = client.cookies["sw_session"]

        def last_seen() -> object:
            with db.connect() as c:
                return c.execute(text("SELECT last_seen_at FROM user_sessions "
                                      "WHERE token_hash = :h"), {"h": hash_token(token)}).scalar()

        first = last_seen()
        assert client.get("/api/v1/auth/me").status_code == 200
        assert last_seen() == first
        age_session(db, token, "last_seen_at", 90)
        aged = last_seen()
        assert client.get("/api/v1/auth/me").status_code == 200
        assert last_seen() > aged  # type: ignore[operator]
