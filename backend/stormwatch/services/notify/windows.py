"""Silences and maintenance windows: CRUD and their public shape. No FastAPI here."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.models import AlertRule, MaintenanceWindow, Silence
from stormwatch.schemas.notifications import (
    MaintenanceWindowCreate,
    MaintenanceWindowPublic,
    MaintenanceWindowUpdate,
    Matcher,
    SilenceCreate,
    SilencePublic,
)
from stormwatch.services.notify import matching
from stormwatch.services.notify.channels import Invalid
from stormwatch.services.owned import get_owned


class NotFound(Exception):
    pass


async def check_rule_ids(session: AsyncSession, org_id: uuid.UUID,
                         ids: list[uuid.UUID]) -> None:
    if not ids:
        return
    found = set((await session.scalars(select(AlertRule.id).where(
        AlertRule.org_id == org_id, AlertRule.id.in_(ids)))).all())
    bad = [{"loc": ["body", "rule_ids", i], "msg": f"no alert rule {rid} in this org",
            "type": "value_error"} for i, rid in enumerate(ids) if rid not in found]
    if bad:
        raise Invalid(bad)


def silence_public(row: Silence, now: datetime | None = None) -> SilencePublic:
    now = now or datetime.now(UTC)
    state = ("pending" if row.starts_at > now else "expired" if row.ends_at <= now
             else "active")
    return SilencePublic(id=row.id, rule_ids=list(row.rule_ids),
                         matchers=[Matcher(**m) for m in row.matchers],
                         starts_at=row.starts_at, ends_at=row.ends_at, comment=row.comment,
                         created_by=row.created_by, created_at=row.created_at, state=state)


async def create_silence(session: AsyncSession, org_id: uuid.UUID, body: SilenceCreate,
                         created_by: str) -> SilencePublic:
    await check_rule_ids(session, org_id, body.rule_ids)
    now = datetime.now(UTC)
    starts = body.starts_at or now
    if body.ends_at <= starts:
        raise Invalid([{"loc": ["body", "ends_at"], "msg": "ends_at must be in the "
                               "future and after starts_at", "type": "value_error"}])
    row = Silence(id=uuid.uuid4(), org_id=org_id, rule_ids=body.rule_ids,
                  matchers=[m.model_dump() for m in body.matchers], starts_at=starts,
                  ends_at=body.ends_at, comment=body.comment, created_by=created_by,
                  created_at=now)
    session.add(row)
    await session.flush()
    return silence_public(row, now)


async def list_silences(session: AsyncSession, org_id: uuid.UUID,
                        include_expired: bool) -> list[SilencePublic]:
    q = select(Silence).where(Silence.org_id == org_id)
    if not include_expired:
        q = q.where(Silence.ends_at > datetime.now(UTC))
    rows = (await session.scalars(q.order_by(Silence.ends_at.desc()).limit(500))).all()
    return [silence_public(r) for r in rows]


async def expire_silence(session: AsyncSession, org_id: uuid.UUID,
                         silence_id: uuid.UUID) -> SilencePublic:
    row = await get_owned(session, Silence, org_id, silence_id, NotFound())
    now = datetime.now(UTC)
    if row.ends_at > now:
        if row.starts_at >= now:
            row.starts_at = now - timedelta(microseconds=1)
        row.ends_at = now
        await session.flush()
    return silence_public(row, now)


def _utc(value: datetime, tz: str) -> datetime:
    if value.tzinfo is None:
        return matching.to_utc(value, ZoneInfo(tz))
    return value.astimezone(UTC)


def window_public(row: MaintenanceWindow, now: datetime | None = None
                  ) -> MaintenanceWindowPublic:
    now = now or datetime.now(UTC)
    return MaintenanceWindowPublic(
        id=row.id, name=row.name, timezone=row.timezone, starts_at=row.starts_at,
        ends_at=None if row.rrule else row.starts_at + timedelta(seconds=row.duration_s),
        duration_s=row.duration_s, rrule=row.rrule, rule_ids=list(row.rule_ids),
        matchers=[Matcher(**m) for m in row.matchers], comment=row.comment,
        created_by=row.created_by, created_at=row.created_at,
        active_now=matching.window_active(row.starts_at, row.duration_s, row.rrule,
                                          row.timezone, now),
        next_start=matching.next_start(row.starts_at, row.duration_s, row.rrule,
                                       row.timezone, now))


def _duration(starts: datetime, ends: datetime | None, duration_s: int | None) -> int:
    if ends is not None:
        d = int((ends - starts).total_seconds())
        if d <= 0:
            raise Invalid([{"loc": ["body", "ends_at"], "msg": "ends_at must be after "
                                   "starts_at", "type": "value_error"}])
        return d
    assert duration_s is not None
    return duration_s


async def create_window(session: AsyncSession, org_id: uuid.UUID,
                        body: MaintenanceWindowCreate, created_by: str
                        ) -> MaintenanceWindowPublic:
    await check_rule_ids(session, org_id, body.rule_ids)
    starts = _utc(body.starts_at, body.timezone)
    ends = _utc(body.ends_at, body.timezone) if body.ends_at is not None else None
    now = datetime.now(UTC)
    row = MaintenanceWindow(
        id=uuid.uuid4(), org_id=org_id, name=body.name, timezone=body.timezone,
        starts_at=starts, duration_s=_duration(starts, ends, body.duration_s),
        rrule=body.rrule, rule_ids=body.rule_ids,
        matchers=[m.model_dump() for m in body.matchers], comment=body.comment,
        created_by=created_by, created_at=now, updated_at=now)
    session.add(row)
    await session.flush()
    return window_public(row, now)


async def get_window(session: AsyncSession, org_id: uuid.UUID,
                     window_id: uuid.UUID) -> MaintenanceWindow:
    return await get_owned(session, MaintenanceWindow, org_id, window_id, NotFound())


async def list_windows(session: AsyncSession, org_id: uuid.UUID
                       ) -> list[MaintenanceWindowPublic]:
    rows = (await session.scalars(select(MaintenanceWindow).where(
        MaintenanceWindow.org_id == org_id).order_by(MaintenanceWindow.starts_at))).all()
    return [window_public(r) for r in rows]


async def update_window(session: AsyncSession, org_id: uuid.UUID, window_id: uuid.UUID,
                        body: MaintenanceWindowUpdate) -> MaintenanceWindowPublic:
    row = await get_window(session, org_id, window_id)
    if body.rule_ids is not None:
        await check_rule_ids(session, org_id, body.rule_ids)
        row.rule_ids = body.rule_ids
    if body.matchers is not None:
        row.matchers = [m.model_dump() for m in body.matchers]
    if not row.rule_ids and not row.matchers:
        raise Invalid([{"loc": ["body", "rule_ids"], "msg": "a maintenance window "
                               "needs rule_ids or matchers", "type": "value_error"}])
    if body.name is not None:
        row.name = body.name
    if body.comment is not None:
        row.comment = body.comment
    if body.timezone is not None:
        row.timezone = body.timezone
    if body.rrule is not None:
        row.rrule = body.rrule or None
    if body.starts_at is not None:
        row.starts_at = _utc(body.starts_at, row.timezone)
    if body.ends_at is not None:
        if row.rrule:
            raise Invalid([{"loc": ["body", "ends_at"], "msg": "a recurring window "
                                   "takes duration_s", "type": "value_error"}])
        row.duration_s = _duration(row.starts_at, _utc(body.ends_at, row.timezone), None)
    if body.duration_s is not None:
        row.duration_s = body.duration_s
    row.updated_at = datetime.now(UTC)
    await session.flush()
    return window_public(row)


async def delete_window(session: AsyncSession, org_id: uuid.UUID, window_id: uuid.UUID) -> None:
    row = await get_window(session, org_id, window_id)
    await session.delete(row)
    await session.flush()
