"""Creates an org with an admin, an API key and an enrollment token (demo and tests)."""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import asdict, dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine

from stormwatch.cli import AdminResult, ensure_admin
from stormwatch.core.security import verify_password
from stormwatch.models import User
from stormwatch.services import accounts


@dataclass
class OrgCredentials:
    org_id: str
    org_name: str
    email: str
    password: str
    api_key: str
    enrollment_token: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


async def _with_tokens(session: AsyncSession, admin: AdminResult,
                       password: str) -> OrgCredentials:
    _, api_key = await accounts.create_api_key(session, admin.org_id, "default", admin.user_id)
    _, enrollment = await accounts.create_enrollment_token(session, admin.org_id, "default")
    await session.commit()
    return OrgCredentials(org_id=str(admin.org_id), org_name=admin.org_name, email=admin.email,
                          password=password, api_key=api_key, enrollment_token=enrollment)


async def create_org_with_admin(database_url: str, name: str, email: str,
                                password: str | None = None,
                                password_hash: str | None = None) -> OrgCredentials:
    """A new org every call (tests and benches), through the same code as `create-admin`;
    `password_hash`, the hash of `password`, spares a caller making many orgs the hashing."""
    engine = create_async_engine(database_url)
    try:
        async with async_sessionmaker(engine, expire_on_commit=False)() as session:
            password = password or secrets.token_urlsafe(12)
            admin = await ensure_admin(session, name, email, password,
                                       org_slug=accounts.slugify(name) + "-"
                                       + secrets.token_hex(3), password_hash=password_hash)
            return await _with_tokens(session, admin, password)
    finally:
        await engine.dispose()


async def ensure_demo_org(database_url: str, name: str, email: str) -> OrgCredentials:
    """The demo org and admin of `make run` (`create-admin` semantics), with a fresh password
    and tokens: the runner calls it when its saved login no longer matches the database."""
    engine = create_async_engine(database_url)
    try:
        async with async_sessionmaker(engine, expire_on_commit=False)() as session:
            password = secrets.token_urlsafe(12)
            admin = await ensure_admin(session, name, email, password, reset_password=True)
            return await _with_tokens(session, admin, password)
    finally:
        await engine.dispose()


async def saved_login_works(database_url: str, saved: dict[str, str]) -> bool:
    """Whether the login `make run` saved still opens its org: the org is there, and its
    admin's password is still the saved one (not changed in the UI since)."""
    engine = create_async_engine(database_url)
    try:
        async with engine.connect() as conn:
            row = (await conn.execute(select(User.password_hash).where(
                User.email == saved["email"], User.org_id == saved["org_id"]))).first()
    finally:
        await engine.dispose()
    return row is not None and verify_password(row[0], saved["password"])


def create_org_sync(database_url: str, name: str, email: str,
                    password: str | None = None, password_hash: str | None = None
                    ) -> OrgCredentials:
    return asyncio.run(create_org_with_admin(database_url, name, email, password, password_hash))
