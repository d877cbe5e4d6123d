"""Alert rules, their per-series running state, alerts (firing episodes) and alert events
(the transitions notifications tell), issue 11.

- alerts: a partial unique index allows one open ('firing') episode per (rule, group), so
  two evaluations racing on one transition cannot both open it.
- alert_events: unique (alert_id, kind): each transition is told once.
- alert_rules.eval_version: the evaluation cursor is advanced by compare-and-set.

Revision ID: 0010_alerts
Revises: 0009_rollup_levels
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0010_alerts"
down_revision = "0009_rollup_levels"
branch_labels = None
depends_on = None

UUID = pg.UUID(as_uuid=True)
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "alert_rules",
        sa.Column("id", UUID, nullable=False),
        sa.Column("org_id", UUID, nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("description", sa.Text(), nullable=False, server_default=""),
        sa.Column("severity", sa.String(10), nullable=False),
        sa.Column("labels", pg.JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("enabled", sa.Boolean(), nullable=False, server_default=sa.true()),
        sa.Column("metric", sa.String(30), nullable=False),
        sa.Column("statistic", sa.String(20), nullable=False),
        sa.Column("scope", pg.JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("window_s", sa.Integer(), nullable=False),
        sa.Column("condition", pg.JSONB(), nullable=False),
        sa.Column("x", sa.Integer(), nullable=False, server_default=sa.text("1")),
        sa.Column("y", sa.Integer(), nullable=False, server_default=sa.text("1")),
        sa.Column("n", sa.Integer(), nullable=False, server_default=sa.text("1")),
        sa.Column("m", sa.Integer(), nullable=True),
        sa.Column("channel_ids", pg.ARRAY(UUID), nullable=False,
                  server_default=sa.text("'{}'::uuid[]")),
        sa.Column("reminder_interval_s", sa.Integer(), nullable=True),
        sa.Column("created_by", UUID, nullable=True),
        sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
        sa.Column("updated_at", TS, nullable=False, server_default=sa.func.now()),
        sa.Column("evaluated_until", TS, nullable=True),
        sa.Column("eval_version", sa.Integer(), nullable=False, server_default=sa.text("0")),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE",
                                name="fk_alert_rules_org_id_orgs"),
        sa.ForeignKeyConstraint(["created_by"], ["users.id"], ondelete="SET NULL",
                                name="fk_alert_rules_created_by_users"),
        sa.PrimaryKeyConstraint("id", name="pk_alert_rules"),
        sa.CheckConstraint("severity IN ('critical', 'warning', 'info')",
                           name="ck_alert_rules_severity"),
        sa.CheckConstraint("window_s BETWEEN 30 AND 3600", name="ck_alert_rules_window_s"),
        sa.CheckConstraint("x >= 1 AND x <= y", name="ck_alert_rules_x_of_y"),
        sa.CheckConstraint("n >= 1 AND (m IS NULL OR n <= m)", name="ck_alert_rules_n_of_m"),
    )
    op.create_index("ix_alert_rules_org_id", "alert_rules", ["org_id"])
    op.create_table(
        "alert_series_state",
        sa.Column("rule_id", UUID, nullable=False),
        sa.Column("series_key", sa.String(400), nullable=False),
        sa.Column("org_id", UUID, nullable=False),
        sa.Column("state", sa.String(10), nullable=False),
        sa.Column("history", pg.ARRAY(sa.Boolean()), nullable=False),
        sa.Column("recent_values", pg.ARRAY(sa.Double()), nullable=False,
                  server_default=sa.text("'{}'::float8[]")),
        sa.Column("recent_thresholds", pg.ARRAY(sa.Double()), nullable=False,
                  server_default=sa.text("'{}'::float8[]")),
        sa.Column("last_value", sa.Double(), nullable=True),
        sa.Column("window_end", TS, nullable=True),
        sa.ForeignKeyConstraint(["rule_id"], ["alert_rules.id"], ondelete="CASCADE",
                                name="fk_alert_series_state_rule_id_alert_rules"),
        sa.PrimaryKeyConstraint("rule_id", "series_key", name="pk_alert_series_state"),
    )
    op.create_index("ix_alert_series_state_org_id", "alert_series_state", ["org_id"])
    op.create_table(
        "alerts",
        sa.Column("id", UUID, nullable=False),
        sa.Column("org_id", UUID, nullable=False),
        sa.Column("rule_id", UUID, nullable=False),
        sa.Column("group_key", sa.String(400), nullable=False),
        sa.Column("state", sa.String(10), nullable=False),
        sa.Column("started_at", TS, nullable=False),
        sa.Column("resolved_at", TS, nullable=True),
        sa.Column("evidence", pg.JSONB(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False, server_default=sa.text("1")),
        sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
        sa.Column("updated_at", TS, nullable=False, server_default=sa.func.now()),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE",
                                name="fk_alerts_org_id_orgs"),
        sa.ForeignKeyConstraint(["rule_id"], ["alert_rules.id"], ondelete="CASCADE",
                                name="fk_alerts_rule_id_alert_rules"),
        sa.PrimaryKeyConstraint("id", name="pk_alerts"),
        sa.CheckConstraint("state IN ('firing', 'resolved')", name="ck_alerts_state"),
    )
    op.create_index("ix_alerts_rule_id", "alerts", ["rule_id"])
    op.create_index("ix_alerts_org_started", "alerts", ["org_id", "started_at"])
    op.create_index("uq_alerts_open_group", "alerts", ["rule_id", "group_key"], unique=True,
                    postgresql_where=sa.text("state = 'firing'"))
    op.create_table(
        "alert_events",
        sa.Column("id", UUID, nullable=False),
        sa.Column("org_id", UUID, nullable=False),
        sa.Column("rule_id", UUID, nullable=False),
        sa.Column("alert_id", UUID, nullable=False),
        sa.Column("kind", sa.String(10), nullable=False),
        sa.Column("at", TS, nullable=False),
        sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
        sa.Column("evidence", pg.JSONB(), nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE",
                                name="fk_alert_events_org_id_orgs"),
        sa.ForeignKeyConstraint(["rule_id"], ["alert_rules.id"], ondelete="CASCADE",
                                name="fk_alert_events_rule_id_alert_rules"),
        sa.ForeignKeyConstraint(["alert_id"], ["alerts.id"], ondelete="CASCADE",
                                name="fk_alert_events_alert_id_alerts"),
        sa.PrimaryKeyConstraint("id", name="pk_alert_events"),
        sa.UniqueConstraint("alert_id", "kind", name="uq_alert_events_alert_kind"),
        sa.CheckConstraint("kind IN ('firing', 'resolved')", name="ck_alert_events_kind"),
    )
    op.create_index("ix_alert_events_org_id", "alert_events", ["org_id"])
    op.create_index("ix_alert_events_created", "alert_events", ["created_at"])


def downgrade() -> None:
    op.drop_table("alert_events")
    op.drop_table("alerts")
    op.drop_table("alert_series_state")
    op.drop_table("alert_rules")
