"""Core schema: tenants, credentials, agents, raw sample tables.

Raw tables become TimescaleDB hypertables (compression + retention policies) when the
extension can be created, and natively range-partitioned tables (daily partitions,
retention by dropping partitions) otherwise. The choice is logged and kept in sw_meta.

Revision ID: 0001_core
Revises:
Create Date: 2026-11-22
"""

import logging

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0001_core"
down_revision = None
branch_labels = None
depends_on = None

log = logging.getLogger("alembic.stormwatch")

UUID = pg.UUID(as_uuid=True)
TS = sa.DateTime(timezone=True)

RAW_DDL = {
    "mesh_samples": """
        time timestamptz NOT NULL, org_id uuid NOT NULL,
        src_agent_id uuid NOT NULL, dst_agent_id uuid NOT NULL,
        round bigint NOT NULL, payload_bytes integer NOT NULL,
        rtt_us integer, status smallint NOT NULL
    """,
    "quorum_samples": """
        time timestamptz NOT NULL, org_id uuid NOT NULL, agent_id uuid NOT NULL,
        group_name varchar(100) NOT NULL, round bigint NOT NULL,
        k smallint NOT NULL, n smallint NOT NULL, latency_us integer, status smallint NOT NULL
    """,
    "storage_samples": """
        time timestamptz NOT NULL, org_id uuid NOT NULL, agent_id uuid NOT NULL,
        target_id uuid NOT NULL, op varchar(20) NOT NULL, variant varchar(20) NOT NULL,
        content varchar(10) NOT NULL, size_bytes bigint NOT NULL, stored_bytes bigint,
        copies smallint NOT NULL, concurrency smallint NOT NULL, attempt smallint NOT NULL,
        latency_us bigint, ttfb_us bigint, rtt_us bigint, bytes_per_s double precision,
        status smallint NOT NULL, error_class varchar(20)
    """,
    "throughput_samples": """
        time timestamptz NOT NULL, org_id uuid NOT NULL,
        src_agent_id uuid NOT NULL, dst_agent_id uuid NOT NULL,
        proto varchar(5) NOT NULL, experiment_id uuid NOT NULL, direction varchar(10) NOT NULL,
        bytes_per_s double precision NOT NULL, loss_ratio double precision, jitter_us bigint
    """,
}

RAW_INDEXES = {
    "mesh_samples": ["(org_id, src_agent_id, dst_agent_id, time DESC)", "(org_id, time DESC)"],
    "quorum_samples": ["(org_id, agent_id, group_name, time DESC)"],
    "storage_samples": ["(org_id, target_id, time DESC)", "(org_id, time DESC)"],
    "throughput_samples": ["(org_id, src_agent_id, dst_agent_id, time DESC)"],
}

# Daily partitions, created ahead by the worker and on demand by ingest; dropped whole
# once older than the longest raw retention of any org.
PARTITION_FUNCTIONS = """
CREATE OR REPLACE FUNCTION sw_ensure_partitions(parent text, from_ts timestamptz, to_ts timestamptz)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    day date := (from_ts AT TIME ZONE 'UTC')::date;
    last_day date := (to_ts AT TIME ZONE 'UTC')::date;
    part text;
    created integer := 0;
BEGIN
    IF (SELECT value FROM sw_meta WHERE key = 'storage_engine') = 'timescaledb' THEN
        RETURN 0;
    END IF;
    WHILE day <= last_day LOOP
        part := parent || '_p' || to_char(day, 'YYYYMMDD');
        IF to_regclass(part) IS NULL THEN
            -- Serialise creators of the same partition; losers find it already there.
            PERFORM pg_advisory_xact_lock(hashtext(part));
            IF to_regclass(part) IS NULL THEN
                EXECUTE format(
                    'CREATE TABLE IF NOT EXISTS %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                    part, parent,
                    (day::timestamp AT TIME ZONE 'UTC'),
                    ((day + 1)::timestamp AT TIME ZONE 'UTC'));
                created := created + 1;
            END IF;
        END IF;
        day := day + 1;
    END LOOP;
    RETURN created;
END $$;

CREATE OR REPLACE FUNCTION sw_drop_partitions_before(parent text, cutoff timestamptz)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    r record;
    dropped integer := 0;
    upper_bound timestamptz;
BEGIN
    FOR r IN
        SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) AS bound
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = parent::regclass
    LOOP
        upper_bound := substring(r.bound from 'TO \\(''([^'']+)''\\)')::timestamptz;
        IF upper_bound IS NOT NULL AND upper_bound <= cutoff THEN
            EXECUTE format('DROP TABLE %I', r.relname);
            dropped := dropped + 1;
        END IF;
    END LOOP;
    RETURN dropped;
END $$;
"""


