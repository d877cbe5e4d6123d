"""Storage targets: per-org configuration, encrypted inline credentials, and the
`storage.targets` entries each agent receives in its config (docs/storage-probes.md)."""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

from pydantic import SecretStr
from sqlalchemy import delete, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.core import egress
from stormwatch.core.security import decrypt_secret, encrypt_secret
from stormwatch.models import Agent
from stormwatch.models.storage_target import StorageTarget, StorageTargetAgent
from stormwatch.schemas.storage_target import (
    CredentialsPublic,
    EnvCredentials,
    FileCredentials,
    InlineCredentials,
    Sizes,
    StorageTargetCreate,
    StorageTargetPublic,
    StorageTargetUpdate,
    Variants,
    check_inline,
)
from stormwatch.services.owned import get_owned

log = logging.getLogger(__name__)

_SECRET_FIELDS = ("access_key_id", "secret_access_key", "session_token", "account_key",
                  "sas_token", "service_account_json")


class StorageTargetInvalid(Exception):
    """A request that names something impossible; `loc` points at the field."""

    def __init__(self, loc: list[str | int], msg: str) -> None:
        super().__init__(msg)
        self.loc = loc
        self.msg = msg


class StorageTargetNotFound(Exception):
    pass


class StorageTargetConflict(Exception):
    pass


def _credentials_columns(creds: Any) -> tuple[str, dict[str, Any], str | None]:
    """(source, non-secret reference, ciphertext of the secret part)."""
    if isinstance(creds, EnvCredentials):
        return "env", creds.model_dump(exclude={"source"}, exclude_none=True), None
    if isinstance(creds, FileCredentials):
        return "file", {"path": creds.path}, None
    if isinstance(creds, InlineCredentials):
        ref = {"account_name": creds.account_name} if creds.account_name else {}
        secret = {}
        for field in _SECRET_FIELDS:
            value = getattr(creds, field)
            if isinstance(value, SecretStr):
                secret[field] = value.get_secret_value()
        return "inline", ref, encrypt_secret(json.dumps(secret)) if secret else None
    return "none", {}, None


async def _check_endpoint(endpoint: str | None) -> None:
    """Agents, not the server, connect to the endpoint; it still passes the egress policy so
    an org cannot aim probes at the server's own network unless the operator allows it."""
    if not endpoint:
        return
    try:
        await egress.check_url(endpoint)
    except egress.EgressRefused as exc:
        raise StorageTargetInvalid(["body", "endpoint"], exc.detail) from exc


async def _check_agents(session: AsyncSession, org_id: uuid.UUID,
                        agent_ids: list[uuid.UUID]) -> None:
    if not agent_ids:
        return
    known = set((await session.execute(select(Agent.id).where(
        Agent.org_id == org_id, Agent.id.in_(agent_ids)))).scalars())
    for i, aid in enumerate(agent_ids):
        if aid not in known:
            raise StorageTargetInvalid(["body", "agent_ids", i],
                                       "not an agent of this organisation")


async def _assigned(session: AsyncSession, target_ids: list[uuid.UUID]
                    ) -> dict[uuid.UUID, list[uuid.UUID]]:
    out: dict[uuid.UUID, list[uuid.UUID]] = {t: [] for t in target_ids}
    if target_ids:
        rows = await session.execute(select(StorageTargetAgent.target_id,
                                            StorageTargetAgent.agent_id)
                                     .where(StorageTargetAgent.target_id.in_(target_ids)))
        for tid, aid in rows.all():
            out[tid].append(aid)
    for ids in out.values():
        ids.sort()
    return out


def _public(t: StorageTarget, agent_ids: list[uuid.UUID]) -> StorageTargetPublic:
    ref = t.credentials_ref or {}
    return StorageTargetPublic(
        id=t.id, name=t.name, provider=t.provider, endpoint=t.endpoint, region=t.region,
        bucket=t.bucket, prefix=t.prefix, path_style=t.path_style, interval_s=t.interval_s,
        op_timeout_ms=t.op_timeout_ms, contents=list(t.contents),
        sizes_bytes=Sizes.model_validate(t.sizes_bytes),
        variants=Variants.model_validate(t.variants), enabled=t.enabled,
        assign_all=t.assign_all, agent_ids=agent_ids,
        credentials=CredentialsPublic(
            source=t.credentials_source, path=ref.get("path"),
            env_vars={k: v for k, v in ref.items() if k.endswith("_var")},
            has_secret=t.credentials_ciphertext is not None,
            account_name=ref.get("account_name")),
        created_at=t.created_at, updated_at=t.updated_at)


async def _owned(session: AsyncSession, org_id: uuid.UUID, target_id: uuid.UUID) -> StorageTarget:
    return await get_owned(session, StorageTarget, org_id, target_id,
                           StorageTargetNotFound("no such storage target"))


async def list_targets(session: AsyncSession, org_id: uuid.UUID) -> list[StorageTargetPublic]:
    rows = list((await session.execute(select(StorageTarget).where(
        StorageTarget.org_id == org_id).order_by(StorageTarget.name))).scalars())
    assigned = await _assigned(session, [t.id for t in rows])
    return [_public(t, assigned[t.id]) for t in rows]


async def get_target(session: AsyncSession, org_id: uuid.UUID,
                     target_id: uuid.UUID) -> StorageTargetPublic:
    t = await _owned(session, org_id, target_id)
    return _public(t, (await _assigned(session, [t.id]))[t.id])


async def _set_agents(session: AsyncSession, target_id: uuid.UUID,
                      agent_ids: list[uuid.UUID]) -> None:
    await session.execute(delete(StorageTargetAgent).where(
        StorageTargetAgent.target_id == target_id))
    for aid in dict.fromkeys(agent_ids):
        session.add(StorageTargetAgent(target_id=target_id, agent_id=aid))


