"""Sign-in through an org's own OpenID Connect provider: authorization code with PKCE
(S256), state and nonce; the ID token's signature (the provider's JWKS), issuer, audience,
expiry and nonce are checked; people are matched by verified email or created with the
org's default role. Every request to the provider goes through the egress policy."""

from __future__ import annotations

import base64
import ipaddress
import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import httpx
from authlib.common.security import generate_token
from authlib.common.urls import add_params_to_uri, url_encode
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.core import egress
from stormwatch.core.security import decrypt_secret, hash_password, hash_token
from stormwatch.models import OidcConfig, OidcLogin, Org, User

HTTP_TIMEOUT_S = 10.0
LOGIN_TTL = timedelta(minutes=10)  # from the provider's page back to the callback
CLOCK_LEEWAY_S = 60
ID_TOKEN_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256",
                       "ES384", "ES512", "EdDSA"]


class OidcError(Exception):
    """The sign-in cannot go on; `status` is the HTTP status to answer, `detail` says why."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass(frozen=True)
class Provider:
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str


def issuer_problem(url: str) -> str | None:
    """Why `url` cannot be an issuer, or None. Plain http only to a loopback address."""
    try:
        u = httpx.URL(url)
    except httpx.InvalidURL:
        return "not a URL"
    if not u.host or u.query or u.fragment:
        return "an issuer is an https URL with a host and no query or fragment"
    if u.scheme == "https":
        return None
    if u.scheme == "http":
        try:
            if ipaddress.ip_address(u.host).is_loopback:
                return None
        except ValueError:
            pass
        return "must be https (plain http only to a loopback address)"
    return "must be https"


async def _json(method: str, url: str, what: str, **kwargs: Any) -> tuple[int, dict[str, Any]]:
    try:
        return await egress.fetch_json(method, url, timeout_s=HTTP_TIMEOUT_S, **kwargs)
    except egress.EgressError as exc:
        raise OidcError(502, f"{what}: {exc.detail}") from exc
    except (httpx.HTTPError, TimeoutError, OSError) as exc:
        raise OidcError(502, f"{what}: cannot reach {url}: {type(exc).__name__} {exc}"
                        ) from exc


async def discover(issuer_url: str) -> Provider:
    issuer = issuer_url.rstrip("/")
    url = f"{issuer}/.well-known/openid-configuration"
    status, doc = await _json("GET", url, "discovery")
    if status != 200:
        raise OidcError(502, f"discovery: {url} answered HTTP {status}")
    # The document must name the issuer it was fetched for (OpenID Discovery 4.3).
    if str(doc.get("issuer", "")).rstrip("/") != issuer:
        raise OidcError(502, f"discovery: {url} names issuer {doc.get('issuer')!r}, "
                             f"not {issuer_url!r}")
    methods = doc.get("code_challenge_methods_supported")
    if isinstance(methods, list) and "S256" not in methods:
        raise OidcError(502, "discovery: the provider does not offer PKCE with S256")
    ends = {}
    for key in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
        value = doc.get(key)
        if not isinstance(value, str) or not value.startswith(("https://", "http://")):
            raise OidcError(502, f"discovery: {url} has no usable {key}")
        ends[key] = value
    return Provider(issuer=str(doc["issuer"]), **ends)


async def find_config(session: AsyncSession, org_or_email: str) -> OidcConfig | None:
    """The config of the org named by its slug, or by an email address or domain one of
    the orgs lists as its own."""
    text = org_or_email.strip().lower()
    domain = text.rpartition("@")[2]
    if "@" not in text:
        cfg = (await session.execute(select(OidcConfig).join(
            Org, Org.id == OidcConfig.org_id).where(Org.slug == text))).scalar()
        if cfg is not None:
            return cfg
    rows = (await session.execute(select(OidcConfig).where(
        OidcConfig.allowed_domains.contains([domain])).limit(2))).scalars().all()
    return rows[0] if len(rows) == 1 else None


async def start(session: AsyncSession, cfg: OidcConfig, redirect_uri: str) -> tuple[str, str]:
    """(the provider's authorization URL, the state the callback must come back with)."""
    provider = await discover(cfg.issuer_url)
    state, nonce, verifier = generate_token(43), generate_token(43), generate_token(64)
    session.add(OidcLogin(state_hash=hash_token(state), org_id=cfg.org_id,
                          code_verifier=verifier, nonce=nonce,
                          expires_at=datetime.now(UTC) + LOGIN_TTL))
    # Abandoned sign-ins are dropped as new ones start.
    await session.execute(delete(OidcLogin).where(OidcLogin.expires_at < datetime.now(UTC)))
    await session.flush()
    url = add_params_to_uri(provider.authorization_endpoint, [
        ("response_type", "code"), ("client_id", cfg.client_id),
        ("redirect_uri", redirect_uri), ("scope", "openid email profile"),
        ("state", state), ("nonce", nonce),
        ("code_challenge", create_s256_code_challenge(verifier)),
        ("code_challenge_method", "S256")])
    return url, state


def _basic(client_id: str, secret: str) -> str:
    # RFC 6749 2.3.1: both parts form-encoded before Basic.
    pair = f"{quote(client_id, safe='')}:{quote(secret, safe='')}"
    return "Basic " + base64.b64encode(pair.encode()).decode()


async def finish(session: AsyncSession, state: str, code: str, redirect_uri: str) -> User:
    """Redeems the code, checks the ID token and returns the signed-in user (flushed)."""
    login = (await session.execute(
        delete(OidcLogin).where(OidcLogin.state_hash == hash_token(state),
                                OidcLogin.expires_at > datetime.now(UTC))
        .returning(OidcLogin))).scalar()
    if login is None:
        raise OidcError(400, "unknown, used or expired sign-in state: start the sign-in again")
    cfg = await session.get(OidcConfig, login.org_id)
    if cfg is None:
        raise OidcError(400, "single sign-on was turned off for this organisation")
    provider = await discover(cfg.issuer_url)
    form = url_encode([("grant_type", "authorization_code"), ("code", code),
                       ("redirect_uri", redirect_uri), ("code_verifier", login.code_verifier)])
    status, reply = await _json(
        "POST", provider.token_endpoint, "token request", content=form.encode(),
        headers={"content-type": "application/x-www-form-urlencoded",
                 "authorization": _basic(cfg.client_id, decrypt_secret(cfg.client_secret_enc))})
    if status != 200 or not isinstance(reply.get("id_token"), str):
        err = egress.service_error(str(reply.get("error", "")).encode()) or f"HTTP {status}"
        raise OidcError(400, f"the provider refused the code: {err}")
    claims = await _verified_claims(provider, cfg.client_id, reply["id_token"], login.nonce)
    return await _user_for(session, cfg, claims)


async def _verified_claims(provider: Provider, client_id: str, id_token: str,
                           nonce: str) -> dict[str, Any]:
    status, jwks = await _json("GET", provider.jwks_uri, "key set")
    if status != 200:
        raise OidcError(502, f"key set: {provider.jwks_uri} answered HTTP {status}")
    try:
        keys = KeySet.import_key_set(jwks)  # type: ignore[arg-type]
        token = jwt.decode(id_token, keys, algorithms=ID_TOKEN_ALGORITHMS)
    except (JoseError, ValueError, TypeError) as exc:
        raise OidcError(400, f"the ID token's signature does not verify: {exc}") from exc
    claims = dict(token.claims)
    registry = jwt.JWTClaimsRegistry(
        leeway=CLOCK_LEEWAY_S,
        iss={"essential": True, "value": provider.issuer},
        aud={"essential": True, "value": client_id},
        exp={"essential": True}, sub={"essential": True})
    try:
        registry.validate(claims)
    except JoseError as exc:
        raise OidcError(400, f"the ID token is not valid here: {exc}") from exc
    aud = claims.get("aud")
    if isinstance(aud, list) and len(aud) > 1 and claims.get("azp") != client_id:
        raise OidcError(400, "the ID token was issued to another client (azp)")
    if not isinstance(claims.get("nonce"), str) or not secrets.compare_digest(
            claims["nonce"], nonce):
        raise OidcError(400, "the ID token's nonce does not match this sign-in")
    return claims


async def _user_for(session: AsyncSession, cfg: OidcConfig, claims: dict[str, Any]) -> User:
    email = claims.get("email")
    if not isinstance(email, str) or "@" not in email:
        raise OidcError(403, "the provider gave no email address (scope 'email')")
    if claims.get("email_verified") is not True:
        raise OidcError(403, f"the provider has not verified {email}: verify it there first")
    email = email.lower()
    domain = email.rpartition("@")[2]
    if cfg.allowed_domains and domain not in cfg.allowed_domains:
        raise OidcError(403, f"{domain} is not among this organisation's sign-in domains")
    user = (await session.execute(select(User).where(User.email == email))).scalar()
    if user is not None:
        if user.org_id != cfg.org_id:
            raise OidcError(403, f"{email} belongs to another organisation")
        return user
    # No password: this person signs in through the provider (or sets one by a reset link).
    user = User(id=uuid.uuid4(), org_id=cfg.org_id, email=email,
                password_hash=hash_password(secrets.token_urlsafe(32)),
                role=cfg.default_role)
    session.add(user)
    await session.flush()
    return user
