"""Invitations and password resets: single-use links whose token only the mail holds.

A link is used by one compare-and-set UPDATE (unused, unrevoked, unexpired -> used), so two
concurrent uses of one link cannot both succeed."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.core.security import hash_password, hash_token, new_token
from stormwatch.models import AccountLink, User, UserSession

Purpose = Literal["invite", "reset"]
# A second reset mail for one account within this is not sent (no mailbox flooding).
RESET_RESEND_AFTER = timedelta(minutes=1)


class LinkRefused(Exception):
    """The link cannot be used; `detail` says why, `status` is the HTTP status to answer."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class EmailTaken(Exception):
    """A user with the invited email exists already."""


@dataclass(frozen=True)
class NewLink:
    row: AccountLink
    token: str


def link_url(public_base_url: str, purpose: Purpose, token: str) -> str:
    # In the fragment, which browsers never send to a server or in a Referer.
    page = "accept-invite" if purpose == "invite" else "reset-password"
    return f"{public_base_url.rstrip('/')}/{page}#token={token}"


async def create_invitation(session: AsyncSession, org_id: uuid.UUID, email: str, role: str,
                            created_by: uuid.UUID | None, ttl: timedelta) -> NewLink:
    email = email.lower()
    if await session.scalar(select(User.id).where(User.email == email)) is not None:
        raise EmailTaken(email)
    now = datetime.now(UTC)
    # A new invitation replaces a pending one for the same address in this org.
    await session.execute(update(AccountLink).where(
        AccountLink.org_id == org_id, AccountLink.purpose == "invite",
        AccountLink.email == email, AccountLink.used_at.is_(None),
        AccountLink.revoked_at.is_(None)).values(revoked_at=now))
    tok = new_token("invite")
    row = AccountLink(id=uuid.uuid4(), purpose="invite", token_hash=tok.token_hash,
                      org_id=org_id, email=email, role=role, created_by=created_by,
                      created_at=now, expires_at=now + ttl)
    session.add(row)
    await session.flush()
    return NewLink(row, tok.token)


async def pending_invitations(session: AsyncSession, org_id: uuid.UUID) -> list[AccountLink]:
    return list((await session.execute(select(AccountLink).where(
        AccountLink.org_id == org_id, AccountLink.purpose == "invite",
        AccountLink.used_at.is_(None), AccountLink.revoked_at.is_(None),
        AccountLink.expires_at > datetime.now(UTC)).order_by(AccountLink.created_at)))
        .scalars())


async def create_reset(session: AsyncSession, email: str, ttl: timedelta) -> NewLink | None:
    """A reset link for the account with this email, or None when there is none (or one was
    sent moments ago). The token is drawn and hashed either way, so both cost the same."""
    tok = new_token("reset")
    user = (await session.execute(select(User).where(User.email == email.lower()))).scalar()
    if user is None:
        return None
    now = datetime.now(UTC)
    recent = await session.scalar(select(AccountLink.id).where(
        AccountLink.user_id == user.id, AccountLink.purpose == "reset",
        AccountLink.created_at > now - RESET_RESEND_AFTER).limit(1))
    if recent is not None:
        return None
    row = AccountLink(id=uuid.uuid4(), purpose="reset", token_hash=tok.token_hash,
                      org_id=user.org_id, email=user.email, role=user.role, user_id=user.id,
                      created_at=now, expires_at=now + ttl)
    session.add(row)
    await session.flush()
    return NewLink(row, tok.token)


async def _claim(session: AsyncSession, purpose: Purpose, token: str) -> AccountLink:
    """Marks the link used if it is usable now, else raises LinkRefused saying why."""
    what = "invitation" if purpose == "invite" else "password reset"
    digest = hash_token(token)
    now = datetime.now(UTC)
    claimed = (await session.execute(
        update(AccountLink).where(
            AccountLink.token_hash == digest, AccountLink.purpose == purpose,
            AccountLink.used_at.is_(None), AccountLink.revoked_at.is_(None),
            AccountLink.expires_at > now)
        .values(used_at=now).returning(AccountLink.id))).scalar()
    if claimed is not None:
        row = await session.get(AccountLink, claimed)
        assert row is not None
        return row
    row = (await session.execute(select(AccountLink).where(
        AccountLink.token_hash == digest, AccountLink.purpose == purpose))).scalar()
    if row is None:
        raise LinkRefused(404, f"unknown {what} link: check that it was copied whole")
    if row.used_at is not None:
        raise LinkRefused(410, f"this {what} link was already used; links work once")
    if row.revoked_at is not None:
        raise LinkRefused(410, f"this {what} link was withdrawn; ask for a new one")
    raise LinkRefused(410, f"this {what} link has expired; ask for a new one")


async def accept_invitation(session: AsyncSession, token: str, password: str) -> User:
    link = await _claim(session, "invite", token)
    user = User(id=uuid.uuid4(), org_id=link.org_id, email=link.email,
                password_hash=hash_password(password), role=link.role)
    session.add(user)
    try:
        await session.flush()
    except IntegrityError as exc:
        raise LinkRefused(409, "a user with this email exists already; log in or reset "
                               "the password") from exc
    return user


async def reset_password(session: AsyncSession, token: str, password: str) -> User:
    link = await _claim(session, "reset", token)
    user = await session.get(User, link.user_id) if link.user_id else None
    if user is None:
        raise LinkRefused(410, "the account of this password reset link no longer exists")
    user.password_hash = hash_password(password)
    # Whoever held the old password is signed out everywhere, and older links die too.
    await session.execute(delete(UserSession).where(UserSession.user_id == user.id))
    await session.execute(update(AccountLink).where(
        AccountLink.user_id == user.id, AccountLink.purpose == "reset",
        AccountLink.used_at.is_(None), AccountLink.revoked_at.is_(None))
        .values(revoked_at=datetime.now(UTC)))
    await session.flush()
    return user
