"""Single sign-on end to end against a local OpenID Connect provider: discovery, the code
with PKCE, state and nonce, the ID token checked; people matched or created by verified
email with the org's default role."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from sqlalchemy import text

from tests.api.conftest import logged_in
from tests.api.oidc_provider import OidcProvider

CLIENT_ID = "stormwatch-test"
CLIENT_SECRET = "provider-issued secret"


@pytest.fixture(scope="module")
def provider() -> Iterator[OidcProvider]:
    with OidcProvider(CLIENT_ID, CLIENT_SECRET) as p:
        yield p


@pytest.fixture
def sso_org(mail_api, make_org, provider):
    """An org whose admin set up single sign-on with a domain of its own."""
    org = make_org()
    domain = f"corp-{uuid.uuid4().hex[:8]}.test"
    with logged_in(mail_api.server, org.email, org.password) as admin:
        r = admin.put("/api/v1/oidc-config", json={
            "issuer_url": provider.issuer, "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET, "default_role": "viewer",
            "allowed_domains": [domain]})
        assert r.status_code == 200, r.text
        slug = admin.get("/api/v1/org").json()["slug"]
    return org, slug, domain


def start(browser: httpx.Client, who: str) -> str:
    r = browser.get("/api/v1/auth/oidc/start", params={"org": who})
    assert r.status_code == 303, r.text
    return r.headers["location"]


def at_provider(location: str) -> str:
    """The provider's answer to the browser: where it sends it back."""
    r = httpx.get(location, follow_redirects=False, timeout=30)
    assert r.status_code == 302, r.text
    return r.headers["location"]


def sign_in(browser: httpx.Client, who: str) -> httpx.Response:
    return browser.get(at_provider(start(browser, who)))


def test_a_new_person_signs_in_through_the_provider_and_gets_the_default_role(
        mail_api, sso_org, provider, db):
    org, slug, domain = sso_org
    email = f"ada@{domain}"
    provider.user = {"sub": "ada-1", "email": email, "email_verified": True}
    checked = provider.pkce_checked
    with mail_api.server.client() as browser:
        location = start(browser, slug)
        q = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
        assert location.startswith(f"{provider.issuer}/authorize?")
        assert q["code_challenge_method"] == "S256" and q["client_id"] == CLIENT_ID
        assert q["redirect_uri"] == f"{mail_api.server.base_url}/api/v1/auth/oidc/callback"
        assert q["state"] and q["nonce"] and q["code_challenge"]
        back = browser.get(at_provider(location))
        assert back.status_code == 303, back.text
        assert back.headers["location"] == "/"
        me = browser.get("/api/v1/auth/me").json()
        assert me["email"] == email and me["role"] == "viewer" and me["org_id"] == org.org_id
    assert provider.pkce_checked == checked + 1  # the verifier matched the challenge
    with mail_api.server.client() as browser:  # again, by email domain: the same user
        assert sign_in(browser, email).status_code == 303
        assert browser.get("/api/v1/auth/me").json()["user_id"] == me["user_id"]
    with db.connect() as c:
        assert c.execute(text("SELECT count(*) FROM users WHERE email = :e"),
                         {"e": email}).scalar() == 1
        secret = c.execute(text("SELECT client_secret_enc FROM oidc_configs WHERE org_id = :o"),
                           {"o": org.org_id}).scalar()
    assert CLIENT_SECRET not in secret


def test_an_existing_user_is_matched_by_email_and_keeps_their_role(mail_api, sso_org, provider):
    org, slug, _ = sso_org
    provider.user = {"sub": "the-admin", "email": org.email.upper(), "email_verified": True}
    with logged_in(mail_api.server, org.email, org.password) as admin:
        r = admin.put("/api/v1/oidc-config", json={
            "issuer_url": provider.issuer, "client_id": CLIENT_ID, "default_role": "viewer",
            "allowed_domains": []})  # any verified domain; the stored secret stays
        assert r.status_code == 200 and r.json()["has_client_secret"] is True, r.text
    with mail_api.server.client() as browser:
        assert sign_in(browser, slug).status_code == 303
        me = browser.get("/api/v1/auth/me").json()
        assert me["email"] == org.email and me["role"] == "admin"


def test_an_unverified_email_is_refused_and_no_user_is_made(mail_api, sso_org, provider, db):
    _, slug, domain = sso_org
    email = f"mallory@{domain}"
    provider.user = {"sub": "m-1", "email": email, "email_verified": False}
    with mail_api.server.client() as browser:
        r = sign_in(browser, slug)
        assert r.status_code == 403 and "not verified" in r.json()["detail"], r.text
        assert browser.get("/api/v1/auth/me").status_code == 401
    with db.connect() as c:
        assert c.execute(text("SELECT count(*) FROM users WHERE email = :e"),
                         {"e": email}).scalar() == 0


def test_an_email_outside_the_orgs_domains_is_refused(mail_api, sso_org, provider):
    _, slug, _ = sso_org
    provider.user = {"sub": "e-1", "email": "eve@elsewhere.test", "email_verified": True}
    with mail_api.server.client() as browser:
        r = sign_in(browser, slug)
        assert r.status_code == 403 and "sign-in domains" in r.json()["detail"], r.text


def test_a_wrong_nonce_is_refused(mail_api, sso_org, provider):
    _, slug, domain = sso_org
    provider.user = {"sub": "n-1", "email": f"nina@{domain}", "email_verified": True}
    provider.nonce_override = "a nonce from another sign-in"
    try:
        with mail_api.server.client() as browser:
            r = sign_in(browser, slug)
            assert r.status_code == 400 and "nonce" in r.json()["detail"], r.text
            assert browser.get("/api/v1/auth/me").status_code == 401
    finally:
        provider.nonce_override = None


