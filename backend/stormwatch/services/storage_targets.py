"""Storage targets handed to agents through their configuration."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from stormwatch.models import Agent


async def storage_targets_for_agent(session: AsyncSession, agent: Agent) -> list[dict[str, Any]]:
    """The storage targets assigned to `agent`, as its config's `storage.targets` entries.

    No targets can be configured until storage targets exist as a resource, so none apply.
    """
    return []
