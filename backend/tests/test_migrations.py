"""Both raw-storage paths: native daily partitions (created on demand, dropped by age) on
plain PostgreSQL, compressed hypertables on TimescaleDB, and a clean fallback to the first
when TimescaleDB is installed but not preloaded."""

import os
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from stormwatch.devtools.bootstrap import create_org_sync
from stormwatch.devtools.services import PostgresServer, free_port, timescaledb_installed
from stormwatch.services import maintenance


def test_the_schema_is_on_the_engine_the_cluster_was_started_for(db, services):
    with db.connect() as c:
        assert maintenance.storage_engine(c) == services.engine
        kinds = dict(c.execute(text(
            "SELECT relname, relkind FROM pg_class WHERE relname IN "
            "('mesh_raw','quorum_samples','storage_samples','throughput_samples')")).all())
    # Partitioned tables on PostgreSQL; hypertables are plain parents of their chunks.
    assert len(kinds) == 4
    assert set(kinds.values()) == ({"p"} if services.engine == "postgres" else {"r"})


def test_timescaledb_compresses_each_series_within_hours(db, services):
    if services.engine != "timescaledb":
        pytest.skip("TimescaleDB settings; this pass runs on plain PostgreSQL")
    with db.connect() as c:
        segments = {}
        for table, col in c.execute(text(
                "SELECT hypertable_name, attname FROM timescaledb_information.compression_settings "
                "WHERE segmentby_column_index IS NOT NULL "
                "ORDER BY hypertable_name, segmentby_column_index")).all():
            segments.setdefault(table, []).append(col)
        order = dict(c.execute(text(
            "SELECT hypertable_name, orderby_asc FROM timescaledb_information.compression_settings "
            "WHERE attname = 'time' AND orderby_column_index = 1")).all())
        chunks = dict(c.execute(text(
            "SELECT hypertable_name, time_interval FROM timescaledb_information.dimensions")).all())
        policies = dict(c.execute(text(
            "SELECT hypertable_name, config->>'compress_after' FROM timescaledb_information.jobs "
            "WHERE proc_name = 'policy_compression'")).all())
    assert segments == {
        "mesh_raw": ["series_id"],
        "quorum_samples": ["org_id", "agent_id", "group_name"],
        "storage_samples": ["org_id", "target_id", "agent_id"],
        "throughput_samples": ["org_id", "src_agent_id", "dst_agent_id"]}
    assert order == dict.fromkeys(segments, False)  # time DESC
    assert chunks["mesh_raw"] == timedelta(hours=1)
    assert all(chunks[t] <= timedelta(hours=6) for t in segments)
    assert set(policies) == set(segments) and set(policies.values()) == {"01:00:00"}


@pytest.mark.skipif(not timescaledb_installed(), reason="needs TimescaleDB installed")
def test_timescaledb_installed_but_not_preloaded_leaves_a_working_plain_postgres_schema(
        services):
    """What a Debian host with the timescaledb package (not preloaded) gets: migrations fall
    back to native partitions, and ingest and raw queries work on them. Run by the plain
    PostgreSQL pass (it starts a cluster of its own; once is enough)."""
    if services.engine != "postgres":
        pytest.skip("the plain-PostgreSQL pass runs it")
    import dataclasses
    import subprocess
    import sys
    from pathlib import Path

    from tests.conftest import ApiServer
    from tests.helpers import enroll, mesh_batch, post_batch

    pg = PostgresServer(services.tmp / "pg-not-preloaded", free_port(), engine="postgres")
    pg.init()
    pg.start()
    try:
        repo = Path(__file__).resolve().parents[2]
        out = subprocess.run(
            [sys.executable, "-m", "alembic", "-c", str(repo / "migrations" / "alembic.ini"),
             "upgrade", "heads"], env={**os.environ, "DATABASE_URL": pg.url}, cwd=repo,
            capture_output=True, text=True)
        assert out.returncode == 0, out.stderr[-3000:]
        assert "timescaledb is installed but not in shared_preload_libraries" in out.stderr
        assert "native PostgreSQL daily partitions" in out.stderr
        import psycopg

        with psycopg.connect(f"host=127.0.0.1 port={pg.port} user=stormwatch "
                             "dbname=stormwatch") as conn:
            assert conn.execute("SELECT value FROM sw_meta WHERE key = 'storage_engine'"
                                ).fetchone() == ("postgres",)
            assert conn.execute("SELECT count(*) FROM pg_extension WHERE extname = "
                                "'timescaledb'").fetchone() == (0,)
            assert conn.execute("SELECT relkind FROM pg_class WHERE relname = 'mesh_raw'"
                                ).fetchone() == ("p",)
        org = create_org_sync(pg.url, "Not preloaded", f"np-{os.getpid()}@example.test",
                              password="correct horse battery staple")
        api = ApiServer(dataclasses.replace(services, pg=pg, database_url=pg.url))
        api.start()
        try:
            with api.client() as client:
                health = client.get("/api/v1/health").json()
                assert "raw storage on postgres" in health["database"]["detail"]
                a = enroll(client, org.enrollment_token, "np-a")
                b = enroll(client, org.enrollment_token, "np-b")
                r = post_batch(client, a, mesh_batch(a, [b.agent_id], rounds=100))
                assert r.status_code == 202, r.text
                r = client.get("/api/v1/analytics/mesh/summary", params={
                    "start": (datetime.now(UTC) - timedelta(minutes=10)).isoformat(),
                    "end": datetime.now(UTC).isoformat(), "resolution": "raw"},
                    headers={"Authorization": f"Bearer {org.api_key}"})
                assert r.status_code == 200, r.text
                (g,) = r.json()["groups"]
                assert g["samples"] == 100 and g["failures"] == 2  # mesh_batch loses 1 in 50
        finally:
            api.stop()
    finally:
        pg.stop("immediate")


