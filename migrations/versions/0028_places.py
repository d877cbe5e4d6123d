"""An org's own places (region -> metro and coordinates), beside the region catalog.

Revision ID: 0028_places
Revises: 0027_otlp
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0028_places"
down_revision = "0027_otlp"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "org_places",
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("provider", sa.String(50), nullable=False),
        sa.Column("region", sa.String(100), nullable=False),
        sa.Column("location", sa.Text(), nullable=False),
        sa.Column("metro", sa.String(64), nullable=False),
        sa.Column("lat", sa.Float(), nullable=False),
        sa.Column("lon", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(),
                  nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(),
                  nullable=False),
        sa.CheckConstraint("lat BETWEEN -90 AND 90", name=op.f("ck_org_places_lat")),
        sa.CheckConstraint("lon BETWEEN -180 AND 180", name=op.f("ck_org_places_lon")),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE",
                                name=op.f("fk_org_places_org_id_orgs")),
        sa.PrimaryKeyConstraint("org_id", "provider", "region", name=op.f("pk_org_places")),
    )


def downgrade() -> None:
    op.drop_table("org_places")
