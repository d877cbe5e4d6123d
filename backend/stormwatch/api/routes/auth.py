"""Login and logout for people (the session lives in an httpOnly cookie), and the links
sent by mail that set a password: accepting an invitation, resetting a forgotten one."""

from datetime import timedelta
from typing import Any

from fastapi import APIRouter, BackgroundTasks, HTTPException, Request, Response, status
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.api.deps import (
    CSRF_COOKIE,
    SESSION_COOKIE,
    PrincipalDep,
    SessionDep,
    SettingsDep,
    UserPrincipalDep,
    session_limits,
)
from stormwatch.api.throttle import (
    address_key,
    client_address,
    count_failure,
    login_account_key,
    login_account_policy,
    login_address_policy,
    refuse_if_blocked,
)
from stormwatch.core.config import Settings
from stormwatch.core.redis import get_redis
from stormwatch.core.security import hash_token, verify_password
from stormwatch.models import Org, User, UserSession
from stormwatch.schemas.auth import (
    InvitationAccept,
    LoginRequest,
    Me,
    PasswordChange,
    PasswordResetConfirm,
    PasswordResetRequest,
    PasswordResetRequested,
)
from stormwatch.services import account_links, accounts, mail_texts, ratelimit, system_mail

router = APIRouter(prefix="/auth", tags=["auth"])


@router.post("/login", response_model=Me,
             responses={401: {"description": "Wrong email or password"},
                        429: {"description": "Too many failed logins for this account or "
                                             "from this address; retry after Retry-After"}})
async def login(body: LoginRequest, request: Request, response: Response, session: SessionDep,
                settings: SettingsDep) -> Me:
    # Keyed by the email as typed, known or not, so a lock says nothing about who exists.
    account = login_account_key(body.email)
    address = address_key("login", client_address(request, settings))
    # While blocked the password is not even checked: a right one is refused like a wrong one.
    await refuse_if_blocked("login", [account, address])
    user = await accounts.authenticate(session, body.email, body.password)
    if user is None:
        await count_failure("login", [(account, login_account_policy(settings)),
                                      (address, login_address_policy(settings))])
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "wrong email or password")
    await ratelimit.forget(get_redis(), account)
    return await start_session(session, settings, user, response, request)


async def start_session(session: AsyncSession, settings: Settings, user: User,
                        response: Response, request: Request | None = None) -> Me:
    """Opens a new session for `user` (ending the one the request came with, if any),
    commits, and sets its cookies on `response`."""
    limits = session_limits(settings)
    token, csrf = await accounts.open_session(
        session, user, limits,
        replaces=request.cookies.get(SESSION_COOKIE) if request is not None else None)
    org = await session.get(Org, user.org_id)
    await session.commit()
    max_age = int(limits.absolute.total_seconds())
    response.set_cookie(SESSION_COOKIE, token, max_age=max_age, httponly=True,
                        secure=settings.cookie_secure, samesite="lax", path="/")
    # Readable by the UI's script so it can echo it in X-CSRF-Token (double submit).
    response.set_cookie(CSRF_COOKIE, csrf, max_age=max_age, httponly=False,
                        secure=settings.cookie_secure, samesite="lax", path="/")
    assert org is not None
    return Me(user_id=user.id, email=user.email, org_id=user.org_id, org_name=org.name,
              kind="user", role="admin" if user.role == "admin" else "viewer", csrf_token=csrf)


@router.post("/password", response_model=Me,
             responses={403: {"description": "The current password is wrong, or the caller "
                                             "is not a signed-in person"},
                        429: {"description": "Too many wrong passwords for this account; "
                                             "retry after Retry-After"}})
