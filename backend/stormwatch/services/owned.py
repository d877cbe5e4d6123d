"""Reading one row by id for an org: a row of another org answers the same as none, so ids
never reveal what other tenants hold."""

from __future__ import annotations

import uuid
from typing import Protocol, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession


class _OrgRow(Protocol):
    org_id: uuid.UUID


R = TypeVar("R", bound=_OrgRow)


async def get_owned(session: AsyncSession, model: type[R], org_id: uuid.UUID,
                    row_id: uuid.UUID, missing: Exception) -> R:
    """The row, or `missing` raised when it does not exist or belongs to another org."""
    row = await session.get(model, row_id)
    if row is None or row.org_id != org_id:
        raise missing
    return row
