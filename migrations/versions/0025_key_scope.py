"""API keys with a scope: "admin" (as every key so far) or "read", a key that reads the org
like a viewer, e.g. for a Prometheus scrape job.

Revision ID: 0025_key_scope
Revises: 0024_lateness
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0025_key_scope"
down_revision = "0024_lateness"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("api_keys", sa.Column("scope", sa.String(10), nullable=False,
                                        server_default="admin"))


def downgrade() -> None:
    op.drop_column("api_keys", "scope")
