"""Runs the whole product locally without Docker: PostgreSQL, Redis, migrations, the API
(serving the built UI), Celery worker and beat, and optionally the demo fleet
(stormwatch.devtools.demo: twelve agents in emulated regions behind a WAN emulator, and
three storage emulators as targets).

`make run` calls it with a persistent data directory under the checkout; tests call it
with a temporary one. It prints one JSON line on stdout when everything answers, stays in
the foreground, and on SIGINT/SIGTERM stops every process it started.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict
from pathlib import Path
from typing import Any

from stormwatch.devtools.bootstrap import ensure_demo_org, saved_login_works
from stormwatch.devtools.demo import (
    DEMO_SIZES,
    FAST,
    FLEET,
    STORAGE,
    THROUGHPUT,
    DemoFleet,
    Schedule,
)
from stormwatch.devtools.services import (
    PostgresServer,
    RedisServer,
    free_port,
    requested_engine,
    run_migrations,
    server_shared_buffers,
    wait_for_port,
)

REPO = Path(__file__).resolve().parents[3]
VENV_BIN = Path(sys.executable).parent
DEMO_EGRESS_ALLOW = "127.0.0.0/8,::1"
# The product's own processes are restarted when they exit, as compose's `restart:
# unless-stopped` and Kubernetes do: a worker whose broker connection drops while it restores
# unacknowledged messages can end (kombu's Redis transport, celery/kombu#582), and a local
# stack must recover from that as a deployment does. Anything else exiting stops the stack.
RESTARTED = ("api", "worker", "beat")
# Waits before the 1st, 2nd, ... restart within CRASH_LOOP_WINDOW_S; more than
# CRASH_LOOP_RESTARTS there is a crash loop (a bad setting), which stops the stack instead.
RESTART_DELAYS_S = (1.0, 2.0, 5.0, 10.0, 30.0)
CRASH_LOOP_RESTARTS = 5
CRASH_LOOP_WINDOW_S = 300.0


def log(msg: str) -> None:
    print(f"[stormwatch] {msg}", file=sys.stderr, flush=True)


def parse_host(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """HOST is the address the API listens on: an IP address of this machine, 0.0.0.0 or ::
    for all of them, or localhost."""
    if host == "localhost":
        return ipaddress.ip_address("127.0.0.1")
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        raise ValueError(f"HOST={host!r} is not an IP address (e.g. 127.0.0.1, 0.0.0.0 or an "
                         "address of this machine)") from None


def local_address(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    """Where this machine's own processes (health checks, demo agents) reach the API."""
    if addr.is_unspecified:
        return "::1" if addr.version == 6 else "127.0.0.1"
    return str(addr)


def http_url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def exposure_warning(addr: ipaddress.IPv4Address | ipaddress.IPv6Address,
                     public_base_url: str) -> str | None:
    """Off loopback with no TLS in front, logins, API keys and agent tokens cross the network
    in clear text: say so."""
    if addr.is_loopback or public_base_url.startswith("https://"):
        return None
    return (f"HOST={addr} serves the API over plain HTTP to other hosts: logins, API keys and "
            "agent tokens cross the network unencrypted. Put a TLS proxy in front and set "
            "PUBLIC_BASE_URL=https://... (docs/operations.md), or keep HOST=127.0.0.1.")