def _timescale_available() -> bool:
    bind = op.get_bind()
    available = bind.execute(
        sa.text("SELECT count(*) FROM pg_available_extensions WHERE name = 'timescaledb'")
    ).scalar()
    if not available:
        return False
    # Without preloading, CREATE EXTENSION fails with FATAL and the server drops the
    # connection, which no savepoint can undo: check the setting instead of trying.
    preload = bind.execute(sa.text("SELECT current_setting('shared_preload_libraries')")).scalar()
    if "timescaledb" not in {lib.strip() for lib in (preload or "").split(",")}:
        log.warning("timescaledb is installed but not in shared_preload_libraries: "
                    "using native PostgreSQL partitions")
        return False
    try:
        with bind.begin_nested():
            bind.execute(sa.text("CREATE EXTENSION IF NOT EXISTS timescaledb"))
        return True
    except sa.exc.DBAPIError as exc:
        log.warning("timescaledb is installed but cannot be created (%s)", exc.orig)
        return False


def upgrade() -> None:
    op.create_table(
        "sw_meta",
        sa.Column("key", sa.String(100), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )
    op.create_table(
        "orgs",
        sa.Column("id", UUID, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("slug", sa.String(100), nullable=False, unique=True),
        sa.Column("raw_retention_days", sa.Integer, nullable=False, server_default="14"),
        sa.Column("rollup_retention_days", sa.Integer, nullable=False, server_default="400"),
        sa.Column("mesh_settings", pg.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
    )
    op.create_table(
        "users",
        sa.Column("id", UUID, primary_key=True),
        sa.Column("org_id", UUID, sa.ForeignKey("orgs.id", ondelete="CASCADE"), nullable=False,
                  index=True),
        sa.Column("email", sa.String(320), nullable=False, unique=True),
        sa.Column("password_hash", sa.String(200), nullable=False),
        sa.Column("role", sa.String(20), nullable=False, server_default="admin"),
        sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
    )
    op.create_table(
        "user_sessions",
        sa.Column("token_hash", sa.String(64), primary_key=True),
        sa.Column("user_id", UUID, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("org_id", UUID, sa.ForeignKey("orgs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("csrf_token", sa.String(64), nullable=False),
        sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
        sa.Column("expires_at", TS, nullable=False, index=True),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", UUID, primary_key=True),
        sa.Column("org_id", UUID, sa.ForeignKey("orgs.id", ondelete="CASCADE"), nullable=False,
                  index=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("prefix", sa.String(20), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_by", UUID, sa.ForeignKey("users.id", ondelete="SET NULL")),
        sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
        sa.Column("last_used_at", TS),
        sa.Column("revoked_at", TS),
    )
    op.create_table(
        "enrollment_tokens",
        sa.Column("id", UUID, primary_key=True),
        sa.Column("org_id", UUID, sa.ForeignKey("orgs.id", ondelete="CASCADE"), nullable=False,
                  index=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("prefix", sa.String(20), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
        sa.Column("expires_at", TS),
        sa.Column("revoked_at", TS),
    )
    op.create_table(
        "agents",
        sa.Column("id", UUID, primary_key=True),
        sa.Column("org_id", UUID, sa.ForeignKey("orgs.id", ondelete="CASCADE"), nullable=False,
                  index=True),
        sa.Column("name", sa.String(200), nullable=False),
        *[
            sa.Column(c, sa.String(n), nullable=False, server_default="")
            for c, n in [("provider", 50), ("region", 100), ("zone", 100), ("subnet", 200),
                         ("instance_type", 100), ("private_ip", 64), ("public_ip", 64),
                         ("mesh_address", 300), ("agent_version", 50)]
        ],
        sa.Column("token_prefix", sa.String(20), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("enrolled_with", UUID,
                  sa.ForeignKey("enrollment_tokens.id", ondelete="SET NULL")),
        sa.Column("first_seen", TS, nullable=False, server_default=sa.func.now()),
        sa.Column("last_seen", TS),
        sa.UniqueConstraint("org_id", "name", name="uq_agents_org_id"),
    )
    op.create_table(
        "agent_pairs",
        sa.Column("org_id", UUID, sa.ForeignKey("orgs.id", ondelete="CASCADE"), nullable=False,
                  index=True),
        sa.Column("src_agent_id", UUID, sa.ForeignKey("agents.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("dst_agent_id", UUID, sa.ForeignKey("agents.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("topology_class", sa.String(20), nullable=False),
    )
    op.create_table(
        "ingest_batches",
        sa.Column("agent_id", UUID, sa.ForeignKey("agents.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("batch_id", UUID, primary_key=True),
        sa.Column("org_id", UUID, nullable=False, index=True),
        sa.Column("received_at", TS, nullable=False, server_default=sa.func.now()),
        sa.Column("mesh_rows", sa.Integer, nullable=False),
        sa.Column("quorum_rows", sa.Integer, nullable=False),
        sa.Column("storage_rows", sa.Integer, nullable=False),
        sa.Column("throughput_rows", sa.Integer, nullable=False),
    )

    timescale = _timescale_available()
    engine = "timescaledb" if timescale else "postgres"
    op.execute(sa.text("INSERT INTO sw_meta (key, value) VALUES ('storage_engine', :v)")
               .bindparams(v=engine))
    log.info("raw sample storage: %s", "TimescaleDB hypertables" if timescale
             else "native PostgreSQL daily partitions (TimescaleDB not available)")

    op.execute(PARTITION_FUNCTIONS)
    for table, cols in RAW_DDL.items():
        if timescale:
            op.execute(f"CREATE TABLE {table} ({cols})")
            op.execute(f"SELECT create_hypertable('{table}', 'time', "
                       "chunk_time_interval => interval '1 day')")
            op.execute(f"ALTER TABLE {table} SET (timescaledb.compress, "
                       "timescaledb.compress_segmentby = 'org_id')")
            op.execute(f"SELECT add_compression_policy('{table}', interval '2 days')")
            op.execute(f"SELECT add_retention_policy('{table}', interval '14 days')")
        else:
            op.execute(f"CREATE TABLE {table} ({cols}) PARTITION BY RANGE (time)")
            op.execute(f"SELECT sw_ensure_partitions('{table}', now() - interval '15 days', "
                       "now() + interval '2 days')")
        for i, idx in enumerate(RAW_INDEXES[table]):
            op.execute(f"CREATE INDEX ix_{table}_{i} ON {table} {idx}")


def downgrade() -> None:
    for table in RAW_DDL:
        op.execute(f"DROP TABLE IF EXISTS {table} CASCADE")
    op.execute("DROP FUNCTION IF EXISTS sw_ensure_partitions(text, timestamptz, timestamptz)")
    op.execute("DROP FUNCTION IF EXISTS sw_drop_partitions_before(text, timestamptz)")
    for t in ["ingest_batches", "agent_pairs", "agents", "enrollment_tokens", "api_keys",
              "user_sessions", "users", "orgs", "sw_meta"]:
        op.drop_table(t)
