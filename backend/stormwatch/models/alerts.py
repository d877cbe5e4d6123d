"""Alert rules, their per-series running state, firing episodes and the transitions to tell.

Evaluation (services/alerts/) writes all four; notifications only read `alerts` and
`alert_events`."""

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ARRAY,
    Boolean,
    CheckConstraint,
    DateTime,
    Double,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    Uuid,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from stormwatch.models.base import Base, created_at_col, uuid_pk

SEVERITIES = ("critical", "warning", "info")


class AlertRule(Base):
    __tablename__ = "alert_rules"
    __table_args__ = (
        CheckConstraint("severity IN ('critical', 'warning', 'info')", name="severity"),
        CheckConstraint("window_s BETWEEN 30 AND 3600", name="window_s"),
        CheckConstraint("x >= 1 AND x <= y", name="x_of_y"),
        CheckConstraint("n >= 1 AND (m IS NULL OR n <= m)", name="n_of_m"),
    )

    id: Mapped[uuid.UUID] = uuid_pk()
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(Text, default="", server_default="")
    severity: Mapped[str] = mapped_column(String(10), default="warning")
    labels: Mapped[dict[str, str]] = mapped_column(JSONB, default=dict,
                                                   server_default=text("'{}'::jsonb"))
    enabled: Mapped[bool] = mapped_column(Boolean, default=True, server_default=text("true"))
    # The definition: what is measured, where, over which windows, and when it is bad.
    metric: Mapped[str] = mapped_column(String(30))
    statistic: Mapped[str] = mapped_column(String(20))
    scope: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict,
                                                  server_default=text("'{}'::jsonb"))
    window_s: Mapped[int] = mapped_column(Integer)
    condition: Mapped[dict[str, Any]] = mapped_column(JSONB)
    x: Mapped[int] = mapped_column(Integer, default=1, server_default=text("1"))
    y: Mapped[int] = mapped_column(Integer, default=1, server_default=text("1"))
    n: Mapped[int] = mapped_column(Integer, default=1, server_default=text("1"))
    m: Mapped[int | None] = mapped_column(Integer)
    channel_ids: Mapped[list[uuid.UUID]] = mapped_column(
        ARRAY(Uuid), default=list, server_default=text("'{}'::uuid[]"))
    reminder_interval_s: Mapped[int | None] = mapped_column(Integer)
    created_by: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"))
    # The API key a rule was created with; null when a user created it in a session.
    created_by_key_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("api_keys.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = created_at_col()
    updated_at: Mapped[datetime] = created_at_col()
    # Evaluation cursor: end of the newest window evaluated, advanced by compare-and-set on
    # eval_version so two workers never both apply one cycle's transitions.
    evaluated_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    eval_version: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    # Evaluation failures in a row (health names the rule at three) and the last reason.
    eval_failures_in_a_row: Mapped[int] = mapped_column(Integer, default=0,
                                                        server_default=text("0"))
    eval_last_error: Mapped[str | None] = mapped_column(Text)
    eval_last_failure: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class AlertSeriesState(Base):
    """Running state of one series of a rule (or of the rule's group when N of M > 1)."""

    __tablename__ = "alert_series_state"

    rule_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("alert_rules.id", ondelete="CASCADE"), primary_key=True)
    series_key: Mapped[str] = mapped_column(String(400), primary_key=True)
    org_id: Mapped[uuid.UUID] = mapped_column(Uuid, index=True)
    state: Mapped[str] = mapped_column(String(10), default="ok")
    # Breach flags of the newest windows, oldest first (at most y of them).
    history: Mapped[list[bool]] = mapped_column(ARRAY(Boolean), default=list)
    # Their values and thresholds (NaN: no data), for the evidence of a transition.
    recent_values: Mapped[list[float]] = mapped_column(ARRAY(Double), default=list)
    recent_thresholds: Mapped[list[float]] = mapped_column(ARRAY(Double), default=list)
    last_value: Mapped[float | None] = mapped_column(Double)
    window_end: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Alert(Base):
    """One firing episode of a rule's group: a series, or the rule itself when N of M > 1."""

    __tablename__ = "alerts"
    __table_args__ = (
        CheckConstraint("state IN ('firing', 'resolved')", name="state"),
        # At most one open episode per group, whatever two workers try.
        Index("uq_alerts_open_group", "rule_id", "group_key", unique=True,
              postgresql_where=text("state = 'firing'")),
        Index("ix_alerts_org_started", "org_id", "started_at"),
    )

    id: Mapped[uuid.UUID] = uuid_pk()
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"))
    rule_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("alert_rules.id", ondelete="CASCADE"), index=True)
    group_key: Mapped[str] = mapped_column(String(400))
    state: Mapped[str] = mapped_column(String(10))
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    resolved_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    evidence: Mapped[dict[str, Any]] = mapped_column(JSONB)
    version: Mapped[int] = mapped_column(Integer, default=1, server_default=text("1"))
    created_at: Mapped[datetime] = created_at_col()
    updated_at: Mapped[datetime] = created_at_col()


class AlertEvent(Base):
    """A transition that must be told, written with the transition, once per (alert, kind)."""

    __tablename__ = "alert_events"
    __table_args__ = (
        UniqueConstraint("alert_id", "kind", name="uq_alert_events_alert_kind"),
        CheckConstraint("kind IN ('firing', 'resolved')", name="kind"),
        Index("ix_alert_events_created", "created_at"),
    )

    id: Mapped[uuid.UUID] = uuid_pk()
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"),
                                              index=True)
    rule_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("alert_rules.id", ondelete="CASCADE"))
    alert_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("alerts.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(10))
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = created_at_col()
    evidence: Mapped[dict[str, Any]] = mapped_column(JSONB)
