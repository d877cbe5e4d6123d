"""Who changed what in an org, kept for AUDIT_RETENTION_DAYS."""

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, ForeignKey, Index, String, Text, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from stormwatch.models.base import Base, utcnow, uuid_pk


class AuditEvent(Base):
    __tablename__ = "audit_events"
    __table_args__ = (Index("ix_audit_events_org_at", "org_id", "at", "id"),)

    id: Mapped[uuid.UUID] = uuid_pk()
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"))
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow,
                                         server_default=text("now()"))
    actor_kind: Mapped[str] = mapped_column(String(20))
    # No foreign key: the entry outlives the user or key that acted, the label names it.
    actor_id: Mapped[uuid.UUID | None] = mapped_column()
    actor_label: Mapped[str] = mapped_column(Text)
    action: Mapped[str] = mapped_column(String(80))
    target_type: Mapped[str] = mapped_column(String(40))
    target_id: Mapped[str | None] = mapped_column(Text)
    target_label: Mapped[str] = mapped_column(Text, server_default="", default="")
    changes: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"),
                                                    default=dict)
    request_id: Mapped[str | None] = mapped_column(String(100))
