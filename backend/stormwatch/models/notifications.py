"""Channels, silences, maintenance windows, and the delivery outbox of alert notifications.

Evaluation writes `alert_events`; dispatch turns them into `notifications` (one per rule and
kind per pass, grouping that rule's pending events) and one `notification_deliveries` row
per channel (the outbox), claimed by compare-and-set and marked sent after the send."""

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ARRAY,
    Boolean,
    CheckConstraint,
    DateTime,
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

from stormwatch.models.base import Base, created_at_col, utcnow, uuid_pk


class NotificationChannel(Base):
    """Where notifications go. `config` holds what may be shown; `secret_ciphertext` (Fernet,
    keyed by SECRET_KEY) the SMTP password, the Slack webhook URL or the signing secret."""

    __tablename__ = "notification_channels"
    __table_args__ = (
        UniqueConstraint("org_id", "name"),
        # The kinds of notifications/registry.py (tests/notifications/test_registry.py).
        CheckConstraint("kind IN ('email', 'slack', 'webhook', 'pagerduty', 'opsgenie', "
                        "'discord', 'teams', 'alertmanager')", name="kind"),
    )

    id: Mapped[uuid.UUID] = uuid_pk()
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"),
                                              index=True)
    name: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(20))
    config: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    secret_ciphertext: Mapped[str | None] = mapped_column(Text)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True, server_default=text("true"))
    created_by: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    created_at: Mapped[datetime] = created_at_col()
    updated_at: Mapped[datetime] = created_at_col()


class MutesRules:
    """What a silence or maintenance window mutes (rules by id, or by label matchers), and
    who set it up; matched by services/notify/windows.py the same way for both."""

    rule_ids: Mapped[list[uuid.UUID]] = mapped_column(
        ARRAY(Uuid), default=list, server_default=text("'{}'::uuid[]"))
    matchers: Mapped[list[dict[str, str]]] = mapped_column(
        JSONB, default=list, server_default=text("'[]'::jsonb"))
    comment: Mapped[str] = mapped_column(Text, default="", server_default="")
    created_by: Mapped[str] = mapped_column(String(320))
    created_at: Mapped[datetime] = created_at_col()


class Silence(MutesRules, Base):
    """Mutes notifications of matching rules from starts_at to ends_at (expiring sets ends_at)."""

    __tablename__ = "silences"
    __table_args__ = (
        CheckConstraint("ends_at > starts_at", name="range"),
        Index("ix_silences_org_ends", "org_id", "ends_at"),
    )

    id: Mapped[uuid.UUID] = uuid_pk()
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"))
    starts_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    ends_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class MaintenanceWindow(MutesRules, Base):
    """Planned work: one-off (starts_at..ends_at) or recurring (RFC 5545 RRULE expanded in
    `timezone` from starts_at's local time, each occurrence lasting duration_s)."""

    __tablename__ = "maintenance_windows"
    __table_args__ = (
        CheckConstraint("duration_s > 0", name="duration_s"),
    )

    id: Mapped[uuid.UUID] = uuid_pk()
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"),
                                              index=True)
    name: Mapped[str] = mapped_column(String(200))
    timezone: Mapped[str] = mapped_column(String(64), default="UTC")
    starts_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    duration_s: Mapped[int] = mapped_column(Integer)
    rrule: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow,
                                                 onupdate=utcnow)


class Notification(Base):
    """One message about one rule: its firing, resolved or reminder alerts of one pass."""

    __tablename__ = "notifications"
    __table_args__ = (
        CheckConstraint("kind IN ('firing', 'resolved', 'reminder')", name="kind"),
        Index("ix_notifications_org_created", "org_id", "created_at"),
        Index("ix_notifications_alert_ids", "alert_ids", postgresql_using="gin"),
    )

    id: Mapped[uuid.UUID] = uuid_pk()
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"))
    rule_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("alert_rules.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(10))
    alert_ids: Mapped[list[uuid.UUID]] = mapped_column(ARRAY(Uuid))
    event_ids: Mapped[list[uuid.UUID]] = mapped_column(
        ARRAY(Uuid), default=list, server_default=text("'{}'::uuid[]"))
    # The rendered facts (rule, alerts, values, links) as of the pass, so retries and the
    # log show what was said even after the rule changes.
    message: Mapped[dict[str, Any]] = mapped_column(JSONB)
    created_at: Mapped[datetime] = created_at_col()


class NotificationDelivery(Base):
    """The outbox: one row per (notification, channel). pending -> sending (claimed, with a
    lease) -> sent | failed; a 'sending' row whose lease expired (worker killed) is claimed
    again. `id` is the idempotency key sent to receivers (webhook-id, Message-ID)."""

    __tablename__ = "notification_deliveries"
    __table_args__ = (
        UniqueConstraint("notification_id", "channel_id"),
        CheckConstraint("state IN ('pending', 'sending', 'sent', 'failed')", name="state"),
        Index("ix_notification_deliveries_due", "next_attempt_at",
              postgresql_where=text("state IN ('pending', 'sending')")),
        Index("ix_notification_deliveries_channel", "channel_id", "created_at"),
    )

    id: Mapped[uuid.UUID] = uuid_pk()
    org_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"),
                                              index=True)
    notification_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("notifications.id", ondelete="CASCADE"))
    channel_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("notification_channels.id", ondelete="CASCADE"))
    state: Mapped[str] = mapped_column(String(10), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    next_attempt_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    claim_token: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_error: Mapped[str | None] = mapped_column(Text)
    response: Mapped[str | None] = mapped_column(Text)
    sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = created_at_col()


class AlertEventDispatch(Base):
    """Which alert events dispatch has handled, and how (notified, silenced, in maintenance,
    nothing to tell); the primary key makes handling an event twice impossible."""

    __tablename__ = "alert_event_dispatches"
    __table_args__ = (
        CheckConstraint("outcome IN ('notified', 'silenced', 'maintenance', 'no_channels', "
                        "'not_notified')", name="outcome"),
    )

    event_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("alert_events.id", ondelete="CASCADE"), primary_key=True)
    org_id: Mapped[uuid.UUID] = mapped_column(Uuid, index=True)
    outcome: Mapped[str] = mapped_column(String(12))
    notification_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("notifications.id", ondelete="SET NULL"))
    suppressed_by: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    created_at: Mapped[datetime] = created_at_col()


class AlertNotifyState(Base):
    """Per firing alert: when it was last told (firing or reminder), for reminders, and
    whether its firing was told at all (a resolved message only follows a told firing)."""

    __tablename__ = "alert_notify_state"

    alert_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("alerts.id", ondelete="CASCADE"), primary_key=True)
    org_id: Mapped[uuid.UUID] = mapped_column(Uuid, index=True)
    rule_id: Mapped[uuid.UUID] = mapped_column(Uuid)
    last_notified_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    reminders_sent: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