def test_partitions_are_created_ahead_and_old_ones_dropped(db, services):
    if services.engine != "postgres":
        pytest.skip("native partitions are the plain-PostgreSQL path")
    with db.begin() as c:
        # Older than any org may keep raw samples, whatever other tests set.
        c.execute(text("SELECT sw_ensure_partitions('mesh_raw', now() - interval '100 days', "
                       "now() - interval '99 days')"))
        old_day = (datetime.now(UTC) - timedelta(days=100)).strftime("%Y%m%d")
        assert c.execute(text("SELECT to_regclass(:n)"),
                         {"n": f"mesh_raw_p{old_day}"}).scalar() is not None
        maintenance.ensure_partitions(c, days_ahead=5)
        ahead = (datetime.now(UTC) + timedelta(days=5)).strftime("%Y%m%d")
        assert c.execute(text("SELECT to_regclass(:n)"),
                         {"n": f"quorum_samples_p{ahead}"}).scalar() is not None
        removed = maintenance.enforce_raw_retention(c)
        assert removed["mesh_raw"] >= 2
        assert c.execute(text("SELECT to_regclass(:n)"),
                         {"n": f"mesh_raw_p{old_day}"}).scalar() is None
        today = datetime.now(UTC).strftime("%Y%m%d")
        assert c.execute(text("SELECT to_regclass(:n)"),
                         {"n": f"mesh_raw_p{today}"}).scalar() is not None


def test_migrating_a_fresh_database_logs_the_storage_choice(services):
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
    expected = {"postgres": "native PostgreSQL daily partitions (TimescaleDB not available)",
                "timescaledb": "raw sample storage: TimescaleDB hypertables"}[services.engine]
    assert expected in out.stderr


def test_the_timescaledb_retention_backstop_keeps_what_an_org_may_keep(db, services):
    """The policy's interval agrees with the longest raw retention the settings API accepts
    (and the retention task's bound), and on TimescaleDB the live policies use it."""
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
    if services.engine == "timescaledb":
        with db.connect() as c:
            drops = set(c.execute(text(
                "SELECT config->>'drop_after' FROM timescaledb_information.jobs "
                "WHERE proc_name = 'policy_retention'")).scalars())
        assert drops == {f"{bound} days"}


