"""Path traces from the agents, and each pair's paths over time.

Revision ID: 0029_paths
Revises: 0028_places
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0029_paths"
down_revision = "0028_places"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pair_paths",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("src_agent_id", sa.Uuid(), nullable=False),
        sa.Column("dst_agent_id", sa.Uuid(), nullable=False),
        sa.Column("first_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("traces", sa.Integer(), nullable=False),
        sa.Column("reached", sa.Boolean(), nullable=False),
        sa.Column("hops", postgresql.JSONB(), nullable=False),
        sa.Column("prev_path_id", sa.Uuid(), nullable=True),
        sa.Column("diff_ttl", sa.Integer(), nullable=True),
        sa.Column("added_rtt_us", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE",
                                name=op.f("fk_pair_paths_org_id_orgs")),
        sa.ForeignKeyConstraint(["prev_path_id"], ["pair_paths.id"], ondelete="SET NULL",
                                name=op.f("fk_pair_paths_prev_path_id_pair_paths")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pair_paths")),
    )
    op.create_index("ix_pair_paths_pair_first_seen", "pair_paths",
                    ["org_id", "src_agent_id", "dst_agent_id", "first_seen"])
    op.create_table(
        "path_traces",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("src_agent_id", sa.Uuid(), nullable=False),
        sa.Column("dst_agent_id", sa.Uuid(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("proto", sa.String(8), nullable=False),
        sa.Column("trigger", sa.String(16), nullable=False),
        sa.Column("dst_address", sa.String(64), nullable=False),
        sa.Column("reached", sa.Boolean(), nullable=False),
        sa.Column("elapsed_ms", sa.Integer(), nullable=False),
        sa.Column("hops", postgresql.JSONB(), nullable=False),
        sa.Column("path_id", sa.Uuid(), nullable=True),
        sa.Column("received_at", sa.DateTime(timezone=True), server_default=sa.func.now(),
                  nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE",
                                name=op.f("fk_path_traces_org_id_orgs")),
        sa.ForeignKeyConstraint(["path_id"], ["pair_paths.id"], ondelete="SET NULL",
                                name=op.f("fk_path_traces_path_id_pair_paths")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_path_traces")),
    )
    op.create_index("ix_path_traces_pair_started", "path_traces",
                    ["org_id", "src_agent_id", "dst_agent_id", "started_at"])


def downgrade() -> None:
    op.drop_table("path_traces")
    op.drop_table("pair_paths")
