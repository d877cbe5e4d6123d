"""`make bench-alerts`: how fast a spike becomes a Slack message, and what one evaluation
cycle costs on a fleet.

Starts its own PostgreSQL, Redis, API (uvicorn), Celery worker and beat, as `make run`
does, and a local HTTP server standing in for a Slack incoming-webhook URL.

- spike -> notify: 4 agents post mesh samples (10 rounds/s to every peer) through the ingest
  API once a second. 12 p99 rules (> 20 ms over 30 s windows, 1 of 1), one per ordered pair,
  notify the Slack channel. Each pair gets one 6 s spike of 80 ms replies; the spikes start
  5 s apart, so they fall at every phase of the 30 s windows. A spike's latency is from its
  first slow sample's timestamp to the Slack message arriving at the server: it includes the
  agent's one-second shipping, window closing, evaluation (every 10 s on beat), dispatch and
  the HTTP post.
- eval: one evaluation cycle of 200 rules over a 24-agent fleet (576 ordered pairs,
  self-loops included) at 10 rounds/s, timed by evaluation's own bench
  (bench/alerts/eval_cycle.py: the worker's evaluate_cycle, median of 3).

Prints progress on stderr and one line on stdout:
`alerts: spike->notify p50 <s> s, p95 <s> s, eval <n> rules x <m> series <ms> ms`
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import orjson
import psycopg

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "backend"))

from stormwatch.devtools.bootstrap import create_org_sync
from stormwatch.devtools.services import (
    Throwaway,
    free_port,
    throwaway_servers,
    wait_for_port,
)

RATE_HZ = 10
NORMAL_US = 400
SPIKE_US = 80_000
THRESHOLD_US = 20_000
SPIKE_S = 6
STAGGER_S = 5


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class SlackStandIn:
    """Records when each message arrives, by its text."""

    def __init__(self) -> None:
        self.arrivals: list[tuple[float, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                outer.arrivals.append((time.time(), json.loads(body)["text"]))
                self.send_response(200)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/services/T/B/x"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


class Stack:
    """API, worker and beat over throwaway servers."""

    def __init__(self, servers: Throwaway) -> None:
        assert servers.redis is not None
        self.tmp, self.pg, self.redis = servers.tmp, servers.pg, servers.redis
        self.procs: list[subprocess.Popen[bytes]] = []
        self.port = free_port()

    def start(self) -> None:
        self.env = {**os.environ, "DATABASE_URL": self.pg.url, "REDIS_URL": self.redis.url,
                    "SECRET_KEY": "bench-secret-key-not-for-production",
                    "PYTHONPATH": str(REPO / "backend"), "PYTHONUNBUFFERED": "1",
                    # The stand-in Slack receiver listens on loopback.
                    "EGRESS_ALLOW": "127.0.0.0/8"}
        os.environ.update({k: self.env[k] for k in ("DATABASE_URL", "REDIS_URL",
                                                    "SECRET_KEY")})
        py = [sys.executable, "-m"]
        self._spawn("api", [*py, "uvicorn", "stormwatch.main:app", "--host", "127.0.0.1",
                            "--port", str(self.port), "--log-level", "warning",
                            "--no-access-log"])
        wait_for_port(self.port, 60, self.procs[-1])
        self._spawn("worker", [*py, "celery", "-A", "stormwatch.worker.app", "worker",
                               "--loglevel", "WARNING", "--concurrency", "2",
                               "--without-gossip", "--without-mingle"])
        self._spawn("beat", [*py, "celery", "-A", "stormwatch.worker.app", "beat",
                             "--loglevel", "WARNING", "--schedule",
                             str(self.tmp / "beat-schedule")])

    def _spawn(self, name: str, args: list[str]) -> None:
        log = open(self.tmp / f"{name}.log", "ab")  # noqa: SIM115 - lives with the process
        self.procs.append(subprocess.Popen(args, env=self.env, cwd=REPO, stdout=log,
                                           stderr=subprocess.STDOUT, start_new_session=True))

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)


def enroll(api: httpx.Client, token: str, name: str, region: str) -> str:
    r = api.post("/api/v1/agents/enroll", json={
        "enrollment_token": token, "name": name, "agent_version": "bench",
        "mesh_address": f"127.0.0.1:{free_port()}",
        "metadata": {"provider": "aws", "region": region, "zone": f"{region}a"}})
    r.raise_for_status()
    body = r.json()
    return f"{body['agent_id']}:{body['agent_token']}"


class Feeder(threading.Thread):
    def __init__(self, base_url: str, agents: list[tuple[str, str]]) -> None:
        super().__init__(daemon=True)
        self.base_url = base_url
        self.agents = agents
        self.spikes: dict[tuple[str, str], tuple[float, float]] = {}
        self.first_slow: dict[tuple[str, str], float] = {}
        self.stop_flag = threading.Event()
        self.round = 0

    def run(self) -> None:
        last = time.time() - 1
        with httpx.Client(base_url=self.base_url, timeout=30) as client:
            while not self.stop_flag.is_set():
                now = time.time()
                for aid, token in self.agents:
                    self._post(client, aid, token, last, now)
                last = now
                self.stop_flag.wait(max(0.0, 1.0 - (time.time() - now)))

    def _post(self, client: httpx.Client, aid: str, token: str, t0: float, t1: float) -> None:
        peers = [a for a, _ in self.agents if a != aid]
        cols: dict[str, list[Any]] = {k: [] for k in ("time_us", "peer_idx", "round",
                                                      "payload_bytes", "rtt_us", "status")}
        t, r = t0, self.round
        while t < t1:
            for i, dst in enumerate(peers):
                lo, hi = self.spikes.get((aid, dst), (0.0, 0.0))
                slow = lo <= t < hi
                if slow:
                    self.first_slow.setdefault((aid, dst), t)
                cols["time_us"].append(int(t * 1e6))
                cols["peer_idx"].append(i)
                cols["round"].append(r)
                cols["payload_bytes"].append(1024)
                cols["rtt_us"].append(SPIKE_US if slow else NORMAL_US + r % 13)
                cols["status"].append(0)
            r += 1
            t += 1 / RATE_HZ
        self.round = r
        body = gzip.compress(orjson.dumps({"batch_id": str(uuid.uuid4()), "agent_id": aid,
                                           "mesh": {"peers": peers, **cols}}))
        resp = client.post("/api/v1/ingest/batches", content=body, headers={
            "Authorization": f"Bearer {token}", "Content-Type": "application/json",
            "Content-Encoding": "gzip"})
        if resp.status_code >= 300:
            say(f"ingest answered {resp.status_code}: {resp.text[:200]}")


def spike_to_notify(stack: Stack, base_url: str) -> list[float]:
    org = create_org_sync(stack.pg.url, "Bench spikes", "bench-spikes@example.test",
                          password="bench password 1")
    h = {"Authorization": f"Bearer {org.api_key}"}
    slack = SlackStandIn()
    api = httpx.Client(base_url=base_url, timeout=30)
    regions = ["us-east-1", "eu-west-1", "ap-south-1", "sa-east-1"]
    creds = [enroll(api, org.enrollment_token, f"bench-{i}", r) for i, r in enumerate(regions)]
    agents = [(c.split(":")[0], c.split(":")[1]) for c in creds]
    feeder = Feeder(base_url, agents)
    feeder.start()
    ch = api.post("/api/v1/channels", headers=h, json={
        "name": "slack", "kind": "slack", "config": {"url": slack.url}})
    ch.raise_for_status()
    pairs = [(a, b) for a, _ in agents for b, _ in agents if a != b]
    names: dict[tuple[str, str], str] = {}
    time.sleep(3)  # the first batches create the pairs the rules' scopes name
    for i, (a, b) in enumerate(pairs):
        name = f"pair {i:02d}"
        r = api.post("/api/v1/alert-rules", headers=h, json={
            "name": name, "severity": "critical", "metric": "mesh_rtt", "statistic": "p99",
            "window_s": 30, "condition": {"type": "above", "value": THRESHOLD_US},
            "x": 1, "y": 1, "n": 1, "m": 1, "scope": {"src": [a], "dst": [b]},
            "channel_ids": [ch.json()["id"]]})
        if r.status_code != 201:
            raise SystemExit(f"rule not created: {r.status_code} {r.text}")
        names[(a, b)] = name
    # Normal traffic for a minute first: the rules start on clean windows.
    time.sleep(60)
    start = time.time() + 1
    for i, p in enumerate(pairs):
        lo = start + i * STAGGER_S
        feeder.spikes[p] = (lo, lo + SPIKE_S)
    say(f"{len(pairs)} spikes, {STAGGER_S} s apart, from {datetime.now(UTC):%H:%M:%S}")
    deadline = start + len(pairs) * STAGGER_S + 180
    latencies: dict[tuple[str, str], float] = {}
    while time.time() < deadline and len(latencies) < len(pairs):
        for at, text in list(slack.arrivals):
            for p, name in names.items():
                if p in latencies or p not in feeder.first_slow:
                    continue
                if text == f"[FIRING] critical: {name}":
                    latencies[p] = at - feeder.first_slow[p]
                    say(f"  {name}: {latencies[p]:.1f} s")
        time.sleep(0.2)
    feeder.stop_flag.set()
    feeder.join(10)
    api.close()
    if len(latencies) < len(pairs):
        raise SystemExit(f"only {len(latencies)} of {len(pairs)} spikes were told; see "
                         f"{stack.tmp}/worker.log")
    # Where the time goes: detection (first slow sample -> firing event written) and
    # delivery (event written -> message at Slack).
    told_at = {text: at for at, text in slack.arrivals}
    with psycopg.connect(f"host=127.0.0.1 port={stack.pg.port} user=stormwatch "
                         "dbname=stormwatch") as conn:
        written = dict(conn.execute(
            "SELECT r.name, extract(epoch FROM e.created_at) FROM alert_events e "
            "JOIN alert_rules r ON r.id = e.rule_id WHERE e.kind = 'firing' "
            "AND r.org_id = %s", (org.org_id,)).fetchall())
    detect = [float(written[n]) - feeder.first_slow[p] for p, n in names.items()]
    deliver = [told_at[f"[FIRING] critical: {n}"] - float(written[n]) for n in names.values()]
    say(f"detection p50 {statistics.median(detect):.1f} s (max {max(detect):.1f}), "
        f"delivery p50 {statistics.median(deliver):.2f} s (max {max(deliver):.2f})")
    return list(latencies.values())


def eval_cycle(stack: Stack) -> tuple[int, int, float]:
    """Evaluation's own bench of one cycle (eval_cycle.py beside this file) on this stack's
    database: its fleet, samples and rules in an org of their own."""
    from eval_cycle import run

    res = run(stack.pg.url, rules=200, agents=24, repeats=3)
    say(f"eval cycles: {[round(t) for t in res['runs_ms']]} ms, {res['series_evaluated']} "
        f"series evaluated, {res['events']} events")
    return int(res["rules"]), int(res["series"]), float(res["eval_ms"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = p.parse_args()
    with throwaway_servers("stormwatch-bench-alerts-", with_redis=True,
                           keep=args.keep) as servers:
        stack = Stack(servers)
        try:
            stack.start()
            base_url = f"http://127.0.0.1:{stack.port}"
            say(f"stack up in {servers.tmp}")
            lat = spike_to_notify(stack, base_url)
            n_rules, n_series, ms = eval_cycle(stack)
        finally:
            stack.stop()
    lat.sort()
    p95 = lat[math.ceil(0.95 * len(lat)) - 1]  # nearest rank: no interpolation flatters it
    print(f"alerts: spike->notify p50 {statistics.median(lat):.1f} s, p95 {p95:.1f} s, "
          f"eval {n_rules} rules x {n_series} series {ms:.0f} ms")


if __name__ == "__main__":
    main()
