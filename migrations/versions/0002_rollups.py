"""Rollups (1 min / 1 h / 1 day) of mesh, quorum, storage and throughput series, with
the bookkeeping that lets the rollup tasks pick up late samples.

Revision ID: 0002_rollups
Revises: 0001_core
Create Date: 2026-11-22
"""

from alembic import op

revision = "0002_rollups"
down_revision = "0001_core"
branch_labels = None
depends_on = None

COMMON = """
    org_id uuid NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
    bucket_s integer NOT NULL CHECK (bucket_s IN (60, 3600, 86400)),
    bucket_start timestamptz NOT NULL,
    sample_count bigint NOT NULL,
    failure_count bigint NOT NULL,
    computed_at timestamptz NOT NULL DEFAULT now(),
"""


def _stats(prefix: str) -> str:
    return f"""
    {prefix}_count bigint NOT NULL,
    {prefix}_min double precision,
    {prefix}_max double precision,
    {prefix}_sum double precision NOT NULL,
    {prefix}_sum_sq double precision NOT NULL,
    {prefix}_sketch bytea NOT NULL,
    {prefix}_dtd_sketch bytea,
"""


# Hourly rows also carry a day-to-date sketch (the merge of their UTC day's hours up to and
# including theirs): any range of hours is then two or three sketches per series per day
# instead of one per hour, which is what keeps fleet-wide 24 h percentiles fast.
# Primary keys lead with (org, resolution, series) so one series' timeline is one index
# range; the (org, resolution, time) index serves fleet-wide queries such as heatmaps.
TABLES = {
    "mesh_rollups": (
        "src_agent_id uuid NOT NULL, dst_agent_id uuid NOT NULL, payload_bytes integer NOT NULL,"
        + _stats("rtt_us"),
        "org_id, bucket_s, src_agent_id, dst_agent_id, payload_bytes, bucket_start",
    ),
    "quorum_rollups": (
        "agent_id uuid NOT NULL, group_name varchar(100) NOT NULL, k smallint NOT NULL,"
        " n smallint NOT NULL," + _stats("latency_us"),
        "org_id, bucket_s, agent_id, group_name, k, n, bucket_start",
    ),
    "storage_rollups": (
        "agent_id uuid NOT NULL, target_id uuid NOT NULL, op varchar(20) NOT NULL,"
        " variant varchar(20) NOT NULL, content varchar(10) NOT NULL, size_bytes bigint NOT NULL,"
        " copies smallint NOT NULL, concurrency smallint NOT NULL,"
        + _stats("latency_us") + _stats("adj_latency_us"),
        ("org_id, bucket_s, target_id, op, variant, content, size_bytes, copies, concurrency,"
         " agent_id, bucket_start"),
    ),
    "throughput_rollups": (
        "src_agent_id uuid NOT NULL, dst_agent_id uuid NOT NULL, proto varchar(5) NOT NULL,"
        " direction varchar(10) NOT NULL," + _stats("bytes_per_s"),
        "org_id, bucket_s, src_agent_id, dst_agent_id, proto, direction, bucket_start",
    ),
}


PREFIXES = {"mesh_rollups": ["rtt_us"], "quorum_rollups": ["latency_us"],
            "storage_rollups": ["latency_us", "adj_latency_us"],
            "throughput_rollups": ["bytes_per_s"]}


def upgrade() -> None:
    for table, (cols, pk) in TABLES.items():
        op.execute(f"CREATE TABLE {table} ({COMMON} {cols} "
                   f"CONSTRAINT pk_{table} PRIMARY KEY ({pk}))")
        # Covering: fleet-wide moments (counts, sums, min, max) come from index-only scans.
        include = ", ".join([c for c in pk.replace(" ", "").split(",")
                             if c not in ("org_id", "bucket_s", "bucket_start")]
                            + ["sample_count", "failure_count"]
                            + [f"{p}_{s}" for p in PREFIXES[table]
                               for s in ("count", "min", "max", "sum", "sum_sq")])
        op.execute(f"CREATE INDEX ix_{table}_time ON {table} (org_id, bucket_s, bucket_start) "
                   f"INCLUDE ({include})")
        # Coarser buckets are re-rolled from finer rows recomputed since the last pass.
        op.execute(f"CREATE INDEX ix_{table}_computed ON {table} (bucket_s, computed_at)")
    op.execute("""
        CREATE TABLE rollup_dirty_minutes (
            kind varchar(20) NOT NULL,
            org_id uuid NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
            minute timestamptz NOT NULL,
            marked_at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT pk_rollup_dirty_minutes PRIMARY KEY (kind, org_id, minute)
        )""")
    op.execute("""
        CREATE TABLE rollup_watermarks (
            kind varchar(20) PRIMARY KEY,
            rolled_until timestamptz NOT NULL,
            updated_at timestamptz NOT NULL DEFAULT now()
        )""")


def downgrade() -> None:
    for t in ["rollup_watermarks", "rollup_dirty_minutes", *TABLES]:
        op.execute(f"DROP TABLE IF EXISTS {t}")
