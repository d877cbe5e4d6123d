"""Single sign-on through an org's own OpenID Connect provider: the admin's configuration,
and the browser's round trip (start -> provider -> callback)."""

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request, Response, status
from fastapi.responses import RedirectResponse

from stormwatch.api.deps import (
    AdminUserDep,
    AuditActorDep,
    OrgPrincipalDep,
    SessionDep,
    SettingsDep,
)
from stormwatch.api.routes.auth import start_session
from stormwatch.core.config import Settings
from stormwatch.core.db import lock_row_key
from stormwatch.core.security import constant_time_equals, encrypt_secret
from stormwatch.models import OidcConfig
from stormwatch.schemas.accounts import OidcConfigPublic, OidcConfigUpdate
from stormwatch.schemas.errors import NOT_FOUND
from stormwatch.services import audit, oidc

router = APIRouter(tags=["single sign-on"])

STATE_COOKIE = "sw_oidc_state"
CALLBACK_PATH = "/api/v1/auth/oidc/callback"
REFUSED: dict[int | str, dict[str, Any]] = {
    400: {"description": "State, code or ID token refused"},
    403: {"description": "The email is unverified, of another domain or of another org"},
    404: {"description": "No single sign-on for this org or domain"},
    502: {"description": "The provider could not be reached or answered wrongly"}}


def redirect_uri(settings: Settings) -> str:
    return settings.public_base_url.rstrip("/") + CALLBACK_PATH


def _public(cfg: OidcConfig, settings: Settings) -> OidcConfigPublic:
    return OidcConfigPublic(issuer_url=cfg.issuer_url, client_id=cfg.client_id,
                            default_role=cfg.default_role,
                            allowed_domains=list(cfg.allowed_domains),
                            has_client_secret=bool(cfg.client_secret_enc),
                            redirect_uri=redirect_uri(settings), updated_at=cfg.updated_at)


@router.get("/oidc-config", response_model=OidcConfigPublic, responses=NOT_FOUND)
async def get_oidc_config(principal: OrgPrincipalDep, session: SessionDep,
                          settings: SettingsDep) -> OidcConfigPublic:
    cfg = await session.get(OidcConfig, principal.org_id)
    if cfg is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "single sign-on is not set up")
    return _public(cfg, settings)


@router.put("/oidc-config", response_model=OidcConfigPublic,
            responses={422: {"description": "Bad issuer, or its discovery failed"}})
async def put_oidc_config(body: OidcConfigUpdate, principal: AdminUserDep,
                          session: SessionDep, settings: SettingsDep,
                          actor: AuditActorDep) -> OidcConfigPublic:
    """Sets the org's provider; its discovery document is fetched now, so a wrong issuer
    is refused here rather than at someone's sign-in."""
    problem = oidc.issuer_problem(body.issuer_url)
    if problem:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT,
                            [{"loc": ["body", "issuer_url"], "msg": problem,
                              "type": "value_error"}])
    try:
        await oidc.discover(body.issuer_url)
    except oidc.OidcError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT,
                            [{"loc": ["body", "issuer_url"], "msg": exc.detail,
                              "type": "value_error"}]) from exc
    # After discovery (a slow fetch), before the read: a first setup made twice at once
    # would insert twice.
    await lock_row_key(session, "oidc_configs", principal.org_id)
    cfg = await session.get(OidcConfig, principal.org_id)
    if cfg is None and body.client_secret is None:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT,
                            [{"loc": ["body", "client_secret"],
                              "msg": "the client secret is needed the first time",
                              "type": "missing"}])
    before = None if cfg is None else _audited(cfg)
    if cfg is None:
        cfg = OidcConfig(org_id=principal.org_id)
        session.add(cfg)
    cfg.issuer_url = body.issuer_url.rstrip("/")
    cfg.client_id = body.client_id
    if body.client_secret is not None:
        cfg.client_secret_enc = encrypt_secret(body.client_secret)
    cfg.default_role = body.default_role
    cfg.allowed_domains = sorted({d.lower() for d in body.allowed_domains})
    cfg.updated_at = datetime.now(UTC)
    after = {**_audited(cfg), "client_secret": "new" if body.client_secret else None}
    audit.record(session, principal.org_id, actor,
                 "oidc_config.create" if before is None else "oidc_config.update",
                 "oidc_config", principal.org_id, cfg.issuer_url,
                 audit.diff(before, after, secret_fields=("client_secret",)))
    await session.commit()
    return _public(cfg, settings)