class Stack:
    def __init__(self, data_dir: Path, port: int, with_worker: bool,
                 demo: Schedule | None, persistent: bool, host: str = "127.0.0.1") -> None:
        self.data_dir = data_dir
        self.port = port
        self.host = parse_host(host)
        self.local_host = local_address(self.host)
        self.url = http_url(self.local_host, port)
        self.with_worker = with_worker
        self.demo = demo
        self.fleet: DemoFleet | None = None
        self.persistent = persistent
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []
        # How each process was started (command line, environment), for its restarts.
        self.commands: dict[str, tuple[list[str], dict[str, str] | None]] = {}
        # Exits of restarted processes: (name, exit code, monotonic time).
        self.restarts: list[tuple[str, int, float]] = []
        self._due: dict[str, float] = {}  # name -> monotonic time of its pending restart
        self.restart_delays_s = RESTART_DELAYS_S
        self.pg: PostgresServer | None = None
        self.redis: RedisServer | None = None
        self.state_file = data_dir / "state.json"
        self.state: dict[str, Any] = {}

    # -- state kept between runs so `make run` reuses data, ports and the demo login ----
    def _load_state(self) -> None:
        if self.state_file.exists():
            self.state = json.loads(self.state_file.read_text())

    def _save_state(self) -> None:
        self.state_file.write_text(json.dumps(self.state, indent=2))
        os.chmod(self.state_file, 0o600)

    def start(self) -> dict[str, Any]:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.data_dir, 0o755)  # postgres must traverse into its data dir
        self._load_state()
        self.state.setdefault("secret_key", secrets.token_urlsafe(32))
        database_url = os.environ.get("DATABASE_URL")
        if not database_url:
            self.state.setdefault("pg_port", free_port())
            self.state.setdefault("pg_password", secrets.token_urlsafe(16))
            self.pg = PostgresServer(self.data_dir / "pg", self.state["pg_port"],
                                     password=self.state["pg_password"],
                                     shared_buffers=server_shared_buffers(),
                                     engine=self._engine(),
                                     durable=self.persistent)
            self.pg.init()
            log(f"starting PostgreSQL on 127.0.0.1:{self.pg.port} ({self.pg.data_dir}, "
                f"{'TimescaleDB preloaded' if self.pg.engine == 'timescaledb' else 'plain'})")
            self.pg.start()
            database_url = self.pg.url
        redis_url = os.environ.get("REDIS_URL")
        if not redis_url:
            self.state.setdefault("redis_port", free_port())
            self.redis = RedisServer(self.data_dir / "redis", self.state["redis_port"],
                                     persistent=self.persistent)
            log(f"starting Redis on 127.0.0.1:{self.redis.port}")
            self.redis.start()
            redis_url = self.redis.url
        self._save_state()

        migrations_log = self.data_dir / "migrations.log"
        log(f"applying migrations (output in {migrations_log})")
        run_migrations(database_url, migrations_log)
        self.state["engine"] = _storage_engine(database_url)
        self._save_state()
        log(f"raw storage on {self.state['engine']}")
        demo = self.state.get("demo")
        # A login that no longer works (a new database, a password changed in the UI) is
        # replaced: the banner must print one that opens the demo org.
        if demo is None or not asyncio.run(saved_login_works(database_url, demo)):
            # Same code as `python -m stormwatch.cli create-admin`, which compose runs.
            creds = asyncio.run(ensure_demo_org(database_url, "Demo", "admin@stormwatch.local"))
            demo = creds.as_dict()
            self.state["demo"] = demo
            self._save_state()

        self.env = {**os.environ, "DATABASE_URL": database_url, "REDIS_URL": redis_url,
                    "SECRET_KEY": self.state["secret_key"], "PYTHONPATH": str(REPO / "backend"),
                    "PYTHONUNBUFFERED": "1",
                    # Any free port unless told: two stacks on one machine never collide.
                    "WORKER_METRICS_PORT": os.environ.get("WORKER_METRICS_PORT", "0"),
                    # Links in alert messages open this stack's UI unless told otherwise.
                    "PUBLIC_BASE_URL": os.environ.get("PUBLIC_BASE_URL", self.url)}
        if self.demo is not None:
            # The demo's storage emulators listen on loopback, which the egress policy refuses
            # unless allowed; a real deployment (DEMO=0) keeps the operator's setting as it is.
            self.env["EGRESS_ALLOW"] = ",".join(
                e for e in (os.environ.get("EGRESS_ALLOW", ""), DEMO_EGRESS_ALLOW) if e)
        warning = exposure_warning(self.host, self.env["PUBLIC_BASE_URL"])
        if warning:
            log(f"WARNING: {warning}")
        self._spawn("api", [str(VENV_BIN / "uvicorn"), "stormwatch.main:app", "--host",
                            str(self.host), "--port", str(self.port), "--log-level", "warning",
                            "--no-access-log"])
        wait_for_port(self.port, 60, self.procs[-1][1], host=self.local_host)
        if self.with_worker:
            self._spawn("worker", [str(VENV_BIN / "celery"), "-A", "stormwatch.worker.app",
                                   "worker", "--loglevel", "WARNING", "--concurrency", "2",
                                   "--without-gossip", "--without-mingle"])
            self._spawn("beat", [str(VENV_BIN / "celery"), "-A", "stormwatch.worker.app", "beat",
                                 "--loglevel", "WARNING", "--schedule",
                                 str(self.data_dir / "celerybeat-schedule")])
        url = self.url
        extra: dict[str, Any] = {}
        if self.demo is not None:
            self.fleet = DemoFleet(self.data_dir, self.state, self._save_state, self._spawn,
                                   self.demo)
            status = self.fleet.start(url, demo["api_key"], demo["enrollment_token"],
                                      self.env, free_port)
            extra["demo"] = {**status, **demo_facts()}
        return {**extra, "url": url, "host": str(self.host), "data_dir": str(self.data_dir),
                "email": demo["email"], "password": demo["password"],
                "enrollment_token": demo["enrollment_token"], "api_key": demo["api_key"],
                "org_id": demo["org_id"], "database_url": database_url, "redis_url": redis_url}

    def _engine(self) -> str:
        """The engine a new data directory gets is STORMWATCH_ENGINE's (default auto); an
        existing one keeps the engine its schema was made on, since hypertables cannot be
        read without TimescaleDB and native partitions never become hypertables."""
        requested = requested_engine()
        if not (self.data_dir / "pg" / "PG_VERSION").exists():
            return requested
        # Data directories from before the engine was recorded were never preloaded.
        kept = str(self.state.get("engine", "postgres"))
        if kept != requested:
            log(f"{self.data_dir} holds raw samples on {kept}, which it keeps; STORMWATCH_ENGINE "
                f"asks for {requested}: remove {self.data_dir} to start over on it")
        return kept

    def _spawn(self, name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        logf = open(self.data_dir / f"{name}.log", "ab")  # noqa: SIM115 - lives with the process
        # Own process group, so stopping kills the whole tree and leaves no orphans.
        proc = subprocess.Popen(args, env=env or self.env, cwd=REPO, stdin=subprocess.DEVNULL,
                                stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append((name, proc))
        self.commands[name] = (list(args), env)

    def supervise(self) -> str | None:
        """One pass of supervision, called every half second or so: restarts the product's
        processes that exited (after RESTART_DELAYS_S), and returns why the stack must stop
        when another process exited or one is crash-looping."""
        now = time.monotonic()
        for name, proc in list(self.procs):
            code = proc.poll()
            if code is None:
                continue
            where = f"see {self.data_dir}/{name}.log"
            if name not in RESTARTED:
                return f"{name} exited with code {code} ({where})"
            self.procs.remove((name, proc))
            recent = [r for r in self.restarts
                      if r[0] == name and now - r[2] < CRASH_LOOP_WINDOW_S]
            if len(recent) >= CRASH_LOOP_RESTARTS:
                return (f"{name} exited with code {code}, its {len(recent) + 1}th exit in "
                        f"{CRASH_LOOP_WINDOW_S:.0f} s: not restarting a crash loop ({where})")
            delays = self.restart_delays_s
            delay = delays[min(len(recent), len(delays) - 1)]
            self.restarts.append((name, code, now))
            self._due[name] = now + delay
            log(f"{name} exited with code {code} ({where}); restarting it in {delay:g} s")
        for name, at in list(self._due.items()):
            if now >= at:
                del self._due[name]
                args, env = self.commands[name]
                self._spawn(name, args, env)
        return None

    def kill(self, name: str) -> list[str]:
        """SIGKILLs a process's whole group (or cancels its pending restart) and takes it off
        supervision; returns its command line, to start it again with _spawn."""
        self._end(name, signal.SIGKILL, 0)
        return list(self.commands[name][0])

    def stop_process(self, name: str, timeout_s: float = 60) -> None:
        """Stops one process gracefully (SIGTERM, then SIGKILL after timeout_s) and takes it
        off supervision."""
        self._end(name, signal.SIGTERM, timeout_s)

    def _end(self, name: str, sig: signal.Signals, timeout_s: float) -> None:
        self._due.pop(name, None)
        for entry in [e for e in self.procs if e[0] == name]:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(entry[1].pid, sig)
            try:
                entry[1].wait(timeout_s or None)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(entry[1].pid, signal.SIGKILL)
                entry[1].wait()
            self.procs.remove(entry)

    def stop(self) -> None:
        self._due.clear()
        for _name, proc in reversed(self.procs):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for _name, proc in reversed(self.procs):
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.1, deadline - time.monotonic()))
            # Anything left in the group, including grandchildren.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        self.procs.clear()
        if self.fleet:
            self.fleet.stop()
        if self.redis:
            self.redis.stop()
        if self.pg:
            self.pg.stop()


