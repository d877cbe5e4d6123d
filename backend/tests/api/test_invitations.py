"""Invitations end to end: an admin invites by email, the mail (caught by a local SMTP
server) carries a single-use link, following it sets the password and the person logs in."""

from __future__ import annotations

import uuid

from sqlalchemy import text

from tests.api.conftest import logged_in

NEW_PASSWORD = "a fresh and long password"


def fresh_email() -> str:
    return f"invitee-{uuid.uuid4().hex[:10]}@example.test"


def invite(admin, email: str, role: str = "viewer") -> dict:
    r = admin.post("/api/v1/invitations", json={"email": email, "role": role})
    assert r.status_code == 201, r.text
    return r.json()


def test_an_invited_person_sets_a_password_through_the_mailed_link_and_logs_in(
        mail_api, make_org, db):
    org = make_org()
    email = fresh_email()
    with logged_in(mail_api.server, org.email, org.password) as admin:
        created = invite(admin, email, "viewer")
        assert created["email_sent"] is True and created["invite_url"] is None
        assert [i["email"] for i in admin.get("/api/v1/invitations").json()] == [email]
        msg = mail_api.wait_for_mail(email)
        assert org.email in msg.get_body(("plain",)).get_content()  # who invited
        token = mail_api.link_token(msg, "accept-invite")
        with db.connect() as c:
            stored = c.execute(text("SELECT token_hash FROM account_links WHERE id = :i"),
                               {"i": created["id"]}).scalar()
        assert token not in stored and len(stored) == 64

        with mail_api.server.client() as person:
            r = person.post("/api/v1/auth/invitations/accept",
                            json={"token": token, "password": NEW_PASSWORD})
            assert r.status_code == 200, r.text
            assert r.json()["email"] == email and r.json()["role"] == "viewer"
            assert r.json()["org_id"] == org.org_id
            assert person.get("/api/v1/auth/me").json()["email"] == email
        with logged_in(mail_api.server, email, NEW_PASSWORD) as again:
            assert again.get("/api/v1/auth/me").json()["role"] == "viewer"
        assert admin.get("/api/v1/invitations").json() == []
        assert email in [u["email"] for u in admin.get("/api/v1/users").json()]


def test_a_reused_invitation_link_is_refused(mail_api, make_org):
    org = make_org()
    email = fresh_email()
    with logged_in(mail_api.server, org.email, org.password) as admin:
        invite(admin, email)
    token = mail_api.link_token(mail_api.wait_for_mail(email), "accept-invite")
    with mail_api.server.client() as c:
        first = c.post("/api/v1/auth/invitations/accept",
                       json={"token": token, "password": NEW_PASSWORD})
        assert first.status_code == 200, first.text
        again = c.post("/api/v1/auth/invitations/accept",
                       json={"token": token, "password": "another long password"})
    assert again.status_code == 410, again.text
    assert "already used" in again.json()["detail"]
    with mail_api.server.client() as c:
        r = c.post("/api/v1/auth/login", json={"email": email, "password": NEW_PASSWORD})
        assert r.status_code == 200  # the second attempt changed nothing


def test_an_expired_invitation_link_is_refused_and_creates_no_user(mail_api, make_org, db):
    org = make_org()
    email = fresh_email()
    with logged_in(mail_api.server, org.email, org.password) as admin:
        created = invite(admin, email)
        token = mail_api.link_token(mail_api.wait_for_mail(email), "accept-invite")
        with db.begin() as c:  # the link's week has passed
            c.execute(text("UPDATE account_links SET expires_at = now() - interval '1 second' "
                           "WHERE id = :i"), {"i": created["id"]})
        with mail_api.server.client() as c:
            r = c.post("/api/v1/auth/invitations/accept",
                       json={"token": token, "password": NEW_PASSWORD})
        assert r.status_code == 410, r.text
        assert "expired" in r.json()["detail"]
        assert email not in [u["email"] for u in admin.get("/api/v1/users").json()]
        assert admin.get("/api/v1/invitations").json() == []


