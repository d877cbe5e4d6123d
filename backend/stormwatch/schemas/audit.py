import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class AuditEventPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    at: datetime = Field(description="UTC")
    actor_kind: str = Field(description="user or api_key")
    actor_id: uuid.UUID | None
    actor_label: str = Field(description="The user's email or the key's name when it acted")
    action: str = Field(description="<target_type>.<create|update|delete|...>")
    target_type: str
    target_id: str | None
    target_label: str
    changes: dict[str, Any] = Field(
        description="{field: [before, after]}; credentials show as \"••••\"")
    request_id: str | None


class AuditPage(BaseModel):
    items: list[AuditEventPublic]
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next (older) page; null on the last page")
