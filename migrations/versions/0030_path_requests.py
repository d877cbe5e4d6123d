"""Traces the server asks agents for (a firing alert on a pair, a person's request): served
through the config poll, at most one pending per pair.

Revision ID: 0030_path_requests
Revises: 0029_paths
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0030_path_requests"
down_revision = "0029_paths"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "path_trace_requests",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("src_agent_id", sa.Uuid(), nullable=False),
        sa.Column("dst_agent_id", sa.Uuid(), nullable=False),
        sa.Column("trigger", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("alert_event_id", sa.Uuid(), nullable=True),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("served_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("trace_id", sa.Uuid(), nullable=True),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE",
                                name=op.f("fk_path_trace_requests_org_id_orgs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_path_trace_requests")),
    )
    op.create_index("uq_path_trace_requests_pending", "path_trace_requests",
                    ["org_id", "src_agent_id", "dst_agent_id"], unique=True,
                    postgresql_where=sa.text("served_at IS NULL"))
    op.create_index("ix_path_trace_requests_src", "path_trace_requests",
                    ["src_agent_id", "served_at"])


def downgrade() -> None:
    op.drop_table("path_trace_requests")