def test_a_withdrawn_or_unknown_invitation_link_is_refused(mail_api, make_org):
    org = make_org()
    email = fresh_email()
    with logged_in(mail_api.server, org.email, org.password) as admin:
        created = invite(admin, email)
        token = mail_api.link_token(mail_api.wait_for_mail(email), "accept-invite")
        assert admin.delete(f"/api/v1/invitations/{created['id']}").status_code == 204
        assert admin.get("/api/v1/invitations").json() == []
        # Both left one audit entry each, by the admin, naming the invitee; no link in them.
        r = admin.get("/api/v1/audit", params={"target_type": "invitation"})
        events = {e["action"]: e for e in r.json()["items"]}
        assert set(events) == {"invitation.create", "invitation.revoke"}, r.text
        assert all(e["target_label"] == email and e["actor_label"] == org.email
                   for e in events.values()), r.text
        assert token not in r.text
    with mail_api.server.client() as c:
        r = c.post("/api/v1/auth/invitations/accept",
                   json={"token": token, "password": NEW_PASSWORD})
        assert r.status_code == 410 and "withdrawn" in r.json()["detail"], r.text
        r = c.post("/api/v1/auth/invitations/accept",
                   json={"token": "swi_" + "x" * 40, "password": NEW_PASSWORD})
        assert r.status_code == 404 and "unknown invitation link" in r.json()["detail"]
        r = c.post("/api/v1/auth/invitations/accept", json={"token": token, "password": "short"})
        assert r.status_code == 422 and "password" in r.text


def test_a_second_invitation_replaces_the_first_and_members_cannot_be_invited(
        mail_api, make_org):
    org = make_org()
    email = fresh_email()
    with logged_in(mail_api.server, org.email, org.password) as admin:
        invite(admin, email)
        invite(admin, email, "admin")
        first = mail_api.link_token(mail_api.wait_for_mail(email, 1), "accept-invite")
        second = mail_api.link_token(mail_api.wait_for_mail(email, 2), "accept-invite")
        assert [i["role"] for i in admin.get("/api/v1/invitations").json()] == ["admin"]
        r = admin.post("/api/v1/invitations", json={"email": org.email})
        assert r.status_code == 409 and "exists" in r.json()["detail"]
    with mail_api.server.client() as c:
        r = c.post("/api/v1/auth/invitations/accept",
                   json={"token": first, "password": NEW_PASSWORD})
        assert r.status_code == 410, r.text
        r = c.post("/api/v1/auth/invitations/accept",
                   json={"token": second, "password": NEW_PASSWORD})
        assert r.status_code == 200 and r.json()["role"] == "admin", r.text


def test_without_smtp_the_answer_shows_the_link_once(api_server, make_org):
    org = make_org()
    email = fresh_email()
    with logged_in(api_server, org.email, org.password) as admin:
        created = invite(admin, email)
        assert created["email_sent"] is False
        assert "SMTP" in created["detail"] and "only this once" in created["detail"]
        url = created["invite_url"]
        assert url and "/accept-invite#token=swi_" in url
        listed = admin.get("/api/v1/invitations").json()
        assert [i["email"] for i in listed] == [email] and "invite_url" not in listed[0]
    with api_server.client() as c:
        r = c.post("/api/v1/auth/invitations/accept",
                   json={"token": url.rpartition("token=")[2], "password": NEW_PASSWORD})
        assert r.status_code == 200 and r.json()["email"] == email, r.text


def test_an_org_sees_and_withdraws_only_its_own_invitations(api_server, make_org):
    org_a, org_b = make_org(), make_org()
    with logged_in(api_server, org_a.email, org_a.password) as a, \
            logged_in(api_server, org_b.email, org_b.password) as b:
        created = invite(a, fresh_email())
        assert b.get("/api/v1/invitations").json() == []
        assert b.delete(f"/api/v1/invitations/{created['id']}").status_code == 404
        assert len(a.get("/api/v1/invitations").json()) == 1


def test_a_refused_mail_shows_the_link_and_not_the_relays_reply(mail_api, make_org):
    org = make_org()
    email = fresh_email()
    mail_api.smtp.sink.reject_data = "550 5.7.1 relaying denied for internal-relay-7"
    try:
        with logged_in(mail_api.server, org.email, org.password) as admin:
            created = invite(admin, email)
    finally:
        mail_api.smtp.sink.reject_data = None
    assert created["email_sent"] is False and "could not be sent" in created["detail"]
    assert "internal-relay-7" not in created["detail"]
    assert created["invite_url"].startswith(f"{mail_api.server.base_url}/accept-invite#token=")