def _audited(cfg: OidcConfig) -> dict[str, object]:
    """The config's fields as the audit log compares them (the secret only as changed)."""
    return {"issuer_url": cfg.issuer_url, "client_id": cfg.client_id,
            "default_role": cfg.default_role, "allowed_domains": list(cfg.allowed_domains),
            "client_secret": None}


@router.delete("/oidc-config", status_code=status.HTTP_204_NO_CONTENT, responses=NOT_FOUND)
async def delete_oidc_config(principal: AdminUserDep, session: SessionDep,
                             actor: AuditActorDep) -> Response:
    await lock_row_key(session, "oidc_configs", principal.org_id)
    cfg = await session.get(OidcConfig, principal.org_id)
    if cfg is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "single sign-on is not set up")
    audit.record(session, principal.org_id, actor, "oidc_config.delete", "oidc_config",
                 principal.org_id, cfg.issuer_url, audit.diff(_audited(cfg), None))
    await session.delete(cfg)
    await session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/auth/oidc/start", status_code=status.HTTP_303_SEE_OTHER,
            response_class=RedirectResponse, responses=REFUSED)
async def start_sign_in(org: Annotated[str, Query(min_length=1, max_length=320,
                                                  pattern=r"^[^\s]+$",
                                                  description="the org's slug, or an email "
                                                              "address or domain it lists")],
                        session: SessionDep, settings: SettingsDep) -> RedirectResponse:
    """Sends the browser to the org's provider; the state is also kept in a cookie, so only
    the browser that started a sign-in can finish it."""
    cfg = await oidc.find_config(session, org)
    if cfg is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND,
                            f"no single sign-on is set up for {org!r}: check the org's slug "
                            "or your email domain")
    try:
        url, state = await oidc.start(session, cfg, redirect_uri(settings))
    except oidc.OidcError as exc:
        raise HTTPException(exc.status, exc.detail) from exc
    await session.commit()
    response = RedirectResponse(url, status_code=status.HTTP_303_SEE_OTHER)
    response.set_cookie(STATE_COOKIE, state, max_age=int(oidc.LOGIN_TTL.total_seconds()),
                        httponly=True, secure=settings.cookie_secure, samesite="lax",
                        path="/api/v1/auth/oidc")
    return response


@router.get("/auth/oidc/callback", status_code=status.HTTP_303_SEE_OTHER,
            response_class=RedirectResponse, responses=REFUSED)
async def finish_sign_in(request: Request, session: SessionDep, settings: SettingsDep,
                         state: Annotated[str, Query(min_length=1, max_length=200)],
                         code: Annotated[str | None, Query(max_length=2000)] = None,
                         error: Annotated[str | None, Query(max_length=200)] = None,
                         error_description: Annotated[str | None,
                                                      Query(max_length=1000)] = None
                         ) -> RedirectResponse:
    """Where the provider sends the browser back: the code is redeemed with the PKCE
    verifier, the ID token checked, and the person signed in."""
    kept = request.cookies.get(STATE_COOKIE, "")
    if not kept or not constant_time_equals(kept, state):
        raise HTTPException(status.HTTP_400_BAD_REQUEST,
                            "the sign-in state does not match the one this browser started "
                            "with: start the sign-in again")
    if error is not None or not code:
        said = (error or "no code") + (f": {error_description}" if error_description else "")
        raise HTTPException(status.HTTP_400_BAD_REQUEST, f"the provider refused: {said}")
    try:
        user = await oidc.finish(session, state, code, redirect_uri(settings))
    except oidc.OidcError as exc:
        await session.commit()  # the state is spent even when the sign-in fails
        raise HTTPException(exc.status, exc.detail) from exc
    response = RedirectResponse("/", status_code=status.HTTP_303_SEE_OTHER)
    await start_session(session, settings, user, response, request)
    response.delete_cookie(STATE_COOKIE, path="/api/v1/auth/oidc")
    return response
