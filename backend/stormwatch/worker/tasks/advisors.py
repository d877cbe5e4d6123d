"""Advisor computations too large for a request, and the purge of old cached answers."""

import asyncio
import uuid

from sqlalchemy import text

from stormwatch.core.db import get_sync_engine
from stormwatch.services.advisors import measured, placement, results
from stormwatch.worker.app import celery_app
from stormwatch.worker.db import task_sessions


async def _compute_placement(org_id: uuid.UUID, input_hash: str) -> str:
    # The analytics readers are async.
    async with task_sessions() as sessions, sessions() as session:
        row = await results.get(session, org_id, "placement", input_hash)
        if row is None or row.status != "pending":
            return row.status if row else "missing"
        inputs = row.inputs
        await session.commit()
        try:
            out = await measured.placement_answer(session, org_id, inputs)
        except (measured.AdvisorInputError, placement.PlacementError) as exc:
            await session.rollback()
            await results.finish(session, org_id, "placement", input_hash, "failed", None,
                                 {"field": exc.field, "msg": str(exc)})
            return "failed"
        await results.finish(session, org_id, "placement", input_hash, "done", out, None)
        return out["status"]


@celery_app.task(name="stormwatch.compute_placement")
def compute_placement(org_id: str, input_hash: str) -> str:
    """Simulates one cached placement input; a second delivery finds the row done and stops."""
    return asyncio.run(_compute_placement(uuid.UUID(org_id), input_hash))


@celery_app.task(name="stormwatch.purge_advisor_results")
def purge_advisor_results() -> int:
    with get_sync_engine().begin() as conn:
        return conn.execute(text(
            "DELETE FROM advisor_results WHERE created_at < now() - make_interval(days => :d)"),
            {"d": results.KEEP_DAYS}).rowcount
