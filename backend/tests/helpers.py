"""Building blocks for tests: enrolling agents and making columnar batches."""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson
from sqlalchemy import Engine

from stormwatch.devtools.services import wait_for_port
from stormwatch.services import rollups


@dataclass
class EnrolledAgent:
    agent_id: str
    token: str
    name: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def enroll(api: httpx.Client, enrollment_token: str, name: str, **metadata: str) -> EnrolledAgent:
    r = api.post("/api/v1/agents/enroll", json={
        "enrollment_token": enrollment_token, "name": name, "agent_version": "test",
        "mesh_address": f"127.0.0.1:{7000 + abs(hash(name)) % 1000}", "metadata": metadata})
    assert r.status_code == 201, r.text
    body = r.json()
    return EnrolledAgent(agent_id=body["agent_id"], token=body["agent_token"], name=name)


def now_us() -> int:
    return time.time_ns() // 1000


def mesh_batch(src: EnrolledAgent, peers: list[str], rounds: int, start_us: int | None = None,
               rtt_us: int = 400, batch_id: str | None = None) -> dict[str, Any]:
    start_us = start_us or now_us() - rounds * 10_000 - 1_000_000
    cols: dict[str, list[Any]] = {"time_us": [], "peer_idx": [], "round": [],
                                  "payload_bytes": [], "rtt_us": [], "status": []}
    for r in range(rounds):
        for i in range(len(peers)):
            cols["time_us"].append(start_us + r * 10_000)
            cols["peer_idx"].append(i)
            cols["round"].append(r)
            cols["payload_bytes"].append(1024)
            lost = (r + i) % 50 == 49
            cols["rtt_us"].append(None if lost else rtt_us + (r * 7 + i * 13) % 100)
            cols["status"].append(1 if lost else 0)
    return {"batch_id": batch_id or str(uuid.uuid4()), "agent_id": src.agent_id,
            "mesh": {"peers": peers, **cols}}


def post_batch(api: httpx.Client, agent: EnrolledAgent, batch: dict[str, Any],
               gzip_body: bool = True) -> httpx.Response:
    raw = orjson.dumps(batch)
    headers = {**agent.headers, "Content-Type": "application/json"}
    if gzip_body:
        raw = gzip.compress(raw)
        headers["Content-Encoding"] = "gzip"
    return api.post("/api/v1/ingest/batches", content=raw, headers=headers)


def roll_up_mesh(db: Engine, org_id: uuid.UUID, start: datetime, hours: int,
                 levels: tuple[int, ...] = (300,)) -> None:
    """Rolls `hours` of an org's mesh samples from `start` into minutes and each coarser level,
    as the worker would."""
    end = start + timedelta(hours=hours)
    with db.begin() as conn:
        rollups.roll_up_minutes(conn, "mesh", start, end, org_id)
        for level_s in levels:
            # Every bucket the span touches: a day's bucket starts at midnight, so hours
            # across midnight UTC fall into two (the test failed between 01:00 and 03:00).
            first = rollups.floor_time(start, level_s)
            n = -(-int((end - first).total_seconds()) // level_s)
            rollups.roll_up_coarse(conn, "mesh", level_s, [
                (org_id, first + timedelta(seconds=level_s * i)) for i in range(n)])


def stop_group(proc: subprocess.Popen[bytes], grace_s: float,
               sig: int = signal.SIGTERM) -> None:
    """Signal the process's group (SIGTERM), SIGKILL it if it has not exited after grace_s."""
    os.killpg(proc.pid, sig)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@contextmanager
def serving(cmd: list[str], env: Mapping[str, str], cwd: Path, log: Path, port: int,
            ready_s: float = 90) -> Iterator[subprocess.Popen[bytes]]:
    """A server process in its own group, logging to `log`, yielded once it listens on port
    and stopped (with its children) after."""
    with open(log, "ab") as logf:
        proc = subprocess.Popen(cmd, env=dict(env), cwd=cwd, stdout=logf,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for_port(port, ready_s, proc)
        yield proc
    finally:
        stop_group(proc, 30)


def heavy_tailed(rng: np.random.Generator, n: int, median_us: float) -> np.ndarray:
    """Round trips with a lognormal body around median_us and rare 1000x spikes."""
    v = rng.lognormal(np.log(median_us), 0.4, n)
    v[rng.random(n) < 0.0005] *= 1000.0  # rare 1000x spikes
    return np.maximum(np.round(v), 1).astype(np.int64)
