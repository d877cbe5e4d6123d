"""Database engines: async for the API, sync for Celery tasks and scripts."""

from functools import lru_cache

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from stormwatch.core.config import get_settings


@lru_cache
def get_engine() -> AsyncEngine:
    s = get_settings()
    # pre_ping lets the pool recover on its own after the database restarts.
    return create_async_engine(
        s.database_url, pool_size=10, max_overflow=10, pool_pre_ping=True, pool_timeout=5,
        connect_args={"timeout": 5, "command_timeout": 60},
    )


@lru_cache
def get_sessionmaker() -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(get_engine(), expire_on_commit=False)


@lru_cache
def get_sync_engine() -> Engine:
    return create_engine(get_settings().sync_database_url, pool_pre_ping=True, pool_size=5)


async def lock_row_key(session: AsyncSession, table: str, *key: object) -> None:
    """Serialises, until the transaction ends, the writers of one row that may not exist yet:
    a get-or-create (PUT of a new org place, a first OTLP export) run twice at once would
    otherwise insert twice, and the second would fail on the primary key; a delete between
    another writer's read and its update would fail that update. Every writer of the row
    (put and delete) takes it before reading the row."""
    await session.execute(text("SELECT pg_advisory_xact_lock(hashtext(:t), hashtext(:k))"),
                          {"t": table, "k": "|".join(map(str, key))})
