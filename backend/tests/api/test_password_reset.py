"""Password reset end to end: the mailed link (caught by a local SMTP server) sets a new
password once, ends the other sessions, and the answer never says whether an account
exists."""

from __future__ import annotations

import uuid

from sqlalchemy import text

from tests.api.conftest import logged_in

NEW_PASSWORD = "my brand new long password"


def ask_reset(client, email: str):
    r = client.post("/api/v1/auth/password-reset", json={"email": email})
    assert r.status_code == 202, r.text
    return r


def test_a_reset_link_sets_a_new_password_and_ends_the_other_sessions(mail_api, make_org):
    org = make_org()
    with logged_in(mail_api.server, org.email, org.password) as old_session:
        assert old_session.get("/api/v1/auth/me").status_code == 200
        with mail_api.server.client() as c:
            ask_reset(c, org.email.upper())  # addresses match whatever their case
            token = mail_api.link_token(mail_api.wait_for_mail(org.email), "reset-password")
            r = c.post("/api/v1/auth/password-reset/confirm",
                       json={"token": token, "password": NEW_PASSWORD})
            assert r.status_code == 200, r.text
            assert r.json()["email"] == org.email
            assert c.get("/api/v1/auth/me").status_code == 200  # this browser is signed in
        assert old_session.get("/api/v1/auth/me").status_code == 401
    with mail_api.server.client() as c:
        r = c.post("/api/v1/auth/login", json={"email": org.email, "password": org.password})
        assert r.status_code == 401
        r = c.post("/api/v1/auth/login", json={"email": org.email, "password": NEW_PASSWORD})
        assert r.status_code == 200, r.text


def test_a_reused_reset_link_is_refused(mail_api, make_org):
    org = make_org()
    with mail_api.server.client() as c:
        ask_reset(c, org.email)
        token = mail_api.link_token(mail_api.wait_for_mail(org.email), "reset-password")
        first = c.post("/api/v1/auth/password-reset/confirm",
                       json={"token": token, "password": NEW_PASSWORD})
        assert first.status_code == 200, first.text
        again = c.post("/api/v1/auth/password-reset/confirm",
                       json={"token": token, "password": "someone else's password"})
        assert again.status_code == 410 and "already used" in again.json()["detail"], again.text
        r = c.post("/api/v1/auth/login", json={"email": org.email, "password": NEW_PASSWORD})
        assert r.status_code == 200


def test_an_expired_reset_link_is_refused_and_the_password_stays(mail_api, make_org, db):
    org = make_org()
    with mail_api.server.client() as c:
        ask_reset(c, org.email)
        token = mail_api.link_token(mail_api.wait_for_mail(org.email), "reset-password")
        with db.begin() as conn:  # the link's hour has passed
            conn.execute(text("UPDATE account_links SET expires_at = now() - interval '1 second'"
                              " WHERE purpose = 'reset' AND email = :e"), {"e": org.email})
        r = c.post("/api/v1/auth/password-reset/confirm",
                   json={"token": token, "password": NEW_PASSWORD})
        assert r.status_code == 410 and "expired" in r.json()["detail"], r.text
        r = c.post("/api/v1/auth/login", json={"email": org.email, "password": org.password})
        assert r.status_code == 200


def test_an_unknown_email_gets_the_same_answer_and_no_mail(mail_api, make_org):
    org = make_org()
    unknown = f"nobody-{uuid.uuid4().hex[:10]}@example.test"
    with mail_api.server.client() as c:
        for_unknown = ask_reset(c, unknown)
        for_known = ask_reset(c, org.email)
    assert for_unknown.json() == for_known.json()
    assert for_unknown.headers["content-length"] == for_known.headers["content-length"]
    # The known address's mail left after the unknown one's answer: had that one sent
    # anything, it would be here by now.
    mail_api.wait_for_mail(org.email)
    assert mail_api.mail_to(unknown) == []


def test_bad_reset_requests_are_clear_4xx(mail_api):
    with mail_api.server.client() as c:
        r = c.post("/api/v1/auth/password-reset", json={"email": "not an address"})
        assert r.status_code == 422 and "email" in r.text
        r = c.post("/api/v1/auth/password-reset/confirm",
                   json={"token": "swr_" + "y" * 40, "password": NEW_PASSWORD})
        assert r.status_code == 404 and "unknown password reset link" in r.json()["detail"]
        r = c.post("/api/v1/auth/password-reset/confirm",
                   json={"token": "../../etc", "password": NEW_PASSWORD})
        assert r.status_code == 422 and "token" in r.text
