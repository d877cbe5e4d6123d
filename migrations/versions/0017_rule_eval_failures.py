"""Per-rule evaluation failures: a rule whose evaluation fails is skipped (the others go on),
counted here and named by health from any process once it fails three cycles in a row.

Revision ID: 0017_rule_eval_failures
Revises: 0016_job_runs
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0017_rule_eval_failures"
down_revision = "0016_job_runs"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("alert_rules", sa.Column("eval_failures_in_a_row", sa.Integer(),
                                           nullable=False, server_default="0"))
    op.add_column("alert_rules", sa.Column("eval_last_error", sa.Text(), nullable=True))
    op.add_column("alert_rules", sa.Column("eval_last_failure", sa.DateTime(timezone=True),
                                           nullable=True))


def downgrade() -> None:
    op.drop_column("alert_rules", "eval_last_failure")
    op.drop_column("alert_rules", "eval_last_error")
    op.drop_column("alert_rules", "eval_failures_in_a_row")
