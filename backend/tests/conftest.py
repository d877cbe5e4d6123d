"""Shared fixtures: a throwaway PostgreSQL and Redis on free ports, migrations applied,
and the API running as a real uvicorn server that tests talk to over HTTP."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine, create_engine, text

from stormwatch.core.security import hash_password
from stormwatch.devtools.bootstrap import OrgCredentials, create_org_sync
from stormwatch.devtools.services import (
    PostgresServer,
    RedisServer,
    free_port,
    requested_engine,
    run_migrations,
    wait_for_port,
)
from tests.helpers import stop_group

REPO = Path(__file__).resolve().parents[2]
# The egress policy refuses loopback; tests whose receivers listen there open it (tests of
# the policy itself run without it).
LOOPBACK_ALLOWED = "127.0.0.0/8,::1"
# Set before anything reads the settings: a test that encrypts in this process and an API it
# starts must share the key, whichever test of the worker read the settings first.
os.environ.setdefault("SECRET_KEY", "test-secret-key-not-for-production")


def pytest_report_header() -> str:
    return f"raw storage engine: {requested_engine()} (STORMWATCH_ENGINE=postgres|timescaledb|auto)"


@dataclass
class Services:
    pg: PostgresServer
    redis: RedisServer
    database_url: str
    redis_url: str
    tmp: Path
    engine: str


def storage_engine_of(database_url: str) -> str | None:
    engine = create_engine(database_url.replace("+asyncpg", "+psycopg"))
    try:
        with engine.connect() as conn:
            return conn.execute(text(
                "SELECT value FROM sw_meta WHERE key = 'storage_engine'")).scalar()
    finally:
        engine.dispose()


@pytest.fixture(scope="session")
def services() -> Iterator[Services]:
    engine = requested_engine()
    tmp = Path(tempfile.mkdtemp(prefix="stormwatch-test-"))
    os.chmod(tmp, 0o755)
    pg = PostgresServer(tmp / "pg", free_port(), engine=engine, durable=False)
    pg.init()
    pg.start()
    redis = RedisServer(tmp / "redis", free_port())
    redis.start()
    os.environ["DATABASE_URL"] = pg.url
    os.environ["REDIS_URL"] = redis.url
    # Workers the tests start take any free port for their metrics, never a fixed one.
    os.environ.setdefault("WORKER_METRICS_PORT", "0")
    run_migrations(pg.url)
    try:
        # A pass asked to run on TimescaleDB fails, not passes on a fallback, if the
        # migrations did not take the TimescaleDB branch.
        got = storage_engine_of(pg.url)
        if got != engine:
            pytest.fail(f"tests asked for raw storage on {engine}, the schema is on {got}",
                        pytrace=False)
        yield Services(pg=pg, redis=redis, database_url=pg.url, redis_url=redis.url, tmp=tmp,
                       engine=engine)
    finally:
        redis.stop()
        pg.stop("immediate")
        if not os.environ.get("KEEP_TEST_DIR"):
            shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def db(services: Services) -> Iterator[Engine]:
    engine = create_engine(services.database_url.replace("+asyncpg", "+psycopg"),
                           pool_pre_ping=True)
    yield engine
    engine.dispose()


class ApiServer:
    """The API as a real process on a fixed port, so it can be stopped and restarted."""

    def __init__(self, services: Services, extra_env: dict[str, str] | None = None,
                 args: list[str] | None = None, scheme: str = "http",
                 host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = free_port()
        self.base_url = f"{scheme}://{host}:{self.port}"
        self.args = args or []
        self.env = {**os.environ, "DATABASE_URL": services.database_url,
                    "REDIS_URL": services.redis_url, "PYTHONPATH": str(REPO / "backend"),
                    **(extra_env or {})}
        self.log = services.tmp / f"api-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as logf:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "uvicorn", "stormwatch.main:app", "--host", self.host,
                 "--port", str(self.port), "--log-level", "warning", *self.args],
                env=self.env, cwd=REPO, stdout=logf, stderr=subprocess.STDOUT,
                start_new_session=True)
        try:
            wait_for_port(self.port, 60, self.proc, host=self.host)
        except BaseException:
            self.stop()  # an API that never listened must not outlive the test run
            raise

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            stop_group(self.proc, 20)
        self.proc = None

    def client(self, **kwargs: object) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, timeout=30, **kwargs)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def api_server(services: Services) -> Iterator[ApiServer]:
    server = ApiServer(services, {"EGRESS_ALLOW": LOOPBACK_ALLOWED})
    server.start()
    yield server
    server.stop()


ADMIN_PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="session")
def make_org(services: Services) -> Callable[..., OrgCredentials]:
    counter = iter(range(1, 1_000_000))
    # Every test org's admin has this password: one argon2 hash (half a second) per worker,
    # not per org.
    password_hash = hash_password(ADMIN_PASSWORD)

    def make(name: str | None = None) -> OrgCredentials:
        n = next(counter)
        return create_org_sync(services.database_url, name or f"Org {n}",
                               f"admin{n}-{os.getpid()}@example.test",
                               password=ADMIN_PASSWORD, password_hash=password_hash)

    return make


@pytest.fixture
def api(api_server: ApiServer) -> Iterator[httpx.Client]:
    with api_server.client() as client:
        yield client