async def change_password(body: PasswordChange, request: Request, response: Response,
                          principal: UserPrincipalDep, session: SessionDep,
                          settings: SettingsDep) -> Me:
    """Changes the signed-in person's password. Every session of theirs ends (other
    browsers are signed out); this one continues on a new session, whose cookies are set."""
    # Locked until the change commits: a second change sent at the same moment checks its
    # current password against the new hash, instead of both succeeding and one being lost.
    user = await session.get(User, principal.user_id, with_for_update=True)
    if user is None:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "not logged in")
    # A stolen session must not become a way to guess the password: same count as logins.
    account = login_account_key(user.email)
    await refuse_if_blocked("login", [account])
    if not verify_password(user.password_hash, body.current_password):
        await count_failure("login", [(account, login_account_policy(settings))])
        raise HTTPException(status.HTTP_403_FORBIDDEN, "current_password is wrong")
    await accounts.change_password(session, user, body.new_password)
    return await start_session(session, settings, user, response, request)


LINK_REFUSED: dict[int | str, dict[str, Any]] = {404: {"description": "Unknown link"},
                409: {"description": "The account exists already"},
                410: {"description": "The link expired, was used or was withdrawn"}}
RESET_ANSWER = ("if an account has this email, a link to set a new password is on its way; "
                "it works once, within {minutes:g} minutes")


@router.post("/invitations/accept", response_model=Me, responses=LINK_REFUSED)
async def accept_invitation(body: InvitationAccept, request: Request, response: Response,
                            session: SessionDep, settings: SettingsDep) -> Me:
    """Sets the password of the invited person, creates the user and signs them in."""
    try:
        user = await account_links.accept_invitation(session, body.token, body.password)
    except account_links.LinkRefused as exc:
        await session.rollback()
        raise HTTPException(exc.status, exc.detail) from exc
    return await start_session(session, settings, user, response, request)


@router.post("/password-reset", response_model=PasswordResetRequested,
             status_code=status.HTTP_202_ACCEPTED)
async def request_password_reset(body: PasswordResetRequest, background: BackgroundTasks,
                                 session: SessionDep,
                                 settings: SettingsDep) -> PasswordResetRequested:
    """Mails a reset link if the account exists; the answer is the same either way, and the
    mail leaves after it, so neither says whether the account exists."""
    link = await account_links.create_reset(
        session, body.email, timedelta(minutes=settings.reset_ttl_minutes))
    await session.commit()
    if link is not None:
        url = account_links.link_url(settings.public_base_url, "reset", link.token)
        background.add_task(system_mail.send, settings, link.row.email,
                            "Reset your Stormwatch password", mail_texts.reset(url, settings))
    return PasswordResetRequested(detail=RESET_ANSWER.format(
        minutes=settings.reset_ttl_minutes))


@router.post("/password-reset/confirm", response_model=Me, responses=LINK_REFUSED)
async def confirm_password_reset(body: PasswordResetConfirm, request: Request,
                                 response: Response,
                                 session: SessionDep, settings: SettingsDep) -> Me:
    """Sets the new password, ends every other session of the user and signs this one in."""
    try:
        user = await account_links.reset_password(session, body.token, body.password)
    except account_links.LinkRefused as exc:
        await session.rollback()
        raise HTTPException(exc.status, exc.detail) from exc
    await ratelimit.forget(get_redis(), login_account_key(user.email))
    return await start_session(session, settings, user, response, request)


@router.post("/logout", status_code=status.HTTP_204_NO_CONTENT)
async def logout(request: Request, principal: PrincipalDep, session: SessionDep) -> Response:
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie:
        row = await session.get(UserSession, hash_token(cookie))
        if row is not None:
            await session.delete(row)
            await session.commit()
    response = Response(status_code=status.HTTP_204_NO_CONTENT)
    response.delete_cookie(SESSION_COOKIE, path="/")
    response.delete_cookie(CSRF_COOKIE, path="/")
    return response


@router.get("/me", response_model=Me)
async def me(principal: PrincipalDep, session: SessionDep, request: Request) -> Me:
    org = await session.get(Org, principal.org_id)
    assert org is not None
    email = None
    if principal.user_id is not None:
        user = await session.get(User, principal.user_id)
        email = user.email if user else None
    return Me(user_id=principal.user_id, email=email, org_id=principal.org_id,
              org_name=org.name, kind=principal.kind,
              role="admin" if principal.role == "admin" else "viewer",
              csrf_token=request.cookies.get(CSRF_COOKIE) if principal.kind == "user" else None)
