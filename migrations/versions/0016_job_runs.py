"""Job runs: each periodic job's last start, success and failure (with its reason) and its
failures in a row, so health can say which job is failing and why, from any process.

Revision ID: 0016_job_runs
Revises: 0015_rule_created_by_key
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0016_job_runs"
down_revision = "0015_rule_created_by_key"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "job_runs",
        sa.Column("job", sa.String(200), primary_key=True),
        sa.Column("cadence_s", sa.Integer(), nullable=False),
        sa.Column("first_start", TS, nullable=False),
        sa.Column("last_start", TS, nullable=False),
        sa.Column("last_success", TS, nullable=True),
        sa.Column("last_failure", TS, nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("failures_in_a_row", sa.Integer(), nullable=False, server_default="0"),
    )


def downgrade() -> None:
    op.drop_table("job_runs")