async def create_target(session: AsyncSession, org_id: uuid.UUID,
                        body: StorageTargetCreate) -> StorageTargetPublic:
    await _check_endpoint(body.endpoint)
    await _check_agents(session, org_id, body.agent_ids)
    source, ref, ciphertext = _credentials_columns(body.credentials)
    t = StorageTarget(
        id=uuid.uuid4(), org_id=org_id, name=body.name, provider=body.provider,
        endpoint=body.endpoint, region=body.region, bucket=body.bucket, prefix=body.prefix,
        path_style=body.path_style, interval_s=body.interval_s, op_timeout_ms=body.op_timeout_ms,
        contents=list(body.contents), sizes_bytes=body.sizes_bytes.model_dump(),
        variants=body.variants.model_dump(), credentials_source=source, credentials_ref=ref,
        credentials_ciphertext=ciphertext, enabled=body.enabled, assign_all=body.assign_all)
    session.add(t)
    try:
        await session.flush()
    except IntegrityError as exc:
        raise StorageTargetConflict("a storage target with this name exists") from exc
    await _set_agents(session, t.id, body.agent_ids)
    await session.flush()
    await session.refresh(t)
    return _public(t, sorted(dict.fromkeys(body.agent_ids)))


async def update_target(session: AsyncSession, org_id: uuid.UUID, target_id: uuid.UUID,
                        body: StorageTargetUpdate) -> StorageTargetPublic:
    t = await _owned(session, org_id, target_id)
    await _check_endpoint(body.endpoint)
    fields = body.model_fields_set
    for name in ("name", "bucket", "endpoint", "region", "prefix", "path_style", "interval_s",
                 "op_timeout_ms", "enabled", "assign_all"):
        value = getattr(body, name)
        if name in fields and value is not None:
            setattr(t, name, value)
    if body.contents is not None:
        t.contents = list(body.contents)
    if body.sizes_bytes is not None:
        t.sizes_bytes = body.sizes_bytes.model_dump()
    if body.variants is not None:
        t.variants = body.variants.model_dump()
    if body.credentials is not None:
        try:
            check_inline(t.provider, body.credentials)
        except ValueError as exc:
            raise StorageTargetInvalid(["body", "credentials"], str(exc)) from exc
        source, ref, ciphertext = _credentials_columns(body.credentials)
        t.credentials_source, t.credentials_ref, t.credentials_ciphertext = source, ref, ciphertext
    # A new name taken by another target must fail here, as a conflict: the queries below
    # would otherwise autoflush it and fail with a bare IntegrityError.
    try:
        await session.flush()
    except IntegrityError as exc:
        raise StorageTargetConflict("a storage target with this name exists") from exc
    if body.agent_ids is not None:
        await _check_agents(session, org_id, body.agent_ids)
        await _set_agents(session, t.id, body.agent_ids)
    try:
        await session.flush()
    except IntegrityError as exc:
        raise StorageTargetConflict("a storage target with this name exists") from exc
    await session.refresh(t)
    return _public(t, (await _assigned(session, [t.id]))[t.id])


async def delete_target(session: AsyncSession, org_id: uuid.UUID, target_id: uuid.UUID) -> None:
    t = await _owned(session, org_id, target_id)
    await session.delete(t)
    await session.flush()


def agent_entry(t: StorageTarget, agent_id: uuid.UUID) -> dict[str, Any] | None:
    """The target as the agent's `storage.targets` entry, inline secrets decrypted.

    Each agent works under its own `<prefix><agent_id>/`, so agents sharing a bucket never
    delete each other's objects when they clean up.
    """
    creds: dict[str, Any] = {"source": t.credentials_source, **(t.credentials_ref or {})}
    if t.credentials_source == "inline" and t.credentials_ciphertext:
        try:
            creds.update(json.loads(decrypt_secret(t.credentials_ciphertext)))
        except ValueError:
            log.warning("storage target %s: its credentials cannot be decrypted with the "
                        "current SECRET_KEY; not sent to agents", t.id)
            return None
    variants = {name: v for name, v in Variants.model_validate(t.variants)
                .model_dump(exclude_none=True).items() if v.get("enabled")}
    entry: dict[str, Any] = {
        "target_id": str(t.id),
        "provider": t.provider,
        "bucket": t.bucket,
        "prefix": f"{t.prefix.rstrip('/')}/{agent_id}/",
        "path_style": t.path_style,
        "interval_s": t.interval_s,
        "op_timeout_ms": t.op_timeout_ms,
        "contents": list(t.contents),
        "sizes_bytes": Sizes.model_validate(t.sizes_bytes).model_dump(),
        "variants": variants,
        "credentials": creds,
    }
    if t.endpoint:
        entry["endpoint"] = t.endpoint
    if t.region:
        entry["region"] = t.region
    return entry


async def storage_targets_for_agent(session: AsyncSession, agent: Agent) -> list[dict[str, Any]]:
    """The enabled storage targets assigned to `agent`, as its config's `storage.targets`."""
    assigned = select(StorageTargetAgent.target_id).where(
        StorageTargetAgent.agent_id == agent.id)
    rows = (await session.execute(select(StorageTarget).where(
        StorageTarget.org_id == agent.org_id, StorageTarget.enabled.is_(True),
        or_(StorageTarget.assign_all.is_(True), StorageTarget.id.in_(assigned)))
        .order_by(StorageTarget.name))).scalars()
    return [e for t in rows if (e := agent_entry(t, agent.id)) is not None]
