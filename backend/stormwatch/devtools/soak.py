"""A soak run: the whole stack (stack.py's PostgreSQL, Redis, API, Celery worker and beat), a
fleet of loopback agents meshing and shipping, a webhook channel pointed at a local receiver
and a loss rule on it, under a seeded fault injector: SIGKILL and restart of the worker,
beat, API and single agents, Redis restarts, PostgreSQL stopped (fast) for a while and
started again, agents enrolled and deleted, rules and silences created, edited and deleted
through the API. At the end every agent's own counters are compared with the rows the
database holds, every notified alert transition with what the receiver got, and every HTTP
answer >= 500 with the database's outages. It prints one line and exits 1 when an invariant
fails (docs/operations.md, "Soak run").

    python -m stormwatch.devtools.soak --minutes 30 --seed 1
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from stormwatch.devtools.agent_metrics import parse_metrics
from stormwatch.devtools.services import free_port
from stormwatch.devtools.soak_model import COMMIT_MARGIN_S, ModelCheck, check_loss_rule
from stormwatch.devtools.stack import REPO, Stack
from stormwatch.services.alerts.evaluate import SETTLE_S

MESH_RATE_HZ = 5
MESH_TIMEOUT_MS = 1000
FLEET = 4
MAX_BATCH_AGE_MS = 2000  # the agent's default: what it holds in memory before a batch is cut
# The loss rule (1 of 1 windows, each pair its own group) that soak_model.py checks.
RULE_WINDOW_S, RULE_LOSS_RATE = 30, 0.01
SPOOL_DISK_BYTES = 1 << 20  # the smallest spool.max_bytes the agent takes
# The 3-minute run scales PostgreSQL outages down to 10-20 s, the long ones take 20-60 s.
SHORT_RUN_MIN = 10


def log(msg: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Stopped(Exception):
    """Ctrl-C or SIGTERM: stop injecting and tear down."""


# -- the webhook receiver ----------------------------------------------------------------
class Receiver:
    """Records each webhook request's id and the (alert id, transition) pairs it carries."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_transition: dict[tuple[str, str], set[str]] = {}
        self.requests = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                wid = self.headers.get("webhook-id", "")
                try:
                    msg = json.loads(body)
                    kind = str(msg["type"]).removeprefix("alert.")
                    alerts = [str(a["alert_id"]) for a in msg["data"]["alerts"]]
                except (ValueError, KeyError, TypeError):
                    self.send_response(400)
                    self.end_headers()
                    return
                with outer.lock:
                    outer.requests += 1
                    for a in alerts:
                        outer.by_transition.setdefault((a, kind), set()).add(wid)
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# -- agents --------------------------------------------------------------------------------
@dataclass
class Agent:
    name: str
    home: Path
    binary: Path
    api_url: str
    token: str
    metrics_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    runs: int = 0
    # (measured, dropped, set aside) scraped right before each SIGKILL
    killed_runs: list[tuple[int, int, int]] = field(default_factory=list)
    deleted: bool = False
    spool_disk: Path | None = None  # a tmpfs as large as spool.max_bytes, when given

    def __post_init__(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        self.config = self.home / "agent.yaml"
        self.log = self.home / "agent.log"
        spool = ""
        if self.spool_disk is not None:
            spool = f"spool:\n  dir: {self.spool_disk}\n  max_bytes: {SPOOL_DISK_BYTES}\n"
        self.config.write_text(spool + 
            f"api_url: {self.api_url}\nenrollment_token: {self.token}\n"
            f"state_dir: {self.home / 'state'}\nname: {self.name}\n"
            f"mesh:\n  listen: \"127.0.0.1:{free_port()}\"\n"
            "throughput:\n  listen: \"\"\n"
            "metadata:\n  detect: false\n  provider: local\n  region: loopback\n"
            "  zone: loopback-a\n  subnet: lo\n"
            f"metrics:\n  listen: \"127.0.0.1:{self.metrics_port}\"\n"
            "flush_deadline: 60s\n")

    @property
    def agent_id(self) -> str:
        return str(json.loads((self.home / "state" / "agent.json").read_text())["agent_id"])

    def enroll(self) -> None:
        subprocess.run([str(self.binary), "enroll", "-config", str(self.config)], check=True,
                       capture_output=True, timeout=120)

    def start(self) -> None:
        with open(self.log, "ab") as f:
            self.proc = subprocess.Popen([str(self.binary), "run", "-config", str(self.config)],
                                         stdout=f, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        self.runs += 1

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def metrics(self) -> dict[str, float]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                    timeout=5) as r:
            return parse_metrics(r.read().decode())

    def sigkill(self) -> None:
        """Scrapes the counters, then SIGKILLs: what was measured after the scrape or held in
        memory unbatched dies with the process, and is reported as such."""
        m = self.metrics()
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        measured, dropped, aside = (int(m.get(f"stormwatch_agent_samples_{c}_total:mesh", 0))
                                    for c in ("measured", "dropped", "set_aside"))
        self.killed_runs.append((measured, dropped, aside))

    def stop(self, timeout_s: float = 120) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def final_counts(self) -> list[dict[str, Any]]:
        """Every 'agent stopped' record this agent logged (one per clean stop)."""
        out = []
        for line in self.log.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                rec = json.loads(line)
                if isinstance(rec, dict) and rec.get("msg") == "agent stopped":
                    out.append(rec)
        return out

    def http_5xx(self) -> list[tuple[float, int]]:
        """(time, status) of every answer >= 500 this agent logged."""
        out = []
        for line in self.log.read_text(errors="replace").splitlines():
            m = re.search(r"HTTP (5\d\d)", line)
            if not m:
                continue
            try:
                at = datetime.fromisoformat(json.loads(line)["time"]).timestamp()
            except (ValueError, KeyError):
                continue
            out.append((at, int(m.group(1))))
        return out


# -- the run ---------------------------------------------------------------------------------
@dataclass
class Fault:
    kind: str
    started: float
    ended: float = 0.0
    recovery_s: float = 0.0
    detail: str = ""


class Soak:
    def __init__(self, minutes: float, seed: int, workdir: Path) -> None:
        self.minutes = minutes
        self.rng = random.Random(seed)
        self.dir = workdir
        self.stack: Stack | None = None
        self.receiver: Receiver | None = None
        self.agents: list[Agent] = []
        self.faults: list[Fault] = []
        self.db_down: list[tuple[float, float]] = []  # outage start .. health ok again
        self.http_5xx: list[tuple[float, int, str]] = []
        self.problems: list[str] = []
        self.stopping = False
        self.rule_id = ""
        self.channel_id = ""
        self.extra = 0
        self.spool_disk: Path | None = None
        self.deck: list[str] = []
        self.current = ""
        self.pg_outage_s = (10, 20) if minutes < SHORT_RUN_MIN else (20, 60)

    # -- plumbing ------------------------------------------------------------------------
    def check_stop(self) -> None:
        if self.stopping:
            raise Stopped

    def pause(self, seconds: float) -> None:
        """Time a fault lasts by design (an outage's length, the pace between faults)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.check_stop()
            self.supervise()
            time.sleep(min(0.5, max(0.0, end - time.monotonic())))

    def wait_for(self, what: str, timeout_s: float, cond: Any) -> float:
        """Polls cond until true; returns the seconds it took, raises after timeout_s."""
        t0 = time.monotonic()
        while True:
            self.check_stop()
            self.supervise()
            with contextlib.suppress(OSError, ValueError):
                if cond():
                    return time.monotonic() - t0
            if time.monotonic() - t0 > timeout_s:
                raise RuntimeError(f"timed out after {timeout_s:.0f} s waiting for {what}")
            time.sleep(0.5)

    def api(self, method: str, path: str, body: Any = None, ok: tuple[int, ...] = (200,)
            ) -> Any:
        assert self.stack is not None
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"{self.stack.url}/api/v1{path}", data=data,
                                     method=method, headers={
                                         "Authorization": f"Bearer {self.info['api_key']}",
                                         "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                status, raw = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        if status >= 500:
            self.http_5xx.append((time.time(), status, f"{method} {path}"))
        if status not in ok:
            raise RuntimeError(f"{method} {path}: HTTP {status}: {raw[:300]!r}")
        return json.loads(raw) if raw else None

    def health_ok(self) -> bool:
        assert self.stack is not None
        try:
            with urllib.request.urlopen(f"{self.stack.url}/api/v1/health", timeout=5) as r:
                return bool(json.loads(r.read()).get("ok"))
        except (urllib.error.HTTPError, OSError, ValueError):
            # The health route answers 503 by design while a part is down: not an error.
            return False

    def sigkill(self, name: str) -> list[str]:
        """SIGKILLs a stack process's whole group; returns its command line."""
        assert self.stack is not None
        return self.stack.kill(name)

    def respawn(self, name: str) -> None:
        assert self.stack is not None
        self.stack._spawn(name, self.sigkill(name))
        if name == "api":
            self.wait_for("the API's port", 120, lambda: _port_open(self.stack.port))

    def supervise(self) -> None:
        """Restarts what exited, as `make run` does; a process that may not exit did."""
        if self.stack is not None:
            problem = self.stack.supervise()
            if problem:
                raise RuntimeError(problem)

    def stored_rows(self) -> int:
        assert self.stack is not None
        import psycopg

        conninfo = self.info["database_url"].replace("postgresql+asyncpg://", "postgresql://")
        with psycopg.connect(conninfo, connect_timeout=5) as c:
            row = c.execute("SELECT count(*) FROM mesh_samples WHERE org_id = %s",
                            (self.info["org_id"],)).fetchone()
        return int(row[0]) if row else 0

    def sql(self, query: str, *args: Any) -> list[tuple[Any, ...]]:
        import psycopg

        conninfo = self.info["database_url"].replace("postgresql+asyncpg://", "postgresql://")
        with psycopg.connect(conninfo, connect_timeout=10) as c:
            return list(c.execute(query, args).fetchall())

    def heartbeat_at(self) -> float:
        """When beat last had a task run by a worker (both write one heartbeat)."""
        import redis

        r = redis.Redis.from_url(self.info["redis_url"], socket_timeout=5)
        try:
            value = r.get("stormwatch:heartbeat:worker")
        finally:
            r.close()
        return float(value) if value else 0.0

    def recover(self, fault: Fault, agent: Agent | None = None) -> None:
        """Time from the fault's end until health is ok, beat and a worker ran a task since
        (their heartbeat), new samples are stored and, after an agent's fault, it ships."""
        fault.ended = time.monotonic()
        ended_at = time.time()
        before = self.stored_rows_or(-1)
        self.wait_for(f"health after {fault.kind}", 300, self.health_ok)
        if before < 0:
            before = self.stored_rows()
        self.wait_for(f"samples flowing after {fault.kind}", 300,
                      lambda: self.stored_rows() > before)
        self.wait_for(f"a worker heartbeat after {fault.kind}", 300,
                      lambda: self.heartbeat_at() > ended_at)
        if agent is not None:
            self.wait_for(f"{agent.name} shipping after {fault.kind}", 300, lambda: agent.metrics(
                ).get("stormwatch_agent_samples_shipped_total:mesh", 0) > 0)
        fault.recovery_s = time.monotonic() - fault.ended

    def stored_rows_or(self, default: int) -> int:
        try:
            return self.stored_rows()
        except Exception:  # the database may be starting
            return default

    # -- set-up ---------------------------------------------------------------------------
    def start(self) -> None:
        binary = self.dir / "stormwatch-agent"
        subprocess.run(["go", "build", "-trimpath", "-o", str(binary), "./cmd/stormwatch-agent"],
                       cwd=REPO / "agents", check=True, env={**os.environ, "CGO_ENABLED": "0"})
        # Short leases and retries: a delivery cut by a worker kill resumes within the run.
        os.environ.setdefault("NOTIFY_LEASE_S", "20")
        os.environ.setdefault("NOTIFY_RETRY_BASE_S", "1")
        os.environ.setdefault("NOTIFY_RETRY_MAX_S", "10")
        os.environ["EGRESS_ALLOW"] = "127.0.0.0/8"
        # The faults stop and restart the servers the soak starts: never ones the environment
        # names (a test run's own PostgreSQL or Redis), which the stack would otherwise reuse.
        for name in ("DATABASE_URL", "REDIS_URL"):
            os.environ.pop(name, None)
        self.stack = Stack(self.dir / "stack", free_port(), True, None, False)
        self.info = self.stack.start()
        log(f"stack up at {self.stack.url} (data in {self.dir})")
        self.wait_for("health", 180, self.health_ok)
        self.api("PATCH", "/org", {"mesh_settings": {
            "enabled": True, "rate_hz": MESH_RATE_HZ, "payload_bytes": 64,
            "timeout_ms": MESH_TIMEOUT_MS}})
        self.receiver = Receiver()
        ch = self.api("POST", "/channels", {"name": "soak hook", "kind": "webhook",
                                            "config": {"url": self.receiver.url}}, ok=(201,))
        self.channel_id = ch["id"]
        for i in range(FLEET):
            self.new_agent(f"soak-{i}", binary, spool_disk=self.mount_spool_disk() if i == 0
                           else None)
        for a in self.agents:
            a.start()
        self.binary = binary
        self.wait_for("every agent meshing and shipping", 300, lambda: all(
            a.metrics().get("stormwatch_agent_samples_shipped_total:mesh", 0) > 0
            and a.metrics().get("stormwatch_agent_mesh_connected_peers") == FLEET
            for a in self.agents))
        log(f"{FLEET} agents meshing at {MESH_RATE_HZ} rounds/s")
        # Peers of a killed agent record its rounds as lost: the rule fires, then resolves.
        rule = self.api("POST", "/alert-rules", {
            "name": "soak loss", "severity": "warning", "metric": "mesh_rtt",
            "statistic": "loss_rate", "window_s": RULE_WINDOW_S,
            "condition": {"type": "above", "value": RULE_LOSS_RATE},
            "channel_ids": [self.channel_id]}, ok=(201,))
        self.rule_id = rule["id"]
        # The first window the rule judges: the model starts there too.
        self.rule_from = self.sql("SELECT evaluated_until FROM alert_rules WHERE id = %s",
                                  self.rule_id)[0][0]

    def mount_spool_disk(self) -> Path | None:
        """A disk exactly as large as the agent's spool bound, for the spool-full fault; the
        fault is left out where tmpfs cannot be mounted (not root)."""
        disk = self.dir / "spool-disk"
        disk.mkdir()
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SPOOL_DISK_BYTES}", "tmpfs",
                            str(disk)], capture_output=True, text=True)
        if r.returncode != 0:
            log(f"no spool-disk fault: mounting a tmpfs failed: {r.stderr.strip()}")
            return None
        self.spool_disk = disk
        return disk

    def new_agent(self, name: str, binary: Path, spool_disk: Path | None = None) -> Agent:
        assert self.stack is not None
        a = Agent(name, self.dir / "agents" / name, binary, self.stack.url,
                  self.info["enrollment_token"], spool_disk=spool_disk)
        a.enroll()
        self.agents.append(a)
        return a

    # -- faults -----------------------------------------------------------------------------
    def fault_kill(self, name: str) -> Fault:
        f = Fault(f"kill {name}", time.monotonic())
        self.respawn(name)
        self.recover(f)
        return f

    def fault_redis(self) -> Fault:
        assert self.stack is not None and self.stack.redis is not None
        f = Fault("restart redis", time.monotonic())
        self.stack.redis.stop()
        self.stack.redis.start()
        self.recover(f)
        return f

    def fault_postgres(self) -> Fault:
        assert self.stack is not None and self.stack.pg is not None
        outage = self.rng.uniform(*self.pg_outage_s)
        f = Fault("stop postgres", time.monotonic(), detail=f"{outage:.0f} s")
        t0 = time.time()
        self.stack.pg.stop("fast")
        self.pause(outage)
        self.stack.pg.start()
        try:
            self.recover(f)
        finally:
            self.db_down.append((t0, time.time()))
        return f

    def fault_spool_full(self) -> Fault:
        """The spool agent's disk filled to the last byte, then the API killed until that
        agent drops a batch it cannot spool; the API restarted and the disk freed."""
        assert self.stack is not None and self.spool_disk is not None
        a = next(a for a in self.agents if a.spool_disk is not None)
        f = Fault("spool disk full", time.monotonic(), detail=a.name)
        filler = self.spool_disk / "filler"
        fd = os.open(filler, os.O_CREAT | os.O_WRONLY, 0o600)
        try:
            while os.write(fd, b"\0" * 4096):  # until ENOSPC
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        dropped = a.metrics().get("stormwatch_agent_samples_dropped_total:mesh", 0)
        args = self.sigkill("api")
        try:
            self.wait_for(f"{a.name} to drop what it cannot spool", 120, lambda: a.metrics().get(
                "stormwatch_agent_samples_dropped_total:mesh", 0) > dropped)
        finally:
            filler.unlink()
            self.stack._spawn("api", args)
        self.wait_for("the API's port", 120, lambda: _port_open(self.stack.port))
        self.recover(f, a)
        return f

    def fault_agent_kill(self) -> Fault:
        a = self.rng.choice([a for a in self.agents if a.alive()])
        f = Fault("kill agent", time.monotonic(), detail=a.name)
        a.sigkill()
        # Down for a supervisor's restart delay: its peers' sends fail meanwhile, which the
        # loss rule sees, so every run has alerts firing and resolving.
        down_s = self.rng.uniform(3, 8)
        f.detail += f" down {down_s:.0f} s"
        self.pause(down_s)
        a.start()
        self.recover(f, a)
        return f

    def fault_enroll(self) -> Fault:
        self.extra += 1
        f = Fault("enroll agent", time.monotonic())
        a = self.new_agent(f"soak-extra-{self.extra}", self.binary)
        f.detail = a.name
        a.start()
        self.recover(f, a)
        return f

    def fault_delete(self) -> Fault:
        extra = [a for a in self.agents if a.name.startswith("soak-extra") and a.alive()]
        if not extra:
            # Only agents enrolled during the run are deleted: enroll one to delete.
            self.faults.append(self.fault_enroll())
            extra = [self.agents[-1]]
        a = self.rng.choice(extra)
        f = Fault("delete agent", time.monotonic(), detail=a.name)
        self.api("DELETE", f"/agents/{a.agent_id}", ok=(204,))
        a.deleted = True
        assert a.proc is not None
        # A deleted agent exits by itself with status 3 at its next ingest or config poll.
        self.wait_for(f"{a.name} to exit", 120, lambda: not a.alive())
        if a.proc.returncode != 3:
            self.problems.append(f"deleted {a.name} exited {a.proc.returncode}, not 3")
        self.recover(f)
        return f

    def fault_rules(self) -> Fault:
        """What users do beside a running fleet: a rule made, edited, deleted; a silence on
        the notifying rule for a while, then deleted."""
        f = Fault("rules and silences", time.monotonic())
        r = self.api("POST", "/alert-rules", {
            "name": f"soak p99 {uuid.uuid4().hex[:6]}", "metric": "mesh_rtt",
            "statistic": "p99", "window_s": 60,
            "condition": {"type": "above", "value": 5_000_000}}, ok=(201,))
        self.api("PATCH", f"/alert-rules/{r['id']}", {"condition": {
            "type": "above", "value": 4_000_000}, "channel_ids": [self.channel_id]})
        s = self.api("POST", "/silences", {
            "rule_ids": [self.rule_id], "comment": "soak: a short silence",
            "ends_at": (datetime.now(UTC) + timedelta(minutes=10)).isoformat()}, ok=(201,))
        self.pause(self.rng.uniform(1, 5))
        self.api("DELETE", f"/silences/{s['id']}")
        self.api("DELETE", f"/alert-rules/{r['id']}", ok=(204,))
        self.recover(f)
        return f

    def inject(self) -> Fault:
        """The next fault from a deck holding every kind once, shuffled by the seed: a short
        run still meets each kind, a long one meets each as often as the others."""
        if not self.deck:
            self.deck = ["worker", "beat", "api", "redis", "postgres", "agent", "enroll",
                         "delete", "rules"]
            if self.spool_disk is not None:
                self.deck.append("spool")
            self.rng.shuffle(self.deck)
        kind = self.deck.pop()
        self.current = kind
        if kind in ("worker", "beat", "api"):
            return self.fault_kill(kind)
        return {"redis": self.fault_redis, "postgres": self.fault_postgres,
                "agent": self.fault_agent_kill, "enroll": self.fault_enroll,
                "delete": self.fault_delete, "rules": self.fault_rules,
                "spool": self.fault_spool_full}[kind]()

    def run_faults(self) -> None:
        end = time.monotonic() + self.minutes * 60
        pace_s = 12.0 if self.minutes < SHORT_RUN_MIN else 45.0
        # Leave the last part of the run quiet, so the last fault's effects are counted.
        while time.monotonic() + pace_s < end:
            t0 = time.monotonic()
            f = self.inject()
            self.faults.append(f)
            log(f"{f.kind} {f.detail}: recovered in {f.recovery_s:.1f} s")
            self.pause(max(1.0, min(pace_s - (time.monotonic() - t0),
                                    end - time.monotonic())))
        self.pause(max(0.0, end - time.monotonic()))

    # -- the accounting ----------------------------------------------------------------------
    def finish(self) -> tuple[str, list[str]]:
        assert self.stack is not None and self.receiver is not None
        problems = list(self.problems)
        live = [a for a in self.agents if a.alive()]
        self.wait_for("spools drained", 300, lambda: all(
            a.metrics().get("stormwatch_agent_spool_batches", 1) == 0 for a in live))
        for a in live:
            a.proc.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
        for a in live:
            a.stop()
        # Beat first: the worker then finishes what is queued, and the outbox drains.
        self.stack.stop_process("beat")

        def settled() -> bool:
            undispatched, pending = self.sql(
                "SELECT (SELECT count(*) FROM alert_events e WHERE e.org_id = %s AND NOT EXISTS "
                "(SELECT 1 FROM alert_event_dispatches d WHERE d.event_id = e.id)), "
                "(SELECT count(*) FROM notification_deliveries WHERE org_id = %s "
                "AND state IN ('pending', 'sending'))", self.info["org_id"],
                self.info["org_id"])[0]
            return undispatched == 0 and pending == 0

        self.wait_for("every alert event dispatched and delivered", 300, settled)
        self.stack.stop_process("worker")
        if not settled():
            problems.append("alert events left undispatched after the worker stopped")

        model = self.check_alert_model()
        problems += [f"alert model: {d}" for d in model.disagreements[:20]]

        # Samples: each agent's own counters against the distinct rows stored for it.
        rows = {str(src): (int(n), int(d)) for src, n, d in self.sql(
            "SELECT src_agent_id, count(*), count(DISTINCT (dst_agent_id, round, time)) "
            "FROM mesh_samples WHERE org_id = %s GROUP BY src_agent_id", self.info["org_id"])}
        sent = stored = dup = lost = dropped = aside = discarded = unflushed = kills = 0
        for a in self.agents:
            finals = a.final_counts()
            measured = sum(int(r["mesh_measured"]) for r in finals) + sum(
                k[0] for k in a.killed_runs)
            a_dropped = sum(int(r["mesh_dropped"]) for r in finals) + sum(
                k[1] for k in a.killed_runs)
            a_aside = sum(int(r.get("mesh_set_aside", 0)) for r in finals) + sum(
                k[2] for k in a.killed_runs)
            n, distinct = rows.get(a.agent_id, (0, 0))
            sent += measured
            stored += distinct
            dup += n - distinct
            dropped += a_dropped
            aside += a_aside
            kills += len(a.killed_runs)
            left = int(finals[-1]["spooled_batches_left"]) if finals else 0
            if left and not a.deleted:
                problems.append(f"{a.name}: {left} batches left in its spool")
            if a.deleted:
                # Its spool is deleted with it: what it held is never stored, by design.
                discarded += max(0, measured - a_dropped - a_aside - distinct)
                continue
            residue = measured - a_dropped - a_aside - distinct
            if a.killed_runs:
                # Unbatched samples (up to a batch age, plus one batch in flight) die with
                # a SIGKILLed agent; more than that, or fewer than none, is a loss.
                bound = len(a.killed_runs) * MESH_RATE_HZ * len(rows) * (
                    2 * MAX_BATCH_AGE_MS / 1000 + 2)
                if residue > bound:
                    lost += residue
                    problems.append(f"{a.name}: {residue} samples missing beyond the "
                                    f"{bound:.0f} its {len(a.killed_runs)} SIGKILLs explain")
                else:
                    unflushed += max(0, residue)
            elif residue != 0:
                lost += residue
                problems.append(f"{a.name}: measured {measured}, dropped {a_dropped}, set "
                                f"aside {a_aside}, stored {distinct}: {residue} lost")
            if n != distinct:
                problems.append(f"{a.name}: {n - distinct} duplicated rows")

        # Notifications: every notified transition exactly once at the receiver.
        expected = {(str(aid), kind) for aid, kind in self.sql(
            "SELECT e.alert_id, e.kind FROM alert_events e JOIN alert_event_dispatches d "
            "ON d.event_id = e.id JOIN notification_deliveries nd ON nd.notification_id = "
            "d.notification_id WHERE e.org_id = %s AND d.outcome = 'notified' "
            "AND nd.channel_id = %s", self.info["org_id"], self.channel_id)}
        alerts = self.sql("SELECT count(*) FROM alerts WHERE org_id = %s",
                          self.info["org_id"])[0][0]
        got = self.receiver.by_transition
        missing = expected - set(got)
        n_dup = sum(len(ids) - 1 for ids in got.values())
        unexpected = set(got) - expected
        if missing:
            problems.append(f"notifications missing: {sorted(missing)}")
        if n_dup:
            problems.append("notifications duplicated: " + ", ".join(
                f"{k} x{len(v)}" for k, v in got.items() if len(v) > 1))
        if unexpected:
            problems.append(f"notifications for transitions not recorded: {sorted(unexpected)}")
        failed = self.sql("SELECT count(*) FROM notification_deliveries WHERE org_id = %s AND "
                          "state = 'failed'", self.info["org_id"])[0][0]
        if failed:
            problems.append(f"{failed} notification deliveries failed")

        # HTTP answers >= 500: only 503 while the database was down.
        seen = list(self.http_5xx) + [(t, s, a.name) for a in self.agents
                                      for t, s in a.http_5xx()]
        bad = [(t, s, w) for t, s, w in seen
               if not (s == 503 and any(lo - 1 <= t <= hi + 1 for lo, hi in self.db_down))]
        if bad:
            problems.append("HTTP answers >= 500 outside a database outage (or not 503): "
                            + "; ".join(f"{datetime.fromtimestamp(t, UTC):%H:%M:%S} {s} {w}"
                                        for t, s, w in bad[:20]))
        longest = max((f.recovery_s for f in self.faults), default=0.0)
        line = (f"soak: {self.minutes:g} min, {len(self.faults)} faults, samples sent {sent} "
                f"stored {stored} lost {lost} duplicated {dup}"
                f" (dropped by agents {dropped}, set aside as about deleted peers {aside}, "
                f"discarded with deleted agents {discarded}, "
                f"unflushed at {kills} agent SIGKILLs {unflushed}), "
                f"alerts {alerts} ({model.summary()}), notifications {len(expected)} "
                f"({n_dup} duplicated, {len(missing)} missing), 5xx {len(seen)} "
                f"({'only 503 while the database was down' if not bad else f'{len(bad)} NOT'}),"
                f" longest recovery {longest:.1f} s, restarted after exiting by themselves "
                f"{self.crashes()}")
        return line, problems

    def crashes(self) -> str:
        """The stack's processes that exited unasked and were restarted (a library's crash on
        a lost connection, say): not a failure, since deployments restart them too, but said."""
        assert self.stack is not None
        names = [name for name, _code, _at in self.stack.restarts]
        if not names:
            return "0"
        return f"{len(names)} (" + ", ".join(
            f"{n} x{names.count(n)}" for n in dict.fromkeys(names)) + ")"

    def check_alert_model(self) -> ModelCheck:
        """The loss rule's states, window by window, against soak_model's reference (run
        after the worker stopped, so no evaluation moves on meanwhile). Pairs of deleted
        agents are left out: their samples went with them."""
        org = self.info["org_id"]
        (until,) = self.sql("SELECT evaluated_until FROM alert_rules WHERE id = %s",
                            self.rule_id)[0]
        start, end = int(self.rule_from.timestamp()), int(until.timestamp())
        gone = {a.agent_id for a in self.agents if a.deleted}
        windows: dict[tuple[str, int], tuple[int, int]] = {}
        source_of: dict[str, str] = {}
        for src, dst, payload, ws, n, failed in self.sql(
                "SELECT src_agent_id, dst_agent_id, payload_bytes, "
                "(floor(extract(epoch FROM time) / %s) * %s)::bigint, count(*), "
                "count(*) FILTER (WHERE status <> 0) FROM mesh_samples WHERE org_id = %s "
                "AND time >= %s AND time < %s GROUP BY 1, 2, 3, 4", RULE_WINDOW_S,
                RULE_WINDOW_S, org, self.rule_from, until):
            if str(src) in gone or str(dst) in gone:
                continue
            key = f"{src}|{dst}|{payload}"
            windows[(key, int(ws))] = (int(n), int(failed))
            source_of[key] = str(src)
        events = []
        for key, kind, at, early in self.sql(
                "SELECT a.group_key, e.kind, extract(epoch FROM e.at)::float8, "
                "coalesce((e.evidence->>'decided_early')::boolean, false) FROM alert_events e "
                "JOIN alerts a ON a.id = e.alert_id WHERE e.rule_id = %s", self.rule_id):
            src, dst = key.split("|")[:2]
            if src in gone or dst in gone:
                continue
            events.append((key, kind, at, bool(early)))
            source_of.setdefault(key, src)
        # Only a batch at least this late can hold samples of a window judged before it.
        late = [(str(a), r, o) for a, r, o in self.sql(
            "SELECT agent_id, extract(epoch FROM received_at)::float8, "
            "extract(epoch FROM oldest_sample_at)::float8 FROM ingest_batches WHERE org_id = %s "
            "AND received_at - oldest_sample_at >= make_interval(secs => %s)", org,
            SETTLE_S - COMMIT_MARGIN_S)]
        return check_loss_rule(start=start, end=end, window_s=RULE_WINDOW_S,
                               threshold=RULE_LOSS_RATE, settle_s=SETTLE_S, windows=windows,
                               events=events, late_batches=late, source_of=source_of)

    def teardown(self) -> None:
        for a in self.agents:
            if a.alive():
                assert a.proc is not None
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(a.proc.pid, signal.SIGKILL)
                a.proc.wait()
        if self.receiver is not None:
            self.receiver.close()
        if self.stack is not None:
            self.stack.stop()
        if self.spool_disk is not None:
            subprocess.run(["umount", "-l", str(self.spool_disk)], capture_output=True)


