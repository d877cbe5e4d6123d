"""Account lifecycle: single-use links sent by mail (invitations, password resets), each
org's OpenID Connect provider, and sign-ins started at a provider awaiting their callback.

Revision ID: 0019_accounts
Revises: 0018_sessions
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import UUID as PG_UUID

revision = "0019_accounts"
down_revision = "0018_sessions"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)
UUID = PG_UUID(as_uuid=True)


def upgrade() -> None:
    op.create_table(
        "account_links",
        sa.Column("id", UUID, primary_key=True),
        sa.Column("purpose", sa.String(10), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("org_id", UUID, sa.ForeignKey("orgs.id", ondelete="CASCADE"), nullable=False,
                  index=True),
        sa.Column("email", sa.String(320), nullable=False),
        sa.Column("role", sa.String(20), nullable=False),
        sa.Column("user_id", UUID, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=True,
                  index=True),
        sa.Column("created_by", UUID, sa.ForeignKey("users.id", ondelete="SET NULL"),
                  nullable=True),
        sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
        sa.Column("expires_at", TS, nullable=False),
        sa.Column("used_at", TS, nullable=True),
        sa.Column("revoked_at", TS, nullable=True),
    )
    op.create_table(
        "oidc_configs",
        sa.Column("org_id", UUID, sa.ForeignKey("orgs.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("issuer_url", sa.String(500), nullable=False),
        sa.Column("client_id", sa.String(300), nullable=False),
        sa.Column("client_secret_enc", sa.Text(), nullable=False),
        sa.Column("default_role", sa.String(20), nullable=False),
        sa.Column("allowed_domains", JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
        sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
        sa.Column("updated_at", TS, nullable=False, server_default=sa.func.now()),
    )
    op.create_table(
        "oidc_logins",
        sa.Column("state_hash", sa.String(64), primary_key=True),
        sa.Column("org_id", UUID, sa.ForeignKey("orgs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("code_verifier", sa.String(200), nullable=False),
        sa.Column("nonce", sa.String(200), nullable=False),
        sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
        sa.Column("expires_at", TS, nullable=False, index=True),
    )


def downgrade() -> None:
    op.drop_table("oidc_logins")
    op.drop_table("oidc_configs")
    op.drop_table("account_links")
