"""Where an org's data begins: the default ranges of a young install are minutes, not days."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.services.analytics.filters import KIND_SPECS


async def data_start(session: AsyncSession, org_id: uuid.UUID, kind: str | None,
                     start: datetime) -> datetime | None:
    """When the org's data of this kind begins after `start`: its first minute rollup, else
    (rollups lag on a young install) its first agent's enrollment; None when it has neither.
    Both reads are index lookups."""
    first = None
    if kind is not None:
        first = (await session.execute(text(
            f"SELECT min(bucket_start) FROM {KIND_SPECS[kind].table} "  # noqa: S608 (fixed names)
            "WHERE org_id = :o AND bucket_s = 60 AND bucket_start >= :s"),
            {"o": org_id, "s": start})).scalar()
    if first is None:
        first = (await session.execute(text(
            "SELECT min(first_seen) FROM agents WHERE org_id = :o"), {"o": org_id})).scalar()
    return first
