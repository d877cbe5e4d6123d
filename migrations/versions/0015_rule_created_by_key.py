"""Alert rules record the API key that created them (created_by names only users).

Revision ID: 0015_rule_created_by_key
Revises: 0014_compact_mesh_rows
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0015_rule_created_by_key"
down_revision = "0014_compact_mesh_rows"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A deleted key leaves the rule and forgets the key, as a deleted user does.
    op.add_column("alert_rules", sa.Column("created_by_key_id", sa.Uuid(), nullable=True))
    op.create_foreign_key("fk_alert_rules_created_by_key_id_api_keys", "alert_rules",
                          "api_keys", ["created_by_key_id"], ["id"], ondelete="SET NULL")


def downgrade() -> None:
    op.drop_constraint("fk_alert_rules_created_by_key_id_api_keys", "alert_rules",
                       type_="foreignkey")
    op.drop_column("alert_rules", "created_by_key_id")