def demo_facts() -> dict[str, Any]:
    """What the demo is made of, beside the emulator's status: a test of the running demo
    reads the fleet, the storage profiles and the throughput path from here, not a copy."""
    return {"fleet": [{"name": a.name, "provider": a.provider, "region": a.region}
                      for a in FLEET],
            "storage_providers": [p.provider for p in STORAGE],
            "storage_sizes_bytes": list(DEMO_SIZES),
            "throughput": asdict(THROUGHPUT)}


def _storage_engine(database_url: str) -> str:
    import psycopg

    conninfo = database_url.replace("postgresql+asyncpg://", "postgresql://")
    with psycopg.connect(conninfo) as conn:
        row = conn.execute("SELECT value FROM sw_meta WHERE key = 'storage_engine'").fetchone()
    return str(row[0]) if row else "postgres"


def wait_healthy(url: str, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/api/v1/health", timeout=3) as r:
                return dict(json.loads(r.read()))
        except urllib.error.HTTPError as e:
            last = json.loads(e.read() or b"{}")
            # A worker that could not serve its metrics will not recover by waiting.
            others = [part for name, part in last.items() if isinstance(part, dict)
                      and name not in ("rollups", "worker_metrics")]
            if others and all(part.get("ok") for part in others):
                return last
        except OSError:
            pass
        time.sleep(0.5)
    return last


def banner(info: dict[str, Any], health: dict[str, Any], data_dir: Path) -> str:
    url = info["url"]
    lines = [f"Stormwatch is running: {url}",
             f"Log in as {info['email']} / {info['password']}",
             f"API docs: {url}/docs   health: {url}/api/v1/health"]
    if os.environ.get("METRICS_TOKEN"):
        lines.append(f"API metrics: {url}/metrics (Authorization: Bearer $METRICS_TOKEN)")
    else:
        lines.append("API metrics: off; METRICS_TOKEN=<16+ characters> make run turns "
                     f"{url}/metrics on (Authorization: Bearer <token>)")
    metrics = health.get("worker_metrics") or {}
    if metrics:
        failed = "" if metrics.get("ok") else " FAILED"
        lines.append(f"Worker metrics{failed}: {metrics.get('detail')}")
    failing = [name for name, part in health.items() if isinstance(part, dict)
               and part.get("ok") is False and name not in ("rollups", "worker_metrics")]
    if failing:
        lines.append("NOT HEALTHY: " + "; ".join(
            f"{name}: {health[name].get('detail')}" for name in failing))
    if info.get("host") and not parse_host(info["host"]).is_loopback:
        lines.append(f"Listening on {info['host']}, port {url.rsplit(':', 1)[1]}: agents on "
                     "other hosts use --api-url http://<this machine's address>:<port>")
    lines += [f"Agent enrollment token: {info['enrollment_token']}",
              f"Data and logs: {data_dir}", "Ctrl-C stops everything."]
    return "\n" + "".join(f"  {line}\n" for line in lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--data-dir", type=Path, help="kept between runs; a temp dir if omitted")
    p.add_argument("--port", type=int, default=0, help="API port (0: a free one)")
    p.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"),
                   help="address the API listens on ($HOST; 0.0.0.0: every address)")
    p.add_argument("--with-worker", action="store_true", help="start Celery worker and beat")
    p.add_argument("--demo", action="store_true",
                   help="the demo fleet: agents in emulated regions, storage emulators")
    p.add_argument("--demo-fast", action="store_true",
                   help="the demo on a test's schedule (steps after a minute, storage every 20 s)")
    p.add_argument("--human", action="store_true", help="print a banner instead of JSON")
    args = p.parse_args()

    try:
        parse_host(args.host)
    except ValueError as exc:
        log(str(exc))
        return 2
    persistent = args.data_dir is not None
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="stormwatch-stack-"))
    schedule = FAST if args.demo_fast else Schedule() if args.demo else None
    stack = Stack(data_dir.resolve(), args.port or free_port(), args.with_worker, schedule,
                  persistent, args.host)
    # A plain flag: a handler that took a lock (Event.set) could interrupt the main thread
    # while it holds that lock in Event.wait and deadlock the stop.
    stopping: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        info = stack.start()
        health: dict[str, Any] = {}
        if args.with_worker:
            health = wait_healthy(info["url"], 60)
            info["health_ok"] = bool(health.get("ok"))
            info["worker_metrics"] = health.get("worker_metrics")
        if args.human:
            print(banner(info, health, data_dir.resolve()), flush=True)
        else:
            print(json.dumps(info), flush=True)
        while not stopping:
            time.sleep(0.5)  # the flag is read at least every half second
            if stopping:
                break
            problem = stack.supervise()
            if problem:
                log(problem)
                return 1
        return 0
    except RuntimeError as exc:  # a step that failed says what and where its log is
        log(str(exc))
        return 1
    finally:
        log("stopping")
        stack.stop()


if __name__ == "__main__":
    sys.exit(main())