def _port_open(port: int) -> bool:
    import socket

    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=float(os.environ.get("SOAK_MINUTES", 30)))
    p.add_argument("--seed", type=int, default=None, help="the injector's seed (random if omitted)")
    p.add_argument("--keep", action="store_true", help="keep the data and logs directory")
    args = p.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    workdir = Path(tempfile.mkdtemp(prefix="stormwatch-soak-"))
    os.chmod(workdir, 0o755)  # postgres must traverse into its data dir
    log(f"seed {seed}, {args.minutes:g} minutes, logs in {workdir}")
    soak = Soak(args.minutes, seed, workdir)

    def on_signal(_signum: int, _frame: object) -> None:
        soak.stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    code = 1
    try:
        soak.start()
        soak.run_faults()
        line, problems = soak.finish()
        print(line, flush=True)
        for problem in problems:
            print(f"soak: FAILED: {problem}", flush=True)
        code = 1 if problems else 0
    except Stopped:
        log("interrupted")
        code = 130
    except Exception as exc:  # a fault the stack did not recover from is a finding
        print(f"soak: FAILED: {exc}", flush=True)
        print(f"soak: during fault {len(soak.faults) + 1} ({soak.current}), after "
              f"{len(soak.faults)} recovered from", flush=True)
    finally:
        log("tearing down")
        soak.teardown()
        if code == 0 and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            log(f"logs kept in {workdir}")
    return code


if __name__ == "__main__":
    sys.exit(main())
