"""Advisors: an org's own prices over the shipped catalog, and cached advisor answers.

The shipped catalog is code (services/advisors/catalog.py), dated and sourced per figure;
only an org's overrides are rows, so a new catalog never touches them.

Revision ID: 0008_advisors
Revises: 0007_rollup_claims
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0008_advisors"
down_revision = "0007_rollup_claims"
branch_labels = None
depends_on = None

UUID = pg.UUID(as_uuid=True)
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "pricing_overrides",
        sa.Column("org_id", UUID, nullable=False),
        sa.Column("provider", sa.String(50), nullable=False),
        sa.Column("region", sa.String(100), nullable=False),
        sa.Column("item", sa.String(50), nullable=False),
        sa.Column("price_usd", sa.Float(), nullable=False),
        sa.Column("effective_date", sa.Date(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("updated_at", TS, nullable=False, server_default=sa.func.now()),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE",
                                name="fk_pricing_overrides_org_id_orgs"),
        sa.PrimaryKeyConstraint("org_id", "provider", "region", "item",
                                name="pk_pricing_overrides"),
        sa.CheckConstraint("price_usd >= 0", name="ck_pricing_overrides_price_usd"),
    )
    op.create_table(
        "advisor_results",
        sa.Column("org_id", UUID, nullable=False),
        sa.Column("advisor", sa.String(30), nullable=False),
        sa.Column("input_hash", sa.String(64), nullable=False),
        sa.Column("inputs", pg.JSONB(), nullable=False),
        sa.Column("status", sa.String(10), nullable=False),
        sa.Column("result", pg.JSONB(), nullable=True),
        sa.Column("error", pg.JSONB(), nullable=True),
        sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
        sa.Column("computed_at", TS, nullable=True),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE",
                                name="fk_advisor_results_org_id_orgs"),
        sa.PrimaryKeyConstraint("org_id", "advisor", "input_hash", name="pk_advisor_results"),
        sa.CheckConstraint("status IN ('pending', 'done', 'failed')",
                           name="ck_advisor_results_status"),
    )
    # Old answers are purged by age (worker); this keeps that delete an index range scan.
    op.create_index("ix_advisor_results_created_at", "advisor_results", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_advisor_results_created_at", table_name="advisor_results")
    op.drop_table("advisor_results")
    op.drop_table("pricing_overrides")
