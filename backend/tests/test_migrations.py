"""The plain-PostgreSQL path: native daily partitions, created on demand, dropped by age."""

import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import text

from stormwatch.services import maintenance


def test_plain_postgres_uses_native_partitions_and_logs_the_choice(db):
    with db.connect() as c:
        assert maintenance.storage_engine(c) == "postgres"
        kinds = dict(c.execute(text(
            "SELECT relname, relkind FROM pg_class WHERE relname IN "
            "('mesh_samples','quorum_samples','storage_samples','throughput_samples')")).all())
    assert set(kinds.values()) == {"p"}  # partitioned tables


def test_partitions_are_created_ahead_and_old_ones_dropped(db):
    with db.begin() as c:
        # Older than any org may keep raw samples, whatever other tests set.
        c.execute(text("SELECT sw_ensure_partitions('mesh_samples', now() - interval '100 days', "
                       "now() - interval '99 days')"))
        old_day = (datetime.now(UTC) - timedelta(days=100)).strftime("%Y%m%d")
        assert c.execute(text("SELECT to_regclass(:n)"),
                         {"n": f"mesh_samples_p{old_day}"}).scalar() is not None
        maintenance.ensure_partitions(c, days_ahead=5)
        ahead = (datetime.now(UTC) + timedelta(days=5)).strftime("%Y%m%d")
        assert c.execute(text("SELECT to_regclass(:n)"),
                         {"n": f"quorum_samples_p{ahead}"}).scalar() is not None
        removed = maintenance.enforce_raw_retention(c)
        assert removed["mesh_samples"] >= 2
        assert c.execute(text("SELECT to_regclass(:n)"),
                         {"n": f"mesh_samples_p{old_day}"}).scalar() is None
        today = datetime.now(UTC).strftime("%Y%m%d")
        assert c.execute(text("SELECT to_regclass(:n)"),
                         {"n": f"mesh_samples_p{today}"}).scalar() is not None


def test_migrating_a_fresh_database_logs_the_storage_choice(services):
    import os
    import subprocess
    import sys
    import uuid as uuidlib
    from pathlib import Path

    import psycopg

    name = f"fresh_{uuidlib.uuid4().hex[:8]}"
    with psycopg.connect(f"host=127.0.0.1 port={services.pg.port} user=stormwatch "
                         "dbname=postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = services.database_url.rsplit("/", 1)[0] + f"/{name}"
    repo = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-m", "alembic", "-c", str(repo / "migrations" / "alembic.ini"),
         "upgrade", "heads"], env={**os.environ, "DATABASE_URL": url}, cwd=repo,
        capture_output=True, text=True, check=True)
    assert "native PostgreSQL daily partitions (TimescaleDB not available)" in out.stderr


def test_the_timescaledb_retention_backstop_keeps_what_an_org_may_keep():
    """TimescaleDB is not installed here; the policy's interval is checked against the
    longest raw retention the settings API accepts (and the retention task's bound)."""
    import importlib.util
    from pathlib import Path

    from stormwatch.schemas.accounts import OrgUpdate

    path = (Path(__file__).resolve().parents[2] / "migrations" / "versions"
            / "0004_raw_retention_backstop.py")
    spec = importlib.util.spec_from_file_location("backstop", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    bound = next(m.le for m in OrgUpdate.model_fields["raw_retention_days"].metadata
                 if hasattr(m, "le"))
    assert module.BACKSTOP_DAYS == maintenance.MAX_RAW_RETENTION_DAYS == bound


def test_minute_rollups_of_a_series_are_read_through_its_covering_index(db):
    """The analytics queries split minute rows at the sketch length the partial covering
    index of migration 0005 holds; a pair's range is then an index-only scan."""
    from stormwatch.services.analytics import queries

    with db.connect() as c:
        defs = dict(c.execute(text(
            "SELECT indexname, indexdef FROM pg_indexes WHERE indexname LIKE "
            "'ix_%_rollups_minute_%'")).all())
        assert set(defs) == {f"ix_{t}_minute_{k}" for t in queries.MINUTE_SERIES_INDEXED
                             for k in ("series", "large")}
        for name, definition in defs.items():
            assert f"{queries.MINUTE_INDEX_SKETCH_MAX})" in definition, (name, definition)
        sql = queries._packed_rollups_sql(queries.KIND_SPECS["mesh"], "rtt_us",
                                          ["src_agent_id = ANY(:srcs)"], 60)
        sql = sql.replace(":org", "CAST(:org AS uuid)")
        # Whether the index can serve the query, not what a near-empty table costs.
        c.execute(text("SET LOCAL enable_seqscan = off"))
        c.execute(text("SET LOCAL enable_bitmapscan = off"))
        plan = "\n".join(c.execute(text("EXPLAIN " + sql), {
            "org": str(uuid.uuid4()), "s": datetime.now(UTC) - timedelta(days=7),
            "e": datetime.now(UTC), "srcs": [uuid.uuid4()]}).scalars())
    assert "Index Only Scan using ix_mesh_rollups_minute_series" in plan, plan
    assert "ix_mesh_rollups_minute_large" in plan, plan
