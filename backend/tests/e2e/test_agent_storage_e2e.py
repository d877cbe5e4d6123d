"""The real agent probing object storage: moto (S3), Azurite (Azure Blob) and
fake-gcs-server (GCS) started by scripts/emulators, targets configured through the REST
API with seed 000's default sizes, and the agent's samples landing in storage_samples; its
objects are gone afterwards. The agent is the release build, whose size is checked too."""

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
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from email.utils import format_datetime
from pathlib import Path
from typing import Any, NoReturn

import httpx
import pytest
from sqlalchemy import Engine, text

from stormwatch.devtools.services import free_port
from tests.conftest import REPO, ApiServer
from tests.e2e.agents import agent_config, wait_until

AGENTS_DIR = REPO / "agents"
EMULATORS = REPO / "scripts" / "emulators"
# scripts/test.sh sets it: there an emulator (or Go) that is unavailable fails the test.
REQUIRE_EMULATORS = os.environ.get("STORMWATCH_REQUIRE_EMULATORS", "") not in ("", "0")
# Azurite's well-known development account (published by Azurite; not a secret).
AZ_ACCOUNT = "devstoreaccount1"
AZ_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
KIB, MIB = 1 << 10, 1 << 20
# Seed 000 §3, the server's and the agent's defaults: the targets leave sizes_bytes out.
SEED_BINARY_SIZES = [KIB, 10 * KIB, 100 * KIB, MIB, 10 * MIB]
SEED_TEXT_SIZES = [KIB, 10 * KIB, 100 * KIB, MIB, 10 * MIB, 25 * MIB, 50 * MIB]
# CloudCmp Table 5: parallel GETs of the 10 MB object (the defaults, left out too).
LEVELS = [1, 2, 4, 8, 16, 32]
CONCURRENCY_SIZE = 10 * MIB
BUCKET = "sw-e2e"
# The limit for the stripped agent with every provider's SDK.
MAX_AGENT_BYTES = 40_000_000


def unavailable(reason: str) -> NoReturn:
    """Fails under scripts/test.sh, skips a developer's bare run."""
    if REQUIRE_EMULATORS:
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason + " (set STORMWATCH_REQUIRE_EMULATORS=1 to make this a failure)")


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
    """Endpoint per provider; all three must start (see unavailable)."""
    rundir = Path(tempfile.mkdtemp(prefix="stormwatch-e2e-emulators-"))
    endpoints: dict[str, str] = {}
    problems: list[str] = []
    try:
        for provider, name in (("s3", "moto"), ("azure", "azurite"), ("gcs", "fakegcs")):
            r = subprocess.run([str(EMULATORS / "start.sh"), name, str(rundir)],
                               capture_output=True, text=True, timeout=900)
            if r.returncode == 0:
                endpoints[provider] = r.stdout.strip()
                continue
            log = rundir / f"{name}.log"
            log_text = log.read_text(errors="replace")[-4000:] if log.exists() else "(no log)"
            problems.append(f"{name} could not be installed or started "
                            f"(scripts/emulators/start.sh {name}, exit {r.returncode}):\n"
                            f"{r.stderr[-4000:]}\nemulator log {log}:\n{log_text}")
        if problems:
            unavailable("\n\n".join(problems))
        yield endpoints
    finally:
        subprocess.run([str(EMULATORS / "stop.sh"), str(rundir)], check=False)
        shutil.rmtree(rundir, ignore_errors=True)


@pytest.fixture(scope="module")
def agent_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The agent as a release is built: agents/Makefile's build target, flags and tags."""
    if shutil.which("go") is None or shutil.which("make") is None:
        unavailable("building the agent needs the Go toolchain and make")
    binary = tmp_path_factory.mktemp("agent-build") / "stormwatch-agent"
    subprocess.run(["make", "-C", str(AGENTS_DIR), "build", f"BIN={binary}"], check=True,
                   stdout=subprocess.DEVNULL)
    return binary


def elf_section_names(path: Path) -> set[str]:
    """Section names of a 64-bit little-endian ELF file (the agent's Linux builds)."""
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, "not a 64-bit LE ELF file"

    def u(off: int, n: int) -> int:
        return int.from_bytes(data[off:off + n], "little")

    shoff, shentsize, shnum, shstrndx = u(0x28, 8), u(0x3A, 2), u(0x3C, 2), u(0x3E, 2)
    headers = [shoff + i * shentsize for i in range(shnum)]
    strtab = u(headers[shstrndx] + 0x18, 8)
    names = set()
    for h in headers:
        start = strtab + u(h, 4)
        names.add(data[start:data.index(b"\0", start)].decode())
    return names


def test_the_stripped_release_agent_with_every_storage_provider_is_under_40_mb(
        agent_binary: Path, capsys: pytest.CaptureFixture[str]) -> None:
    size = agent_binary.stat().st_size
    with capsys.disabled():
        print(f"\nrelease agent binary: {size} B ({size / 1e6:.1f} MB; limit 40 MB)")
    modules = subprocess.run(["go", "version", "-m", str(agent_binary)], check=True,
                             capture_output=True, text=True).stdout
    for sdk in ("github.com/aws/aws-sdk-go-v2/service/s3",
                "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob",
                "cloud.google.com/go/storage"):
        assert f"\t{sdk}\t" in modules, f"{sdk} is not linked into the agent"
    # -trimpath keeps -ldflags out of the build info: "-s -w" shows in the sections.
    sections = elf_section_names(agent_binary)
    kept = sorted(n for n in sections if n == ".symtab" or n.startswith((".debug", ".zdebug")))
    assert not kept, f"the release build is not stripped: it has {kept}"
    assert size < MAX_AGENT_BYTES, f"the agent is {size} B, over the 40 MB limit"


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
    # No sizes_bytes, no gzip9 sizes, no concurrency levels or size: the defaults are tested.
    return {
        "name": f"e2e {provider}", "provider": provider, "endpoint": endpoint,
        "region": "us-east-1" if provider == "s3" else "", "bucket": BUCKET,
        "path_style": provider == "s3", "interval_s": 3600,
        "contents": ["binary", "text"],
        "variants": {
            "gzip9": {"enabled": True},
            "replication": {"enabled": True, "copies": 3, "sizes_bytes": [KIB, 100 * KIB]},
            "consistency": {"enabled": True, "poll_interval_ms": 5},
            "concurrency": {"enabled": True},
        },
        "assign_all": True, "credentials": creds,
    }


