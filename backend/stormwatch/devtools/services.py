"""Start and stop throwaway or persistent PostgreSQL and Redis servers on loopback.

Used by `make run` (persistent data under .data/) and by the test suites (temporary
directories, free ports). PostgreSQL refuses to run as root, so as root it runs as the
`postgres` system user on a data directory that user owns.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

PG_BIN_CANDIDATES = [Path("/usr/lib/postgresql") / v / "bin" for v in ("17", "16", "15", "14")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, timeout_s: float = 30.0, proc: subprocess.Popen | None = None,
                  host: str = "127.0.0.1") -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before port {port} opened")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on {host}:{port} after {timeout_s}s")


def pg_bin() -> Path:
    for cand in PG_BIN_CANDIDATES:
        if (cand / "pg_ctl").exists():
            return cand
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).parent
    raise RuntimeError("PostgreSQL server binaries (pg_ctl, initdb) not found")


ENGINES = ("postgres", "timescaledb")


def timescaledb_installed(bin_dir: Path | None = None) -> bool:
    """Whether the TimescaleDB extension's files are installed for this PostgreSQL server."""
    try:
        bin_dir = bin_dir or pg_bin()
    except RuntimeError:
        return False
    major = bin_dir.parent.name  # /usr/lib/postgresql/<major>/bin
    return ((bin_dir.parent / "lib" / "timescaledb.so").exists()
            and (Path("/usr/share/postgresql") / major / "extension"
                 / "timescaledb.control").exists())


def requested_engine(value: str | None = None) -> str:
    """The raw-storage engine for clusters started here: STORMWATCH_ENGINE (postgres,
    timescaledb or auto; default auto, which takes TimescaleDB when it is installed)."""
    raw = (value if value is not None else os.environ.get("STORMWATCH_ENGINE", "")).strip()
    choice = raw.lower() or "auto"
    if choice == "auto":
        return "timescaledb" if timescaledb_installed() else "postgres"
    if choice not in ENGINES:
        raise ValueError(f"STORMWATCH_ENGINE={raw!r}: expected postgres, timescaledb or auto")
    if choice == "timescaledb" and not timescaledb_installed():
        raise RuntimeError("STORMWATCH_ENGINE=timescaledb but the TimescaleDB extension is not "
                           "installed for this PostgreSQL (scripts/bootstrap.sh installs it from "
                           "../shared/timescaledb/ when that folder is present)")
    return choice


def _as_pg_user() -> list[str]:
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


def _chown_pg(path: Path) -> None:
    if os.geteuid() == 0:
        pw = pwd.getpwnam("postgres")
        os.chown(path, pw.pw_uid, pw.pw_gid)


def server_shared_buffers() -> str:
    """A quarter of the machine's memory, between 256 MB and 8 GB: PostgreSQL's usual sizing
    for a dedicated server (and what timescaledb-tune picks)."""
    total_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    return f"{min(max(total_mb // 4, 256), 8192)}MB"


