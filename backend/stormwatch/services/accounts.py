"""Orgs, users, sessions, API keys and enrollment tokens."""

from __future__ import annotations

import re
import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.core.security import hash_password, hash_token, new_token, verify_password
from stormwatch.models import ApiKey, EnrollmentToken, Org, User, UserSession
from stormwatch.models.org import API_KEY_SCOPES, DEFAULT_MESH_SETTINGS


def slugify(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return slug[:90] or "org"


async def create_org(session: AsyncSession, name: str, slug: str | None = None) -> Org:
    org = Org(id=uuid.uuid4(), name=name, slug=slug or slugify(name),
              mesh_settings=dict(DEFAULT_MESH_SETTINGS))
    session.add(org)
    await session.flush()
    return org


async def create_user(session: AsyncSession, org_id: uuid.UUID, email: str, password: str,
                      role: str = "admin", *, password_hash: str | None = None) -> User:
    """`password_hash`: the hash of `password` when the caller has it already (tests that make
    hundreds of users with one password hash it once; argon2 is slow on purpose)."""
    user = User(id=uuid.uuid4(), org_id=org_id, email=email.lower(),
                password_hash=password_hash or hash_password(password), role=role)
    session.add(user)
    await session.flush()
    return user


async def authenticate(session: AsyncSession, email: str, password: str) -> User | None:
    user = (await session.execute(select(User).where(User.email == email.lower()))).scalar()
    if user is None:
        # Same cost as a real check so response time doesn't reveal which emails exist.
        verify_password(_DUMMY_HASH, password)
        return None
    return user if verify_password(user.password_hash, password) else None


_DUMMY_HASH = hash_password(secrets.token_urlsafe(16))


# Recording every request's time would turn each read into a write; a minute is finer
# than any idle timeout worth setting.
SESSION_TOUCH_EVERY = timedelta(minutes=1)


@dataclass(frozen=True)
class SessionLimits:
    idle: timedelta
    absolute: timedelta


async def open_session(session: AsyncSession, user: User, limits: SessionLimits,
                       replaces: str | None = None) -> tuple[str, str]:
    """Returns (session token for the httpOnly cookie, CSRF token for the readable cookie).
    Always a new token: the session a browser presents at login (`replaces`), whoever's it
    is, is ended, so a token planted before login is never the one that gets signed in."""
    if replaces:
        await session.execute(delete(UserSession).where(
            UserSession.token_hash == hash_token(replaces)))
    tok = new_token("session")
    csrf = secrets.token_urlsafe(32)
    now = datetime.now(UTC)
    session.add(UserSession(token_hash=tok.token_hash, user_id=user.id, org_id=user.org_id,
                            csrf_token=csrf, created_at=now, last_seen_at=now,
                            expires_at=now + limits.absolute))
    await session.flush()
    return tok.token, csrf


async def find_session(session: AsyncSession, token: str, limits: SessionLimits,
                       now: datetime | None = None) -> UserSession | None:
    """The live session of `token`, its use recorded; None if unknown, idle for longer than
    the idle timeout or older than the absolute one (an expired row is deleted)."""
    row = await session.get(UserSession, hash_token(token))
    if row is None:
        return None
    now = now or datetime.now(UTC)
    ends = min(row.expires_at, row.created_at + limits.absolute, row.last_seen_at + limits.idle)
    if ends <= now:
        await session.delete(row)
        await session.commit()
        return None
    if now - row.last_seen_at >= SESSION_TOUCH_EVERY:
        row.last_seen_at = now
        await session.commit()
    return row


async def end_sessions(session: AsyncSession, user_id: uuid.UUID) -> int:
    """Ends every session of a user (all browsers are signed out); returns how many."""
    result = await session.execute(delete(UserSession).where(UserSession.user_id == user_id))
    return int(getattr(result, "rowcount", 0) or 0)


async def change_password(session: AsyncSession, user: User, new_password: str) -> None:
    """Sets the password and ends every session of the user: a session opened with the old
    password (perhaps by whoever learnt it) does not outlive it."""
    user.password_hash = hash_password(new_password)
    await end_sessions(session, user.id)
    await session.flush()


async def create_api_key(session: AsyncSession, org_id: uuid.UUID, name: str,
                         created_by: uuid.UUID | None, scope: str = "admin"
                         ) -> tuple[ApiKey, str]:
    if scope not in API_KEY_SCOPES:
        raise ValueError(f"API key scope must be one of {', '.join(API_KEY_SCOPES)}")
    tok = new_token("api_key")
    key = ApiKey(id=uuid.uuid4(), org_id=org_id, name=name, prefix=tok.prefix,
                 token_hash=tok.token_hash, created_by=created_by, scope=scope)
    session.add(key)
    await session.flush()
    return key, tok.token


async def create_enrollment_token(session: AsyncSession, org_id: uuid.UUID, name: str,
                                  expires_at: datetime | None = None
                                  ) -> tuple[EnrollmentToken, str]:
    tok = new_token("enrollment")
    row = EnrollmentToken(id=uuid.uuid4(), org_id=org_id, name=name, prefix=tok.prefix,
                          token_hash=tok.token_hash, expires_at=expires_at)
    session.add(row)
    await session.flush()
    return row, tok.token
