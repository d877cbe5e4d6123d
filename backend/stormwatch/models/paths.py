"""Path traces from the agents, and each pair's paths over time (services/paths)."""

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, DateTime, ForeignKey, Index, Integer, String, Text, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from stormwatch.models.base import Base, created_at_col, uuid_pk


class PairPath(Base):
    """One path of an ordered pair, from the trace that first showed it to the last trace
    that matched it; its hops accumulate those traces' evidence (services/paths/identity).
    A path with a previous one is a path change: where they part and what that added."""

    __tablename__ = "pair_paths"
    __table_args__ = (Index("ix_pair_paths_pair_first_seen", "org_id", "src_agent_id",
                            "dst_agent_id", "first_seen"),)

    id: Mapped[uuid.UUID] = uuid_pk()
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"))
    src_agent_id: Mapped[uuid.UUID] = mapped_column()
    dst_agent_id: Mapped[uuid.UUID] = mapped_column()
    first_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    last_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    traces: Mapped[int] = mapped_column(Integer, default=1)
    reached: Mapped[bool] = mapped_column(Boolean)
    hops: Mapped[list[dict[str, Any]]] = mapped_column(JSONB)
    prev_path_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("pair_paths.id", ondelete="SET NULL"), default=None)
    diff_ttl: Mapped[int | None] = mapped_column(Integer, default=None)
    added_rtt_us: Mapped[int | None] = mapped_column(Integer, default=None)


class PathTrace(Base):
    """One trace as the agent sent it, and the pair path it was counted in."""

    __tablename__ = "path_traces"
    __table_args__ = (Index("ix_path_traces_pair_started", "org_id", "src_agent_id",
                            "dst_agent_id", "started_at"),)

    id: Mapped[uuid.UUID] = uuid_pk()
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"))
    src_agent_id: Mapped[uuid.UUID] = mapped_column()
    dst_agent_id: Mapped[uuid.UUID] = mapped_column()
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    proto: Mapped[str] = mapped_column(String(8))
    trigger: Mapped[str] = mapped_column(String(16))
    dst_address: Mapped[str] = mapped_column(String(64))
    reached: Mapped[bool] = mapped_column(Boolean)
    elapsed_ms: Mapped[int] = mapped_column(Integer)
    hops: Mapped[list[dict[str, Any]]] = mapped_column(JSONB)
    path_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("pair_paths.id", ondelete="SET NULL"), default=None)
    received_at: Mapped[datetime] = created_at_col()


class PathTraceRequest(Base):
    """A trace the server asks an agent for through its config poll: when an alert on the
    pair fires, or a person asks. One pending per pair (later asks while one is pending are
    the same ask); it lapses unserved at expires_at (the agent may be gone)."""

    __tablename__ = "path_trace_requests"
    __table_args__ = (
        Index("uq_path_trace_requests_pending", "org_id", "src_agent_id", "dst_agent_id",
              unique=True, postgresql_where=text("served_at IS NULL")),
        Index("ix_path_trace_requests_src", "src_agent_id", "served_at"),
    )

    id: Mapped[uuid.UUID] = uuid_pk()
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"))
    src_agent_id: Mapped[uuid.UUID] = mapped_column()
    dst_agent_id: Mapped[uuid.UUID] = mapped_column()
    trigger: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text)
    alert_event_id: Mapped[uuid.UUID | None] = mapped_column(default=None)
    requested_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    served_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), default=None)
    trace_id: Mapped[uuid.UUID | None] = mapped_column(default=None)
