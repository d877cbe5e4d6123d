"""More channel kinds: the kind column takes longer names and the check lists every kind of
the channel registry (notifications/registry.py).

Revision ID: 0026_channels
Revises: 0025_key_scope
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0026_channels"
down_revision = "0025_key_scope"
branch_labels = None
depends_on = None

OLD = ("email", "slack", "webhook")
NEW = (*OLD, "pagerduty", "opsgenie", "discord", "teams", "alertmanager")


def _check(kinds: tuple[str, ...]) -> None:
    op.drop_constraint("ck_notification_channels_kind", "notification_channels", type_="check")
    op.create_check_constraint("ck_notification_channels_kind", "notification_channels",
                               "kind IN ({})".format(", ".join(f"'{k}'" for k in kinds)))


def upgrade() -> None:
    op.alter_column("notification_channels", "kind", type_=sa.String(20),
                    existing_type=sa.String(10), existing_nullable=False)
    _check(NEW)


def downgrade() -> None:
    # Channels of the new kinds cannot be kept under the old check.
    op.execute("DELETE FROM notification_channels WHERE kind NOT IN ('email', 'slack', "
               "'webhook')")
    _check(OLD)
    op.alter_column("notification_channels", "kind", type_=sa.String(10),
                    existing_type=sa.String(20), existing_nullable=False)
