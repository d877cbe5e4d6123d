"""Throughput experiments (issue 13): per-org settings, the experiments, the budget ledger,
and the agents' throughput control address.

Experiments are unique per (org, initiator, responder, proto, start_at): the scheduler's
slots are deterministic, so a second run of it inserts nothing. `results` holds an
experiment's per-direction statistics and transitions once the worker analysed it, so
analyses over long ranges read one row per experiment and outlive raw retention.

Revision ID: 0013_throughput
Revises: 0012_compressed_raw
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0013_throughput"
down_revision = "0012_compressed_raw"
branch_labels = None
depends_on = None

UUID = pg.UUID(as_uuid=True)
TS = sa.DateTime(timezone=True)


def _org(primary_key: bool = False) -> sa.Column:
    return sa.Column("org_id", UUID, sa.ForeignKey("orgs.id", ondelete="CASCADE"),
                     nullable=False, primary_key=primary_key)


def upgrade() -> None:
    op.add_column("agents", sa.Column("throughput_address", sa.String(300), nullable=False,
                                      server_default=""))
    op.create_table(
        "throughput_settings",
        _org(primary_key=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("monthly_budget_bytes", sa.BigInteger(), nullable=False),
        sa.Column("monthly_budget_usd", sa.Float(), nullable=True),
        sa.Column("price_per_gb_usd", sa.Float(), nullable=True),
        sa.Column("default_duration_s", sa.Integer(), nullable=False),
        sa.Column("default_proto", sa.String(5), nullable=False),
        sa.Column("streams", sa.Integer(), nullable=False),
        sa.Column("udp_rate_bits_per_s", sa.BigInteger(), nullable=False),
        sa.Column("udp_datagram_bytes", sa.Integer(), nullable=False),
        sa.Column("experiments_per_pair_per_day", sa.Integer(), nullable=False),
        sa.Column("pairs", pg.JSONB(), nullable=True),
        sa.Column("updated_at", TS, nullable=False, server_default=sa.func.now()),
    )
    op.create_table(
        "throughput_experiments",
        sa.Column("id", UUID, primary_key=True),
        _org(),
        sa.Column("initiator_agent_id", UUID,
                  sa.ForeignKey("agents.id", ondelete="CASCADE"), nullable=False),
        sa.Column("responder_agent_id", UUID,
                  sa.ForeignKey("agents.id", ondelete="CASCADE"), nullable=False),
        sa.Column("proto", sa.String(5), nullable=False),
        sa.Column("start_at", TS, nullable=False),
        sa.Column("duration_s", sa.Integer(), nullable=False),
        sa.Column("streams", sa.Integer(), nullable=False),
        sa.Column("udp_rate_bits_per_s", sa.BigInteger(), nullable=False),
        sa.Column("udp_datagram_bytes", sa.Integer(), nullable=False),
        sa.Column("token", sa.String(64), nullable=False),
        sa.Column("est_bytes", sa.BigInteger(), nullable=False),
        sa.Column("est_cost_usd", sa.Float(), nullable=False),
        sa.Column("origin", sa.String(10), nullable=False),
        sa.Column("results", pg.JSONB(), nullable=True),
        sa.Column("analyzed_at", TS, nullable=True),
        sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
        sa.UniqueConstraint("org_id", "initiator_agent_id", "responder_agent_id", "proto",
                            "start_at", name="uq_throughput_experiments_slot"),
        sa.CheckConstraint("proto IN ('tcp', 'udp')", name="ck_throughput_experiments_proto"),
        sa.CheckConstraint("duration_s > 0", name="ck_throughput_experiments_duration_s"),
    )
    op.create_index("ix_throughput_experiments_time", "throughput_experiments",
                    ["org_id", "start_at"])
    op.create_index("ix_throughput_experiments_initiator_agent_id", "throughput_experiments",
                    ["initiator_agent_id"])
    op.create_index("ix_throughput_experiments_responder_agent_id", "throughput_experiments",
                    ["responder_agent_id"])
    op.create_table(
        "throughput_budget_ledger",
        _org(primary_key=True),
        sa.Column("month", sa.Date(), primary_key=True),
        sa.Column("refused", pg.JSONB(), nullable=False),
        sa.Column("updated_at", TS, nullable=False, server_default=sa.func.now()),
    )


def downgrade() -> None:
    op.drop_table("throughput_budget_ledger")
    op.drop_table("throughput_experiments")
    op.drop_table("throughput_settings")
    op.drop_column("agents", "throughput_address")
