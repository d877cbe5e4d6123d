"""Each accepted batch records the time of its oldest sample, so how late samples arrive
(received_at against it) is known: the soak's alert model excludes the windows whose samples
arrived after they were judged, and an operator can see which agents ship late.

Revision ID: 0024_lateness
Revises: 0023_split
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0024_lateness"
down_revision = "0023_split"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("ingest_batches",
                  sa.Column("oldest_sample_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("ingest_batches", "oldest_sample_at")