def test_minute_rollups_of_a_series_are_read_through_its_covering_index(db):
    """The analytics queries split minute rows at the sketch length the partial covering
    index of migration 0005 holds; a pair's range is then an index-only scan."""
    from stormwatch.services.analytics import rollup_reads
    from stormwatch.services.analytics.filters import KIND_SPECS

    with db.connect() as c:
        defs = dict(c.execute(text(
            "SELECT indexname, indexdef FROM pg_indexes WHERE indexname LIKE "
            "'ix_%_rollups_minute_%'")).all())
        assert set(defs) == {f"ix_{t}_minute_{k}" for t in rollup_reads.MINUTE_SERIES_INDEXED
                             for k in ("series", "large")}
        for name, definition in defs.items():
            assert f"{rollup_reads.MINUTE_INDEX_SKETCH_MAX})" in definition, (name, definition)
        sql = rollup_reads.packed_rollups_sql(KIND_SPECS["mesh"], "rtt_us",
                                              ["src_agent_id = ANY(:srcs)"], 60)
        sql = sql.replace(":org", "CAST(:org AS uuid)")
        params = {"org": str(uuid.uuid4()), "s": datetime.now(UTC) - timedelta(days=7),
                  "e": datetime.now(UTC), "srcs": [uuid.uuid4()]}
        # Whether the indexes can serve the query, not what a near-empty table costs.
        c.execute(text("SET LOCAL enable_seqscan = off"))
        c.execute(text("SET LOCAL enable_bitmapscan = off"))
        plan = "\n".join(c.execute(text("EXPLAIN " + sql), params).scalars())
        assert "ix_mesh_rollups_minute_large" in plan, plan
        # Other tests' fresh rows leave pages not all-visible, and then a plain scan of the
        # primary key can cost less than the index-only one (CI chose it once): take plain
        # index scans away to ask only whether the covering index answers the small half.
        c.execute(text("SET LOCAL enable_indexscan = off"))
        plan = "\n".join(c.execute(text("EXPLAIN " + sql), params).scalars())
    assert "Index Only Scan using ix_mesh_rollups_minute_series" in plan, plan


def _alembic(url: str, *args: str) -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-m", "alembic", "-c", str(repo / "migrations" / "alembic.ini"),
                    *args], env={**os.environ, "DATABASE_URL": url}, cwd=repo,
                   capture_output=True, text=True, check=True)


