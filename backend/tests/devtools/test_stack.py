"""The local runner behind `make run`: everything answers, health is green, and an
interrupt stops every process it started."""

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import psutil
import pytest

REPO = Path(__file__).resolve().parents[3]


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


# Two full starts and stops: minutes on a loaded 2-core machine (two xdist workers).
@pytest.mark.timeout(420)
def test_the_stack_runs_green_and_an_interrupt_leaves_no_process_behind():
    data = Path(tempfile.mkdtemp(prefix="stormwatch-stack-test-"))
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env["PYTHONPATH"] = str(REPO / "backend")
    proc = subprocess.Popen(
        [sys.executable, "-m", "stormwatch.devtools.stack", "--data-dir", str(data),
         "--with-worker"], stdout=subprocess.PIPE, env=env, cwd=REPO, text=True)
    try:
        assert proc.stdout is not None
        info = json.loads(proc.stdout.readline())
        assert info["health_ok"] is True
        health = httpx.get(f"{info['url']}/api/v1/health", timeout=10).json()
        assert all(health[c]["ok"] for c in ("database", "redis", "worker", "beat"))
        r = httpx.post(f"{info['url']}/api/v1/auth/login",
                       json={"email": info["email"], "password": info["password"]})
        assert r.status_code == 200
        started = descendants(proc.pid)
        # Besides the API, worker and beat there are PostgreSQL's and Redis's own processes,
        # which are not children (pg_ctl daemonises), so look for them by data dir too.
        pg_pid = int((data / "pg" / "postmaster.pid").read_text().split()[0])
        started.append(psutil.Process(pg_pid))
        assert len(started) >= 4
        proc.send_signal(signal.SIGINT)
        assert proc.wait(150) == 0
        gone, alive = psutil.wait_procs(started, timeout=20)
        assert alive == [], [p.info if hasattr(p, "info") else p for p in alive]
        # Running again reuses the data: same demo login.
        proc = subprocess.Popen(
            [sys.executable, "-m", "stormwatch.devtools.stack", "--data-dir", str(data)],
            stdout=subprocess.PIPE, env=env, cwd=REPO, text=True)
        assert proc.stdout is not None
        again = json.loads(proc.stdout.readline())
        assert again["email"] == info["email"] and again["password"] == info["password"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(150) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def _stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM first: the stack then stops PostgreSQL, Redis and the API it started."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(150)
        except subprocess.TimeoutExpired:
            proc.kill()


def _start_stack(data: Path, env: dict[str, str], stderr_path: Path) -> subprocess.Popen[str]:
    with stderr_path.open("w") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "stormwatch.devtools.stack", "--data-dir", str(data)],
            stdout=subprocess.PIPE, stderr=err, env=env, cwd=REPO, text=True)


@pytest.mark.timeout(300)
def test_host_binds_the_api_where_told_and_warns_when_it_is_plain_http_off_loopback():
    data = Path(tempfile.mkdtemp(prefix="stormwatch-stack-host-"))
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "REDIS_URL", "PUBLIC_BASE_URL")}
    env["PYTHONPATH"] = str(REPO / "backend")
    # Every address of the machine: other hosts' agents reach it; the test stays on loopback
    # but uses an address other than 127.0.0.1, which a loopback-only bind would refuse.
    env["HOST"] = "0.0.0.0"
    stderr_path = data.parent / f"{data.name}.stderr"
    proc = _start_stack(data, env, stderr_path)
    try:
        assert proc.stdout is not None
        info = json.loads(proc.stdout.readline())
        port = int(info["url"].rsplit(":", 1)[1])
        r = httpx.post(f"http://127.0.0.2:{port}/api/v1/auth/login", timeout=30,
                       json={"email": info["email"], "password": info["password"]})
        assert r.status_code == 200, r.text
        warning = stderr_path.read_text()
        assert "HOST=0.0.0.0" in warning and "TLS" in warning, warning
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(150) == 0
    finally:
        _stop(proc)


@pytest.mark.timeout(120)
def test_a_host_that_is_not_an_address_stops_the_stack_naming_host():
    data = Path(tempfile.mkdtemp(prefix="stormwatch-stack-badhost-"))
    env = {**os.environ, "PYTHONPATH": str(REPO / "backend"), "HOST": "not an address!"}
    stderr_path = data.parent / f"{data.name}.stderr"
    proc = _start_stack(data, env, stderr_path)
    try:
        assert proc.wait(100) != 0
        assert "HOST" in stderr_path.read_text()
    finally:
        _stop(proc)