def plain_ms(rows: Sequence[Any], content: str, size: int) -> str:
    """'PUT/GET' latency in ms of one plain size, for the run's report."""
    lat = {r.op: r.latency_us for r in rows
           if r.variant == "plain" and r.content == content and r.size_bytes == size}
    return f"{lat['put'] / 1000:.0f}/{lat['get'] / 1000:.0f}"


def test_the_agent_measures_every_size_and_variant_on_every_provider_into_the_database(
        emulators: dict[str, str], agent_binary: Path, api_server: ApiServer, make_org: Any,
        db: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
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

    home = tmp_path / "agent"
    home.mkdir()
    config = agent_config(home, "e2e-storage", api_server.base_url, org.enrollment_token,
                          metrics_port=free_port())
    log = home / "agent.log"
    began = time.monotonic()
    with open(log, "ab") as logf:
        proc = subprocess.Popen([str(agent_binary), "run", "-config", str(config)],
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
            wait_until("a full cycle of every target in the database", 900,
                       lambda: all(complete(t) for t in targets.values()))
        except AssertionError:
            raise AssertionError(log.read_text()[-4000:]) from None
        waited_s = time.monotonic() - began
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)

    report = [f"storage e2e: every target's cycle in the database {waited_s:.0f} s "
              "after the agent started (the three run at once)"]
    with db.connect() as c:
        agent_id = c.execute(text("SELECT id FROM agents WHERE org_id = :o"),
                             {"o": org.org_id}).scalar()
        for provider, tid in targets.items():
            rows = c.execute(text(
                "SELECT time, op, variant, content, size_bytes, stored_bytes, copies, "
                "concurrency, attempt, latency_us, ttfb_us, rtt_us, bytes_per_s, status "
                "FROM storage_samples WHERE org_id = :o AND target_id = :t ORDER BY time"),
                {"o": org.org_id, "t": tid}).all()
            failed = [r for r in rows if r.status != 0]
            assert not failed, (provider, failed)

            # Seed 000's cycle: one good PUT and one good GET of every default size.
            for content, sizes in (("binary", SEED_BINARY_SIZES), ("text", SEED_TEXT_SIZES)):
                for size in sizes:
                    for op in ("put", "get"):
                        got = [r for r in rows if r.variant == "plain" and r.op == op
                               and r.content == content and r.size_bytes == size]
                        assert len(got) == 1, (provider, op, content, size, got)
                        one = got[0]
                        assert one.attempt == 1 and one.stored_bytes == size, (provider, one)
                        assert one.latency_us and one.ttfb_us is not None, (provider, one)
                        assert one.rtt_us is not None, (provider, one)
            plain_sizes = {(r.content, r.size_bytes) for r in rows if r.variant == "plain"
                           and r.op in ("put", "get")}
            assert plain_sizes == {("binary", s) for s in SEED_BINARY_SIZES} | {
                ("text", s) for s in SEED_TEXT_SIZES}, (provider, plain_sizes)

            for size in SEED_TEXT_SIZES:
                gz = [r for r in rows if r.variant == "gzip9" and r.size_bytes == size]
                assert {r.op for r in gz} == {"put", "get"}, (provider, size, gz)
                assert all(0 < r.stored_bytes < size for r in gz), (provider, gz)
            for size in (KIB, 100 * KIB):
                first = [r for r in rows if r.op == "get_first" and r.size_bytes == size]
                assert sorted(r.copies for r in first) == [1, 2, 3], (provider, size, first)
            assert {r.op for r in rows} >= {"read_after_write", "list_after_write", "rtt"}

            # CloudCmp Table 5: n GETs of the 10 MB object per level, with the throughput.
            conc = [r for r in rows if r.variant == "concurrent" and r.op == "get"]
            throughput = []
            for n in LEVELS:
                level = [r for r in conc if r.concurrency == n]
                assert len(level) == n, (provider, n, level)
                assert all(r.size_bytes == CONCURRENCY_SIZE and r.latency_us for r in level)
                bps = {r.bytes_per_s for r in level}
                assert len(bps) == 1 and next(iter(bps)) > 0, (provider, n, bps)
                throughput.append(f"{n}:{next(iter(bps)) / 1e6:.0f}")
            left = objects_left(provider, emulators[provider],
                                f"stormwatch-probe/{agent_id}/")
            assert not left, (provider, left)

            measured = [r for r in rows if r.op != "rtt"]
            span_s = (measured[-1].time - measured[0].time).total_seconds()
            conc_s = (conc[-1].time - conc[0].time).total_seconds()
            report.append(
                f"  {provider}: cycle {span_s:.1f} s (concurrency part {conc_s:.1f} s); "
                f"PUT/GET ms: binary 10 MiB {plain_ms(rows, 'binary', 10 * MIB)}, "
                f"text 50 MiB {plain_ms(rows, 'text', 50 * MIB)}; "
                "parallel GETs of 10 MiB, MB/s by level " + " ".join(throughput))
    with capsys.disabled():
        print("\n" + "\n".join(report))