def test_compact_mesh_rows_keep_every_existing_sample_through_upgrade_and_downgrade(services):
    import psycopg

    name = f"compact_{uuid.uuid4().hex[:8]}"
    admin = f"host=127.0.0.1 port={services.pg.port} user=stormwatch"
    with psycopg.connect(f"{admin} dbname=postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = services.database_url.rsplit("/", 1)[0] + f"/{name}"
    _alembic(url, "upgrade", "0013_throughput")
    org, a, b = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    now = datetime.now(UTC).replace(microsecond=123456)
    # Two orgs' series, a loss, two payload sizes and a sample from two days ago.
    rows = [(now - timedelta(seconds=i), org, a, b, i, 64, 300 + i, 0) for i in range(5)]
    rows += [(now, org, a, b, 9, 1024, 800, 0), (now, org, b, a, 3, 64, None, 1),
             (now - timedelta(days=2), org, b, b, 1, 64, 40, 0),
             (now, uuid.uuid4(), a, b, 0, 64, 7, 0)]
    cols = "time, org_id, src_agent_id, dst_agent_id, round, payload_bytes, rtt_us, status"
    with psycopg.connect(f"{admin} dbname={name}", autocommit=True) as conn, conn.cursor() as cur:
        cur.executemany(f"INSERT INTO mesh_samples ({cols}) VALUES "
                        "(%s, %s, %s, %s, %s, %s, %s, %s)", rows)

    timescale = services.engine == "timescaledb"
    stored_kind = "r" if timescale else "p"  # a hypertable, or a partitioned table

    def stored() -> list[tuple]:
        with psycopg.connect(f"{admin} dbname={name}") as conn:
            return conn.execute(f"SELECT {cols} FROM mesh_samples "
                                "ORDER BY 1, 2, 3, 4, 5, 6").fetchall()

    def compress(table: str) -> int:
        """Compresses every chunk of the hypertable; how many are compressed."""
        with psycopg.connect(f"{admin} dbname={name}", autocommit=True) as conn:
            conn.execute(f"SELECT compress_chunk(c, if_not_compressed => true) "
                         f"FROM show_chunks('{table}') c")
            return conn.execute("SELECT count(*) FROM timescaledb_information.chunks WHERE "
                                "hypertable_name = %s AND is_compressed", (table,)).fetchone()[0]

    before = stored()
    assert len(before) == len(rows)
    if timescale:
        assert compress("mesh_samples") >= 2  # converted from compressed chunks
    _alembic(url, "upgrade", "0014_compact_mesh_rows")
    assert stored() == before
    with psycopg.connect(f"{admin} dbname={name}") as conn:
        kinds = dict(conn.execute("SELECT relname, relkind FROM pg_class WHERE relname IN "
                                  "('mesh_samples', 'mesh_raw', 'mesh_series')").fetchall())
        assert kinds == {"mesh_samples": "v", "mesh_raw": stored_kind, "mesh_series": "r"}
        assert conn.execute("SELECT count(*) FROM mesh_series").fetchone()[0] == 5
        # Old-style rows still go in through the view, under an existing or a new series.
        conn.execute(f"INSERT INTO mesh_samples ({cols}) VALUES (%s, %s, %s, %s, 99, 64, 5, 0),"
                     " (%s, %s, %s, %s, 98, 65, 6, 0)", (now, org, a, b, now, org, a, b))
        assert conn.execute("SELECT count(*) FROM mesh_series").fetchone()[0] == 6
        conn.commit()
    after = stored()
    assert len(after) == len(rows) + 2
    if timescale:
        assert compress("mesh_raw") >= 2
        assert stored() == after
    _alembic(url, "downgrade", "0013_throughput")
    assert stored() == after
    with psycopg.connect(f"{admin} dbname={name}") as conn:
        assert conn.execute("SELECT relkind FROM pg_class WHERE relname = 'mesh_samples'"
                            ).fetchone()[0] == stored_kind
        if timescale:
            # 0012's layout is back on mesh_samples, with its policies.
            assert conn.execute(
                "SELECT string_agg(attname, ',' ORDER BY segmentby_column_index) FROM "
                "timescaledb_information.compression_settings WHERE hypertable_name = "
                "'mesh_samples' AND segmentby_column_index IS NOT NULL").fetchone()[0] == (
                "org_id,src_agent_id,dst_agent_id")
            assert sorted(r[0] for r in conn.execute(
                "SELECT proc_name FROM timescaledb_information.jobs WHERE hypertable_name = "
                "'mesh_samples'")) == ["policy_compression", "policy_retention"]


def test_raw_mesh_reads_by_series_ids_range_scan_the_series_index(db, services):
    """mesh_raw has one b-tree, on (series_id, time): the analyses pick an org's series in
    mesh_series, then read mesh_raw for those ids in the range through it (on plain
    PostgreSQL a BRIN index on time serves reads of every series; TimescaleDB's hour chunks
    do that there)."""
    with db.connect() as c:
        c.execute(text("SET LOCAL enable_seqscan = off"))
        plan = "\n".join(c.execute(text(
            "EXPLAIN SELECT series_id, time, rtt_us, status FROM mesh_raw WHERE series_id = "
            "ANY(CAST(:ids AS integer[])) AND time >= :s AND time < :e"),
            {"ids": [1, 2, 3], "s": datetime.now(UTC) - timedelta(minutes=15),
             "e": datetime.now(UTC)}).scalars())
        indexes = dict(c.execute(text(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'mesh_raw'")).all())
    if services.engine == "postgres":
        # each daily partition's copy of ix_mesh_raw_series
        assert "_series_id_time_idx" in plan, plan
    assert set(indexes) == ({"ix_mesh_raw_series", "ix_mesh_raw_time"}
                            if services.engine == "postgres" else {"ix_mesh_raw_series"})
    assert indexes["ix_mesh_raw_series"].endswith('USING btree (series_id, "time")')
    if services.engine == "postgres":
        assert indexes["ix_mesh_raw_time"].endswith('USING brin ("time")')


def test_pairs_classed_on_empty_fields_are_classed_again_through_upgrade_and_downgrade(services):
    """Before 0020 an empty field matched an empty one: agents without subnets in one zone
    were same_subnet. The upgrade classes them as the service now does; the downgrade back."""
    import psycopg

    name = f"topology_{uuid.uuid4().hex[:8]}"
    admin = f"host=127.0.0.1 port={services.pg.port} user=stormwatch"
    with psycopg.connect(f"{admin} dbname=postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = services.database_url.rsplit("/", 1)[0] + f"/{name}"
    _alembic(url, "upgrade", "0019_accounts")
    org = uuid.uuid4()
    sites = {"a": ("lab", "r1", "z1", ""), "b": ("lab", "r1", "z1", ""),
             "c": ("lab", "r1", "z1", "10.0.0.0/24"), "d": ("lab", "r1", "z1", "10.0.0.0/24"),
             "e": ("lab", "r1", "", "")}
    ids = {n: uuid.uuid4() for n in sites}
    old = {("a", "b"): "same_subnet", ("a", "c"): "cross_subnet", ("c", "d"): "same_subnet",
           ("a", "e"): "cross_az", ("e", "e"): "self"}
    with psycopg.connect(f"{admin} dbname={name}", autocommit=True) as conn:
        conn.execute("INSERT INTO orgs (id, name, slug) VALUES (%s, 'o', %s)", (org, name))
        for n, (p, r, z, s) in sites.items():
            conn.execute("INSERT INTO agents (id, org_id, name, provider, region, zone, subnet, "
                         "token_prefix, token_hash) VALUES (%s, %s, %s, %s, %s, %s, %s, 'x', %s)",
                         (ids[n], org, n, p, r, z, s, uuid.uuid4().hex))
        for (x, y), cls in old.items():
            conn.execute("INSERT INTO agent_pairs VALUES (%s, %s, %s, %s)",
                         (org, ids[x], ids[y], cls))

    def classes() -> dict[tuple[str, str], str]:
        names = {v: k for k, v in ids.items()}
        with psycopg.connect(f"{admin} dbname={name}") as conn:
            rows = conn.execute("SELECT src_agent_id, dst_agent_id, topology_class "
                                "FROM agent_pairs").fetchall()
        return {(names[s], names[d]): c for s, d, c in rows}

    _alembic(url, "upgrade", "0020_topology")
    assert classes() == {("a", "b"): "cross_subnet", ("a", "c"): "cross_subnet",
                         ("c", "d"): "same_subnet", ("a", "e"): "cross_az",
                         ("e", "e"): "self"}
    _alembic(url, "downgrade", "0019_accounts")
    assert classes() == old


def test_rule_scopes_naming_bare_zones_get_the_zone_keys_they_matched(services):
    """Scopes used to name a zone by its name alone, matching that name in every region and
    provider. The upgrade rewrites each name to the provider/region/zone keys of the org's
    agents it matched, so each rule keeps watching the same agents; the downgrade goes back."""
    import json

    import psycopg

    name = f"zonekeys_{uuid.uuid4().hex[:8]}"
    admin = f"host=127.0.0.1 port={services.pg.port} user=stormwatch"
    with psycopg.connect(f"{admin} dbname=postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = services.database_url.rsplit("/", 1)[0] + f"/{name}"
    _alembic(url, "upgrade", "0022_deletion")
    org, other = uuid.uuid4(), uuid.uuid4()
    sites = {org: [("azure", "westeurope", "1"), ("azure", "eastus", "1"),
                   ("aws", "us-east-1", "us-east-1a")],
             other: [("gcp", "europe-west1", "1")]}
    scopes = {"zones": {"zones": ["1", "us-east-1a", "gone-1"], "regions": ["eastus"]},
              "none": {"regions": ["westeurope"]}, "empty": {"zones": []}}
    rules = {k: uuid.uuid4() for k in scopes}
    with psycopg.connect(f"{admin} dbname={name}", autocommit=True) as conn:
        for o, places in sites.items():
            conn.execute("INSERT INTO orgs (id, name, slug) VALUES (%s, 'o', %s)",
                         (o, f"{name}-{o}"))
            for i, (p, r, z) in enumerate(places):
                conn.execute("INSERT INTO agents (id, org_id, name, provider, region, zone, "
                             "token_prefix, token_hash) VALUES (%s, %s, %s, %s, %s, %s, 'x', %s)",
                             (uuid.uuid4(), o, f"a{i}", p, r, z, uuid.uuid4().hex))
        for k, scope in scopes.items():
            conn.execute("INSERT INTO alert_rules (id, org_id, name, severity, metric, statistic, "
                         "scope, window_s, condition) VALUES (%s, %s, %s, 'warning', 'mesh_rtt', "
                         "'p99', %s, 60, '{\"type\": \"above\", \"value\": 1}')",
                         (rules[k], org, k, json.dumps(scope)))

    def stored() -> dict[str, object]:
        with psycopg.connect(f"{admin} dbname={name}") as conn:
            rows = dict(conn.execute("SELECT id, scope FROM alert_rules").fetchall())
        return {k: rows[rid] for k, rid in rules.items()}

    _alembic(url, "upgrade", "0023_split")
    assert stored() == {
        "zones": {"zones": ["azure/eastus/1", "azure/westeurope/1", "aws/us-east-1/us-east-1a",
                            "gone-1"], "regions": ["eastus"]},
        "none": scopes["none"], "empty": scopes["empty"]}
    _alembic(url, "downgrade", "0022_deletion")
    assert stored() == scopes
