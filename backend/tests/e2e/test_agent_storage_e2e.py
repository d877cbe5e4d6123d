"""The real agent probing object storage: moto (S3), Azurite (Azure Blob) and
fake-gcs-server (GCS) started by scripts/emulators, targets configured through the REST
API, and the agent's samples landing in storage_samples; its objects are gone afterwards."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, text

from stormwatch.devtools.services import free_port
from tests.conftest import REPO, ApiServer

AGENTS_DIR = REPO / "agents"
EMULATORS = REPO / "scripts" / "emulators"
# Azurite's well-known development account (published by Azurite; not a secret).
AZ_ACCOUNT = "devstoreaccount1"
AZ_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
BINARY_SIZES = [1024, 10240, 102400, 1048576]
TEXT_SIZES = [1024, 102400]
LEVELS = [1, 2, 4]
BUCKET = "sw-e2e"

pytestmark = pytest.mark.skipif(shutil.which("go") is None,
                                reason="the agent needs the Go toolchain")


def wait_until(what: str, timeout_s: float, cond: Callable[[], bool]) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


def azure_request(method: str, base: str, path: str, params: dict[str, str]) -> httpx.Response:
    """A Shared Key signed Blob request (the emulator checks signatures as Azure does)."""
    headers = {"x-ms-date": format_datetime(datetime.now(UTC), usegmt=True),
               "x-ms-version": "2021-08-06"}
    canon_headers = "".join(f"{k}:{v}\n" for k, v in sorted(headers.items()))
    canon_res = f"/{AZ_ACCOUNT}/{AZ_ACCOUNT}{path}" + "".join(
        f"\n{k}:{v}" for k, v in sorted(params.items()))
    to_sign = "\n".join([method, *[""] * 11, canon_headers + canon_res])
    sig = base64.b64encode(hmac.new(base64.b64decode(AZ_KEY), to_sign.encode(),
                                    hashlib.sha256).digest()).decode()
    headers["Authorization"] = f"SharedKey {AZ_ACCOUNT}:{sig}"
    return httpx.request(method, f"{base}{path}", params=params, headers=headers, timeout=10)


@pytest.fixture(scope="module")
def emulators() -> Iterator[dict[str, str]]:
    """Endpoint per provider; a provider whose emulator cannot start is left out."""
    rundir = Path(tempfile.mkdtemp(prefix="stormwatch-e2e-emulators-"))
    endpoints: dict[str, str] = {}
    problems: list[str] = []
    try:
        for provider, name in (("s3", "moto"), ("azure", "azurite"), ("gcs", "fakegcs")):
            r = subprocess.run([str(EMULATORS / "start.sh"), name, str(rundir)],
                               capture_output=True, text=True, timeout=900)
            if r.returncode == 0:
                endpoints[provider] = r.stdout.strip()
            else:
                problems.append(f"{name}: {r.stderr[-500:]}")
        if not endpoints:
            pytest.skip("no storage emulator could be installed or started: "
                        + "; ".join(problems))
        yield endpoints
    finally:
        subprocess.run([str(EMULATORS / "stop.sh"), str(rundir)], check=False)
        shutil.rmtree(rundir, ignore_errors=True)


def create_bucket(provider: str, endpoint: str) -> None:
    if provider == "s3":
        r = httpx.put(f"{endpoint}/{BUCKET}", timeout=10)  # moto without IAM checks
    elif provider == "azure":
        r = azure_request("PUT", endpoint, f"/{BUCKET}", {"restype": "container"})
    else:
        r = httpx.post(f"{endpoint}/storage/v1/b", params={"project": "stormwatch-e2e"},
                       json={"name": BUCKET}, timeout=10)
    assert r.status_code in (200, 201), r.text


def objects_left(provider: str, endpoint: str, prefix: str) -> str:
    """The bucket listing under prefix, empty when nothing is left."""
    if provider == "s3":
        body = httpx.get(f"{endpoint}/{BUCKET}", params={"list-type": "2", "prefix": prefix},
                         timeout=10).text
        return body if "<Key>" in body else ""
    if provider == "azure":
        body = azure_request("GET", endpoint, f"/{BUCKET}", {
            "restype": "container", "comp": "list", "prefix": prefix}).text
        return body if "<Blob>" in body else ""
    items = httpx.get(f"{endpoint}/storage/v1/b/{BUCKET}/o", params={"prefix": prefix},
                      timeout=10).json().get("items", [])
    return str(items) if items else ""


def target_body(provider: str, endpoint: str) -> dict[str, Any]:
    creds: dict[str, Any] = {
        "s3": {"source": "inline", "access_key_id": "AKIAE2E", "secret_access_key": "e2e"},
        "azure": {"source": "inline", "account_name": AZ_ACCOUNT, "account_key": AZ_KEY},
        "gcs": {"source": "none"},
    }[provider]
    return {
        "name": f"e2e {provider}", "provider": provider, "endpoint": endpoint,
        "region": "us-east-1" if provider == "s3" else "", "bucket": BUCKET,
        "path_style": provider == "s3", "interval_s": 3600, "op_timeout_ms": 20000,
        "contents": ["binary", "text"],
        "sizes_bytes": {"binary": BINARY_SIZES, "text": TEXT_SIZES},
        "variants": {
            "gzip9": {"enabled": True},
            "replication": {"enabled": True, "copies": 3, "sizes_bytes": [1024, 102400]},
            "consistency": {"enabled": True, "poll_interval_ms": 5},
            "concurrency": {"enabled": True, "levels": LEVELS, "size_bytes": 262144},
        },
        "assign_all": True, "credentials": creds,
    }


def test_the_agent_measures_every_provider_and_its_samples_reach_the_database(
        emulators: dict[str, str], api_server: ApiServer, make_org: Any,
        db: Engine, tmp_path: Path) -> None:
    org = make_org()
    h = {"Authorization": f"Bearer {org.api_key}"}
    targets: dict[str, str] = {}
    with api_server.client() as api:
        assert api.patch("/api/v1/org", headers=h,
                         json={"mesh_settings": {"enabled": False}}).status_code == 200
        for provider, endpoint in emulators.items():
            create_bucket(provider, endpoint)
            r = api.post("/api/v1/storage-targets", headers=h,
                         json=target_body(provider, endpoint))
            assert r.status_code == 201, r.text
            targets[provider] = r.json()["id"]

    binary = tmp_path / "stormwatch-agent"
    subprocess.run(["go", "build", "-trimpath", "-o", str(binary), "./cmd/stormwatch-agent"],
                   cwd=AGENTS_DIR, check=True, env={**os.environ, "CGO_ENABLED": "0"})
    home = tmp_path / "agent"
    home.mkdir()
    config = home / "agent.yaml"
    config.write_text(
        f"api_url: {api_server.base_url}\n"
        f"enrollment_token: {org.enrollment_token}\n"
        f"state_dir: {home / 'state'}\n"
        "name: e2e-storage\n"
        f"mesh:\n  listen: \"127.0.0.1:{free_port()}\"\n"
        "metadata:\n  detect: false\n  provider: local\n  region: loopback\n"
        "  zone: loopback-a\n  subnet: lo\n"
        f"metrics:\n  listen: \"127.0.0.1:{free_port()}\"\n"
        "flush_deadline: 20s\n")
    log = home / "agent.log"
    with open(log, "ab") as logf:
        proc = subprocess.Popen([str(binary), "run", "-config", str(config)],
                                stdout=logf, stderr=subprocess.STDOUT)
    try:
        def count(sql: str, **params: Any) -> int:
            with db.connect() as c:
                return int(c.execute(text(sql), {"o": org.org_id, **params}).scalar() or 0)

        def complete(tid: str) -> bool:
            # The concurrency run at the last level closes a cycle.
            return count("SELECT count(*) FROM storage_samples WHERE org_id = :o AND "
                         "target_id = :t AND variant = 'concurrent' AND concurrency = :n",
                         t=tid, n=LEVELS[-1]) == LEVELS[-1]

        try:
            wait_until("a full cycle of every target in the database", 240,
                       lambda: all(complete(t) for t in targets.values()))
        except AssertionError:
            raise AssertionError(log.read_text()[-4000:]) from None
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)

    with db.connect() as c:
        agent_id = c.execute(text("SELECT id FROM agents WHERE org_id = :o"),
                             {"o": org.org_id}).scalar()
        for provider, tid in targets.items():
            rows = c.execute(text(
                "SELECT op, variant, content, size_bytes, stored_bytes, copies, concurrency, "
                "latency_us, ttfb_us, rtt_us, bytes_per_s, status FROM storage_samples "
                "WHERE org_id = :o AND target_id = :t"), {"o": org.org_id, "t": tid}).all()
            failed = [r for r in rows if r.status != 0]
            assert not failed, (provider, failed)
            plain = {(r.op, r.content, r.size_bytes) for r in rows if r.variant == "plain"}
            for size in BINARY_SIZES:
                assert {("put", "binary", size), ("get", "binary", size)} <= plain, provider
            for size in TEXT_SIZES:
                assert {("put", "text", size), ("get", "text", size)} <= plain, provider
            assert all(r.rtt_us is not None for r in rows if r.op in ("put", "get")), provider
            gz = [r for r in rows if r.variant == "gzip9" and r.content == "text"]
            assert gz and all(r.stored_bytes < r.size_bytes for r in gz), provider
            assert {r.copies for r in rows if r.op == "get_first"} == {1, 2, 3}, provider
            assert {r.op for r in rows} >= {"read_after_write", "list_after_write", "rtt"}
            conc = [r for r in rows if r.variant == "concurrent" and r.op == "get"]
            assert {r.concurrency for r in conc} == set(LEVELS)
            assert all(r.bytes_per_s and r.bytes_per_s > 0 for r in conc), provider
            left = objects_left(provider, emulators[provider],
                                f"stormwatch-probe/{agent_id}/")
            assert not left, (provider, left)
