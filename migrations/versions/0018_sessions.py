"""Session idle timeout: when each session was last used.

Revision ID: 0018_sessions
Revises: 0017_rule_eval_failures
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0018_sessions"
down_revision = "0017_rule_eval_failures"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("user_sessions", sa.Column("last_seen_at", sa.DateTime(timezone=True),
                                             nullable=False, server_default=sa.func.now()))
    # Password changes and removals end every session of a user at once.
    op.create_index("ix_user_sessions_user_id", "user_sessions", ["user_id"])


def downgrade() -> None:
    op.drop_index("ix_user_sessions_user_id", table_name="user_sessions")
    op.drop_column("user_sessions", "last_seen_at")