@dataclass
class PostgresServer:
    data_dir: Path
    port: int
    user: str = "stormwatch"
    database: str = "stormwatch"
    password: str | None = None  # None: trust on loopback (throwaway test clusters only)
    # None keeps the small default of throwaway test clusters; long-lived servers pass
    # server_shared_buffers(), since rollup reads over days live or die by the buffer cache.
    shared_buffers: str | None = None
    # "postgres" or "timescaledb"; None: requested_engine() (STORMWATCH_ENGINE, default auto).
    # TimescaleDB is preloaded at start, so migrations can create the extension.
    engine: str | None = None
    # False for clusters thrown away after a run (tests): no fsync, no full-page writes, so
    # CREATE DATABASE and checkpoints skip the disk flushes a crash-safe server needs.
    durable: bool = True
    log_file: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log_file = self.data_dir.parent / f"{self.data_dir.name}.log"
        self.engine = requested_engine(self.engine)

    @property
    def url(self) -> str:
        auth = self.user if self.password is None else f"{self.user}:{self.password}"
        return f"postgresql+asyncpg://{auth}@127.0.0.1:{self.port}/{self.database}"

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*_as_pg_user(), *args], check=True, capture_output=True, text=True)

    def init(self) -> None:
        if (self.data_dir / "PG_VERSION").exists():
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        _chown_pg(self.data_dir)
        os.chmod(self.data_dir, 0o700)
        pwfile = None
        args = [str(pg_bin() / "initdb"), "-D", str(self.data_dir), "-U", self.user,
                "-E", "UTF8", "--locale=C.UTF-8"]
        if not self.durable:
            args += ["--no-sync"]
        if self.password is None:
            args += ["--auth=trust"]
        else:
            pwfile = self.data_dir.parent / f".{self.data_dir.name}.pw"
            pwfile.write_text(self.password)
            _chown_pg(pwfile)
            args += ["--auth=scram-sha-256", f"--pwfile={pwfile}"]
        try:
            self._run(*args)
        finally:
            if pwfile is not None:
                pwfile.unlink(missing_ok=True)
        conf = self.data_dir / "postgresql.conf"
        with conf.open("a") as f:
            f.write(
                "\n# stormwatch local server\n"
                "listen_addresses = '127.0.0.1'\n"
                "unix_socket_directories = ''\n"
                "max_connections = 200\n"
                "shared_buffers = 256MB\n"
                "synchronous_commit = off\n"
                "max_wal_size = 2GB\n"
                "log_min_messages = warning\n"
            )
            if not self.durable:
                f.write("fsync = off\nfull_page_writes = off\n")

    def start(self) -> None:
        self.log_file.touch(exist_ok=True)
        _chown_pg(self.log_file)
        opts = f"-p {self.port}"
        if self.shared_buffers:
            opts += f" -c shared_buffers={self.shared_buffers}"
        if self.engine == "timescaledb":
            # On the command line rather than in postgresql.conf: a data directory can be
            # started either way, and the schema's sw_meta storage_engine says what it holds.
            opts += (" -c shared_preload_libraries=timescaledb"
                     " -c timescaledb.telemetry_level=off")
        self._run(str(pg_bin() / "pg_ctl"), "-D", str(self.data_dir), "-l", str(self.log_file),
                  "-o", opts, "-w", "-t", "60", "start")
        wait_for_port(self.port)
        self._ensure_database()

    def _ensure_database(self) -> None:
        import psycopg

        conninfo = f"host=127.0.0.1 port={self.port} user={self.user} dbname=postgres"
        if self.password is not None:
            conninfo += f" password={self.password}"
        with psycopg.connect(conninfo, autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                  (self.database,)).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{self.database}"')

    def stop(self, mode: str = "fast") -> None:
        if not (self.data_dir / "postmaster.pid").exists():
            return
        subprocess.run([*_as_pg_user(), str(pg_bin() / "pg_ctl"), "-D", str(self.data_dir),
                        "-m", mode, "-w", "-t", "60", "stop"], capture_output=True, text=True)

    def running(self) -> bool:
        r = subprocess.run([*_as_pg_user(), str(pg_bin() / "pg_ctl"), "-D", str(self.data_dir),
                            "status"], capture_output=True, text=True)
        return r.returncode == 0


def ensure_redis_installed() -> str:
    path = shutil.which("redis-server")
    if path:
        return path
    subprocess.run(["apt-get", "update", "-qq"], check=False)
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "redis-server"],
                   check=True, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    path = shutil.which("redis-server")
    if not path:
        raise RuntimeError("redis-server is still missing after apt-get install")
    return path


@dataclass
class RedisServer:
    data_dir: Path
    port: int
    persistent: bool = False
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [ensure_redis_installed(), "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", str(self.data_dir), "--daemonize", "no", "--protected-mode", "yes",
                "--loglevel", "warning", "--logfile", str(self.data_dir / "redis.log")]
        if self.persistent:
            args += ["--appendonly", "no", "--save", "60 1"]
        else:
            args += ["--save", "", "--appendonly", "no"]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, start_new_session=True)
        wait_for_port(self.port, proc=self.proc)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


def run_migrations(database_url: str, output: Path | None = None) -> None:
    """Runs Alembic to the newest revision of every branch against `database_url`; with
    `output`, Alembic's lines go to that file and a failure raises with its end."""
    repo = Path(__file__).resolve().parents[3]
    env = {**os.environ, "DATABASE_URL": database_url}
    args = [sys.executable, "-m", "alembic", "-c", str(repo / "migrations" / "alembic.ini"),
            "upgrade", "heads"]
    if output is None:
        subprocess.run(args, check=True, env=env, cwd=repo)
        return
    with open(output, "ab") as out:
        code = subprocess.run(args, env=env, cwd=repo, stdout=out,
                              stderr=subprocess.STDOUT).returncode
    if code != 0:
        tail = "\n".join(output.read_text(errors="replace").splitlines()[-20:])
        raise RuntimeError(f"migrations failed (exit {code}), the end of {output}:\n{tail}")


@dataclass
class Throwaway:
    tmp: Path
    pg: PostgresServer
    redis: RedisServer | None


@contextmanager
def throwaway_servers(prefix: str, with_redis: bool = False,
                      keep: bool = False) -> Iterator[Throwaway]:
    """A migrated PostgreSQL (and a Redis) on free ports in a new temporary directory, for a
    bench run: stopped on exit, and the directory removed unless `keep`."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(tmp, 0o755)  # the postgres user must reach its data directory inside
    servers = Throwaway(tmp, PostgresServer(tmp / "pg", free_port()),
                        RedisServer(tmp / "redis", free_port()) if with_redis else None)
    try:
        servers.pg.init()
        servers.pg.start()
        if servers.redis is not None:
            servers.redis.start()
        run_migrations(servers.pg.url)
        yield servers
    finally:
        if servers.redis is not None:
            servers.redis.stop()
        servers.pg.stop("immediate")
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
