"""Advisor answers cached per input: one row per (org, advisor, hash of the inputs).

A row is `pending` while the worker computes it and `done` or `failed` after; writers only
move a row out of `pending` (compare-and-set), so a task delivered twice writes once.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.models import AdvisorResult

# Answers older than this are purged (worker); inputs name their time range, so an old
# answer is still true, but nobody asks for last week's "now" again.
KEEP_DAYS = 7


def input_hash(advisor: str, inputs: dict[str, Any]) -> str:
    blob = orjson.dumps({"advisor": advisor, "inputs": inputs}, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(blob).hexdigest()


async def get(session: AsyncSession, org_id: uuid.UUID, advisor: str, h: str
              ) -> AdvisorResult | None:
    return (await session.execute(select(AdvisorResult).where(
        AdvisorResult.org_id == org_id, AdvisorResult.advisor == advisor,
        AdvisorResult.input_hash == h))).scalar()


async def claim(session: AsyncSession, org_id: uuid.UUID, advisor: str, h: str,
                inputs: dict[str, Any]) -> bool:
    """Insert a pending row (or turn a failed one back to pending); False when another
    request already holds it pending or done."""
    stmt = insert(AdvisorResult).values(org_id=org_id, advisor=advisor, input_hash=h,
                                        inputs=inputs, status="pending",
                                        created_at=datetime.now(UTC))
    res = await session.execute(stmt.on_conflict_do_update(
        index_elements=["org_id", "advisor", "input_hash"],
        set_={"status": "pending", "result": None, "error": None,
              "created_at": stmt.excluded.created_at},
        where=AdvisorResult.status == "failed").returning(AdvisorResult.input_hash))
    claimed = res.first() is not None
    await session.commit()
    return claimed


async def finish(session: AsyncSession, org_id: uuid.UUID, advisor: str, h: str, status: str,
                 result: dict[str, Any] | None, error: dict[str, Any] | None) -> bool:
    res = await session.execute(update(AdvisorResult).where(
        AdvisorResult.org_id == org_id, AdvisorResult.advisor == advisor,
        AdvisorResult.input_hash == h, AdvisorResult.status == "pending").values(
        status=status, result=result, error=error, computed_at=datetime.now(UTC)))
    await session.commit()
    return bool(getattr(res, "rowcount", 0))
