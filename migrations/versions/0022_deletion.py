"""Deleted agents, remembered per org: peers' samples about them are set aside instead of
refusing the batch, their token is answered 410 Gone, and analyses still name them.

Revision ID: 0022_deletion
Revises: 0021_audit
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0022_deletion"
down_revision = "0021_audit"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "deleted_agents",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("org_id", sa.Uuid(), sa.ForeignKey("orgs.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("provider", sa.String(50), nullable=False, server_default=""),
        sa.Column("region", sa.String(100), nullable=False, server_default=""),
        sa.Column("zone", sa.String(100), nullable=False, server_default=""),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_deleted_agents_org_id", "deleted_agents", ["org_id"])
    op.create_index("ix_deleted_agents_token_hash", "deleted_agents", ["token_hash"])


def downgrade() -> None:
    op.drop_table("deleted_agents")