def test_an_id_token_signed_by_another_key_or_for_another_client_is_refused(
        mail_api, sso_org, provider):
    _, slug, domain = sso_org
    provider.user = {"sub": "k-1", "email": f"kim@{domain}", "email_verified": True}
    try:
        provider.foreign_key = True
        with mail_api.server.client() as browser:
            r = sign_in(browser, slug)
            assert r.status_code == 400 and "signature" in r.json()["detail"], r.text
        provider.foreign_key = False
        provider.user = {**provider.user, "aud": "some-other-client"}
        with mail_api.server.client() as browser:
            r = sign_in(browser, slug)
            assert r.status_code == 400 and "aud" in r.json()["detail"], r.text
            assert browser.get("/api/v1/auth/me").status_code == 401
    finally:
        provider.foreign_key = False


def test_a_wrong_or_replayed_state_is_refused(mail_api, sso_org, provider):
    _, slug, domain = sso_org
    provider.user = {"sub": "s-1", "email": f"sam@{domain}", "email_verified": True}
    with mail_api.server.client() as victim, mail_api.server.client() as attacker:
        # A callback made for another browser's sign-in (login CSRF) is refused.
        back = at_provider(start(attacker, slug))
        start(victim, slug)
        r = victim.get(back)
        assert r.status_code == 400 and "state" in r.json()["detail"], r.text
        assert victim.get("/api/v1/auth/me").status_code == 401
        # A state that was never issued, with the cookie to match it.
        victim.cookies.set("sw_oidc_state", "forged", path="/api/v1/auth/oidc")
        r = victim.get("/api/v1/auth/oidc/callback", params={"state": "forged", "code": "x"})
        assert r.status_code == 400 and "state" in r.json()["detail"], r.text
        # The rightful browser finishes once; the same callback again is refused.
        first = attacker.get(back)
        assert first.status_code == 303, first.text
        attacker.cookies.set("sw_oidc_state", parse_qs(urlsplit(back).query)["state"][0],
                             path="/api/v1/auth/oidc")
        again = attacker.get(back)
        assert again.status_code == 400 and "state" in again.json()["detail"], again.text


def test_bad_sso_requests_and_configs_are_clear_4xx(mail_api, make_org, provider):
    org = make_org()
    with mail_api.server.client() as browser:
        r = browser.get("/api/v1/auth/oidc/start", params={"org": "no-such-org-anywhere"})
        assert r.status_code == 404 and "no single sign-on" in r.json()["detail"]
        assert browser.get("/api/v1/auth/oidc/start").status_code == 422
    with logged_in(mail_api.server, org.email, org.password) as admin:
        assert admin.get("/api/v1/oidc-config").status_code == 404
        base = {"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET}
        r = admin.put("/api/v1/oidc-config", json={**base, "issuer_url": "http://idp.example"})
        assert r.status_code == 422 and "https" in r.text
        r = admin.put("/api/v1/oidc-config",
                      json={**base, "issuer_url": f"{provider.issuer}/wrong"})
        assert r.status_code == 422 and "discovery" in r.text
        r = admin.put("/api/v1/oidc-config",
                      json={**base, "issuer_url": provider.issuer, "allowed_domains": ["a b"]})
        assert r.status_code == 422 and "allowed_domains" in r.text
        r = admin.put("/api/v1/oidc-config", json={"client_id": CLIENT_ID,
                                                   "issuer_url": provider.issuer})
        assert r.status_code == 422 and "client secret" in r.text
        r = admin.put("/api/v1/oidc-config", json={**base, "issuer_url": provider.issuer})
        assert r.status_code == 200
        body = r.json()
        assert "client_secret" not in body and body["has_client_secret"] is True
        assert body["redirect_uri"].endswith("/api/v1/auth/oidc/callback")
        assert admin.delete("/api/v1/oidc-config").status_code == 204
        assert admin.get("/api/v1/oidc-config").status_code == 404


def test_the_egress_policy_guards_the_issuer(api_server, make_org):
    """The server fetches no discovery document from an address the policy refuses."""
    org = make_org()
    with logged_in(api_server, org.email, org.password) as admin:
        r = admin.put("/api/v1/oidc-config", json={
            "issuer_url": "https://169.254.169.254", "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET})
        assert r.status_code == 422 and "egress policy" in r.text, r.text


def test_first_setups_and_removals_at_once_answer_only_200_204_and_404(
        mail_api, make_org, provider, db):
    """Twelve first PUTs at once (an admin's double click, two admins) make one config and
    one create entry; interleaved with deletes, each call answers 200, 204 or 404."""
    org = make_org()
    body = {"issuer_url": provider.issuer, "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET, "default_role": "viewer"}
    with logged_in(mail_api.server, org.email, org.password) as admin:
        with ThreadPoolExecutor(12) as pool:
            codes = list(pool.map(lambda _: admin.put("/api/v1/oidc-config", json=body)
                                  .status_code, range(12)))
        assert codes == [200] * 12
        entries = admin.get("/api/v1/audit", params={"target_type": "oidc_config"}).json()
        assert sorted(e["action"] for e in entries["items"]) == (
            ["oidc_config.create"] + ["oidc_config.update"] * 11)

        def call(i: int) -> int:
            if i % 2:
                return admin.delete("/api/v1/oidc-config").status_code
            return admin.put("/api/v1/oidc-config", json=body).status_code

        with ThreadPoolExecutor(12) as pool:
            codes = list(pool.map(call, range(48)))
    assert set(codes) <= {200, 204, 404}, codes
