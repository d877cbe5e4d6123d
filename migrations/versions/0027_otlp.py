"""OTLP/HTTP push of an org's measured distributions to its OpenTelemetry collector.

Revision ID: 0027_otlp
Revises: 0026_channels
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0027_otlp"
down_revision = "0026_channels"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "otlp_exports",
        sa.Column("org_id", sa.Uuid(), nullable=False),
        sa.Column("endpoint_url", sa.Text(), nullable=False),
        sa.Column("headers_ciphertext", sa.Text(), nullable=True),
        sa.Column("header_names", sa.ARRAY(sa.Text()), server_default=sa.text("'{}'::text[]"),
                  nullable=False),
        sa.Column("level", sa.String(10), server_default="region", nullable=False),
        sa.Column("kinds", sa.ARRAY(sa.Text()), nullable=False),
        sa.Column("interval_s", sa.Integer(), server_default=sa.text("60"), nullable=False),
        sa.Column("enabled", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column("last_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_success_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("failures_in_a_row", sa.Integer(), server_default=sa.text("0"),
                  nullable=False),
        sa.Column("last_data_points", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(),
                  nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(),
                  nullable=False),
        sa.CheckConstraint("level IN ('region', 'pair')", name=op.f("ck_otlp_exports_level")),
        sa.CheckConstraint("interval_s BETWEEN 10 AND 3600",
                           name=op.f("ck_otlp_exports_interval_s")),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE",
                                name=op.f("fk_otlp_exports_org_id_orgs")),
        sa.PrimaryKeyConstraint("org_id", name=op.f("pk_otlp_exports")),
    )


def downgrade() -> None:
    op.drop_table("otlp_exports")
