"""Storage targets per org and their assignment to agents (issue 4, seed 000 §3).

Revision ID: 0003_storage_targets
Revises: 0002_rollups
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0003_storage_targets"
down_revision = "0002_rollups"
branch_labels = None
depends_on = None

UUID = pg.UUID(as_uuid=True)
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "storage_targets",
        sa.Column("id", UUID, nullable=False),
        sa.Column("org_id", UUID, nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("provider", sa.String(10), nullable=False),
        sa.Column("endpoint", sa.String(500), nullable=False, server_default=""),
        sa.Column("region", sa.String(100), nullable=False, server_default=""),
        sa.Column("bucket", sa.String(255), nullable=False),
        sa.Column("prefix", sa.String(500), nullable=False, server_default="stormwatch-probe/"),
        sa.Column("path_style", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("interval_s", sa.Integer(), nullable=False, server_default=sa.text("600")),
        sa.Column("op_timeout_ms", sa.Integer(), nullable=False,
                  server_default=sa.text("120000")),
        sa.Column("contents", pg.JSONB(), nullable=False),
        sa.Column("sizes_bytes", pg.JSONB(), nullable=False),
        sa.Column("variants", pg.JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("credentials_source", sa.String(10), nullable=False),
        sa.Column("credentials_ref", pg.JSONB(), nullable=False,
                  server_default=sa.text("'{}'::jsonb")),
        sa.Column("credentials_ciphertext", sa.Text(), nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False, server_default=sa.true()),
        sa.Column("assign_all", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
        sa.Column("updated_at", TS, nullable=False, server_default=sa.func.now()),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE",
                                name="fk_storage_targets_org_id_orgs"),
        sa.PrimaryKeyConstraint("id", name="pk_storage_targets"),
        sa.UniqueConstraint("org_id", "name", name="uq_storage_targets_org_id"),
        sa.CheckConstraint("provider IN ('s3', 'azure', 'gcs')",
                           name="ck_storage_targets_provider"),
        sa.CheckConstraint("credentials_source IN ('env', 'file', 'inline', 'none')",
                           name="ck_storage_targets_credentials_source"),
        sa.CheckConstraint("interval_s BETWEEN 10 AND 86400",
                           name="ck_storage_targets_interval_s"),
    )
    op.create_index("ix_storage_targets_org_id", "storage_targets", ["org_id"])
    op.create_table(
        "storage_target_agents",
        sa.Column("target_id", UUID, nullable=False),
        sa.Column("agent_id", UUID, nullable=False),
        sa.ForeignKeyConstraint(["target_id"], ["storage_targets.id"], ondelete="CASCADE",
                                name="fk_storage_target_agents_target_id_storage_targets"),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], ondelete="CASCADE",
                                name="fk_storage_target_agents_agent_id_agents"),
        sa.PrimaryKeyConstraint("target_id", "agent_id", name="pk_storage_target_agents"),
    )
    op.create_index("ix_storage_target_agents_agent_id", "storage_target_agents", ["agent_id"])


def downgrade() -> None:
    op.drop_index("ix_storage_target_agents_agent_id", table_name="storage_target_agents")
    op.drop_table("storage_target_agents")
    op.drop_index("ix_storage_targets_org_id", table_name="storage_targets")
    op.drop_table("storage_targets")
