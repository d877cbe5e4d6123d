"""Notification channels, silences, maintenance windows, and the delivery outbox (issue 11).

- notification_deliveries: unique (notification_id, channel_id), one outbox row per message
  and channel; claimed by compare-and-set on state/claim_token with a lease, so a re-run or
  a second worker never sends one row twice, and a row whose lease expired is resumed.
- alert_event_dispatches: primary key event_id, so an alert event is handled exactly once.
- alert_notify_state: per alert, when it was last told (reminders) and that its firing was.

Revision ID: 0011_notifications
Revises: 0010_alerts
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0011_notifications"
down_revision = "0010_alerts"
branch_labels = None
depends_on = None

UUID = pg.UUID(as_uuid=True)
TS = sa.DateTime(timezone=True)
UUIDS = pg.ARRAY(UUID)


def _org() -> sa.Column:
    return sa.Column("org_id", UUID, sa.ForeignKey("orgs.id", ondelete="CASCADE"),
                     nullable=False)


def upgrade() -> None:
    op.create_table(
        "notification_channels",
        sa.Column("id", UUID, primary_key=True),
        _org(),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(10), nullable=False),
        sa.Column("config", pg.JSONB, nullable=False),
        sa.Column("secret_ciphertext", sa.Text),
        sa.Column("enabled", sa.Boolean, nullable=False, server_default=sa.text("true")),
        sa.Column("created_by", UUID),
        sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
        sa.Column("updated_at", TS, nullable=False, server_default=sa.func.now()),
        sa.UniqueConstraint("org_id", "name"),
        sa.CheckConstraint("kind IN ('email', 'slack', 'webhook')",
                           name="ck_notification_channels_kind"),
    )
    op.create_index("ix_notification_channels_org_id", "notification_channels", ["org_id"])

    op.create_table(
        "silences",
        sa.Column("id", UUID, primary_key=True),
        _org(),
        sa.Column("rule_ids", UUIDS, nullable=False, server_default=sa.text("'{}'::uuid[]")),
        sa.Column("matchers", pg.JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
        sa.Column("starts_at", TS, nullable=False),
        sa.Column("ends_at", TS, nullable=False),
        sa.Column("comment", sa.Text, nullable=False, server_default=""),
        sa.Column("created_by", sa.String(320), nullable=False),
        sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
        sa.CheckConstraint("ends_at > starts_at",
                           name="ck_silences_range"),
    )
    op.create_index("ix_silences_org_ends", "silences", ["org_id", "ends_at"])

    op.create_table(
        "maintenance_windows",
        sa.Column("id", UUID, primary_key=True),
        _org(),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("starts_at", TS, nullable=False),
        sa.Column("duration_s", sa.Integer, nullable=False),
        sa.Column("rrule", sa.Text),
        sa.Column("rule_ids", UUIDS, nullable=False, server_default=sa.text("'{}'::uuid[]")),
        sa.Column("matchers", pg.JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
        sa.Column("comment", sa.Text, nullable=False, server_default=""),
        sa.Column("created_by", sa.String(320), nullable=False),
        sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
        sa.Column("updated_at", TS, nullable=False, server_default=sa.func.now()),
        sa.CheckConstraint("duration_s > 0",
                           name="ck_maintenance_windows_duration_s"),
    )
    op.create_index("ix_maintenance_windows_org_id", "maintenance_windows", ["org_id"])

    op.create_table(
        "notifications",
        sa.Column("id", UUID, primary_key=True),
        _org(),
        sa.Column("rule_id", UUID, sa.ForeignKey("alert_rules.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("kind", sa.String(10), nullable=False),
        sa.Column("alert_ids", UUIDS, nullable=False),
        sa.Column("event_ids", UUIDS, nullable=False, server_default=sa.text("'{}'::uuid[]")),
        sa.Column("message", pg.JSONB, nullable=False),
        sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
        sa.CheckConstraint("kind IN ('firing', 'resolved', 'reminder')",
                           name="ck_notifications_kind"),
    )
    op.create_index("ix_notifications_org_created", "notifications", ["org_id", "created_at"])
    op.create_index("ix_notifications_rule_id", "notifications", ["rule_id"])
    op.create_index("ix_notifications_alert_ids", "notifications", ["alert_ids"],
                    postgresql_using="gin")

    op.create_table(
        "notification_deliveries",
        sa.Column("id", UUID, primary_key=True),
        _org(),
        sa.Column("notification_id", UUID,
                  sa.ForeignKey("notifications.id", ondelete="CASCADE"), nullable=False),
        sa.Column("channel_id", UUID,
                  sa.ForeignKey("notification_channels.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("state", sa.String(10), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("next_attempt_at", TS, nullable=False),
        sa.Column("claim_token", UUID),
        sa.Column("lease_expires_at", TS),
        sa.Column("last_error", sa.Text),
        sa.Column("response", sa.Text),
        sa.Column("sent_at", TS),
        sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
        sa.UniqueConstraint("notification_id", "channel_id"),
        sa.CheckConstraint("state IN ('pending', 'sending', 'sent', 'failed')",
                           name="ck_notification_deliveries_state"),
    )
    op.create_index("ix_notification_deliveries_org_id", "notification_deliveries", ["org_id"])
    op.create_index("ix_notification_deliveries_due", "notification_deliveries",
                    ["next_attempt_at"],
                    postgresql_where=sa.text("state IN ('pending', 'sending')"))
    op.create_index("ix_notification_deliveries_channel", "notification_deliveries",
                    ["channel_id", "created_at"])

    op.create_table(
        "alert_event_dispatches",
        sa.Column("event_id", UUID, sa.ForeignKey("alert_events.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("org_id", UUID, nullable=False),
        sa.Column("outcome", sa.String(12), nullable=False),
        sa.Column("notification_id", UUID,
                  sa.ForeignKey("notifications.id", ondelete="SET NULL")),
        sa.Column("suppressed_by", UUID),
        sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
        sa.CheckConstraint("outcome IN ('notified', 'silenced', 'maintenance', 'no_channels', "
                           "'not_notified')", name="ck_alert_event_dispatches_outcome"),
    )
    op.create_index("ix_alert_event_dispatches_org_id", "alert_event_dispatches", ["org_id"])

    op.create_table(
        "alert_notify_state",
        sa.Column("alert_id", UUID, sa.ForeignKey("alerts.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("org_id", UUID, nullable=False),
        sa.Column("rule_id", UUID, nullable=False),
        sa.Column("last_notified_at", TS, nullable=False),
        sa.Column("reminders_sent", sa.Integer, nullable=False, server_default=sa.text("0")),
    )
    op.create_index("ix_alert_notify_state_org_id", "alert_notify_state", ["org_id"])


def downgrade() -> None:
    for table in ("alert_notify_state", "alert_event_dispatches", "notification_deliveries",
                  "notifications", "maintenance_windows", "silences", "notification_channels"):
        op.drop_table(table)
