"""Creates an org with an admin, an API key and an enrollment token (demo and tests)."""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import asdict, dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

from stormwatch.models import Org
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


async def create_org_with_admin(database_url: str, name: str, email: str,
                                password: str | None = None) -> OrgCredentials:
    engine = create_async_engine(database_url)
    try:
        async with async_sessionmaker(engine, expire_on_commit=False)() as session:
            org = await accounts.create_org(session, name, slug=accounts.slugify(name) + "-"
                                            + secrets.token_hex(3))
            password = password or secrets.token_urlsafe(12)
            user = await accounts.create_user(session, org.id, email, password)
            _, api_key = await accounts.create_api_key(session, org.id, "default", user.id)
            _, enrollment = await accounts.create_enrollment_token(session, org.id, "default")
            await session.commit()
            return OrgCredentials(org_id=str(org.id), org_name=org.name, email=email,
                                  password=password, api_key=api_key,
                                  enrollment_token=enrollment)
    finally:
        await engine.dispose()


async def org_exists(database_url: str, org_id: str) -> bool:
    engine = create_async_engine(database_url)
    try:
        async with engine.connect() as conn:
            return (await conn.execute(select(Org.id).where(Org.id == org_id))).first() is not None
    finally:
        await engine.dispose()


def create_org_sync(database_url: str, name: str, email: str,
                    password: str | None = None) -> OrgCredentials:
    return asyncio.run(create_org_with_admin(database_url, name, email, password))
