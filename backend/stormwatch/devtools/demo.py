"""The demo fleet of `make run`: twelve agents placed in emulated providers, regions and
zones, meshing through the WAN emulator (agents/testbed/cmd/wanem), and the three object-storage
emulators of scripts/emulators behind it as storage targets of the demo org. docs/demo.md
says what is emulated and from which figures."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
AGENT_BIN = REPO / "agents" / "bin" / "stormwatch-agent"
WANEM_BIN = REPO / "agents" / "bin" / "wanem"
SHAPER_BIN = REPO / "agents" / "bin" / "shaper"
EMULATORS = REPO / "scripts" / "emulators"
RTT_TABLE = REPO / "agents" / "testbed" / "wanem" / "rtt_table.json"

# Azurite's well-known development account (published by Azurite; not a secret).
AZ_ACCOUNT = "devstoreaccount1"
AZ_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
BUCKET = "stormwatch-demo"
KIB, MIB = 1 << 10, 1 << 20
# Seed 000's binary sizes (1 kB - 10 MB); text objects and the gzip9 and replicated variants
# at two sizes each (the least a slope needs), so the compression and replication advisors
# have data to work on while a cycle stays well inside the fast schedule's 20 s.
DEMO_SIZES = [KIB, 10 * KIB, 100 * KIB, MIB, 10 * MIB]
DEMO_TEXT_SIZES = [KIB, 100 * KIB]
# Twelve agents at 10 rounds/s would send 1440 samples/s; 2 rounds/s keeps the fleet's share
# of two cores small while a 30 s window still holds 60 samples per pair.
DEMO_RATE_HZ = 2.0
# Steps of a few ms go to pairs of at least this round trip, where they stay a few percent.
STEP_MIN_RTT_MS = 150.0


@dataclass(frozen=True)
class DemoAgent:
    name: str
    provider: str
    region: str
    zone: str
    subnet: str


# Seed 001's four AWS regions and two GCP ones (N. Virginia, Singapore), two agents each:
# two zones per region, except Mumbai (one zone, two subnets: cross_subnet) and Singapore
# (one subnet: same_subnet), so every topology class appears.
FLEET = [
    DemoAgent("aws-seoul-a", "aws", "ap-northeast-2", "ap-northeast-2a", "subnet-seoul-a"),
    DemoAgent("aws-seoul-c", "aws", "ap-northeast-2", "ap-northeast-2c", "subnet-seoul-c"),
    DemoAgent("aws-dublin-a", "aws", "eu-west-1", "eu-west-1a", "subnet-dublin-a"),
    DemoAgent("aws-dublin-b", "aws", "eu-west-1", "eu-west-1b", "subnet-dublin-b"),
    DemoAgent("aws-saopaulo-a", "aws", "sa-east-1", "sa-east-1a", "subnet-saopaulo-a"),
    DemoAgent("aws-saopaulo-c", "aws", "sa-east-1", "sa-east-1c", "subnet-saopaulo-c"),
    DemoAgent("aws-mumbai-a1", "aws", "ap-south-1", "ap-south-1a", "subnet-mumbai-1"),
    DemoAgent("aws-mumbai-a2", "aws", "ap-south-1", "ap-south-1a", "subnet-mumbai-2"),
    DemoAgent("gcp-virginia-a", "gcp", "us-east4", "us-east4-a", "subnet-virginia-a"),
    DemoAgent("gcp-virginia-b", "gcp", "us-east4", "us-east4-b", "subnet-virginia-b"),
    DemoAgent("gcp-singapore-a1", "gcp", "asia-southeast1", "asia-southeast1-a", "subnet-sg"),
    DemoAgent("gcp-singapore-a2", "gcp", "asia-southeast1", "asia-southeast1-a", "subnet-sg"),
]
# The agent that probes the storage targets (one prober keeps the emulators' load small).
STORAGE_AGENT = "gcp-virginia-a"


@dataclass(frozen=True)
class ThroughputPath:
    """The one emulated throughput path: the responder's probe behind a shaper with seed 004
    §IV's shape (a high rate until a volume has passed, then a low one; idle time refills
    the volume), scaled down to rates two cores carry beside the fleet."""

    initiator: str = "gcp-virginia-b"
    responder: str = "aws-dublin-b"
    high_mbit: float = 40.0
    low_mbit: float = 12.0
    switch_after_bytes: int = 40 * 10**6  # 8 s at the high rate, 12 s at the low one
    refill_after_idle_s: int = 60
    duration_s: int = 20  # per direction
    per_day: int = 24  # the scheduler's hourly experiments


THROUGHPUT = ThroughputPath()


@dataclass(frozen=True)
class StorageProfile:
    """An emulated storage endpoint: round trip and bandwidth as seen from the prober.
    Illustrative values, chosen so the providers rank differently by object size; each
    region is one the pricing catalog lists, near the prober in Virginia."""

    provider: str
    emulator: str
    region: str
    rtt_ms: float
    mbit_per_s: float


STORAGE = [
    StorageProfile("s3", "moto", "us-east-1", 4.0, 200.0),
    StorageProfile("azure", "azurite", "eastus", 12.0, 400.0),
    StorageProfile("gcs", "fakegcs", "us-central1", 25.0, 900.0),
]


@dataclass(frozen=True)
class Schedule:
    """How soon things happen. `make run`: steps from 2 to 12 minutes in, storage every 2
    minutes. Tests: a step 120-135 s in and storage every 20 s."""

    step_pairs: int = 3
    step_min_ms: float = 4.0
    step_max_ms: float = 9.0
    step_first_after_s: float = 120.0
    step_spread_s: float = 600.0
    storage_interval_s: int = 120
    spike_prob: float = 0.001


# The first step comes late enough that, on a loaded machine where agents start shipping
# half a minute in, the detector still sees its minimum of five windows before it.
FAST = Schedule(step_pairs=2, step_min_ms=6.0, step_max_ms=9.0, step_first_after_s=120.0,
                step_spread_s=15.0, storage_interval_s=20)


def log(msg: str) -> None:
    print(f"[stormwatch] demo: {msg}", file=sys.stderr, flush=True)


def api(url: str, key: str, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{url}/api/v1{path}", data=data, method=method, headers={
        "Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        raw = r.read()
    return json.loads(raw) if raw else None


def _azure_create_container(endpoint: str) -> None:
    """A Shared Key signed Create Container (Azurite checks signatures as Azure does)."""
    headers = {"x-ms-date": format_datetime(datetime.now(UTC), usegmt=True),
               "x-ms-version": "2021-08-06"}
    canon_headers = "".join(f"{k}:{v}\n" for k, v in sorted(headers.items()))
    canon_res = f"/{AZ_ACCOUNT}/{AZ_ACCOUNT}/{BUCKET}\nrestype:container"
    to_sign = "\n".join(["PUT", *[""] * 11, canon_headers + canon_res])
    sig = base64.b64encode(hmac.new(base64.b64decode(AZ_KEY), to_sign.encode(),
                                    hashlib.sha256).digest()).decode()
    headers["Authorization"] = f"SharedKey {AZ_ACCOUNT}:{sig}"
    _expect_created(urllib.request.Request(f"{endpoint}/{BUCKET}?restype=container",
                                           method="PUT", headers=headers))


def _expect_created(req: urllib.request.Request) -> None:
    try:
        with urllib.request.urlopen(req, timeout=10):
            return
    except urllib.error.HTTPError as e:
        if e.code == 409:  # exists already
            return
        raise


def create_bucket(provider: str, endpoint: str) -> None:
    if provider == "s3":
        _expect_created(urllib.request.Request(f"{endpoint}/{BUCKET}", method="PUT", data=b""))
    elif provider == "azure":
        _azure_create_container(endpoint)
    else:
        _expect_created(urllib.request.Request(
            f"{endpoint}/storage/v1/b?project=stormwatch-demo", method="POST",
            data=json.dumps({"name": BUCKET}).encode(),
            headers={"Content-Type": "application/json"}))


def target_body(p: StorageProfile, endpoint: str, agent_id: str, interval_s: int
                ) -> dict[str, Any]:
    creds: dict[str, Any] = {
        "s3": {"source": "inline", "access_key_id": "AKIADEMO", "secret_access_key": "demo"},
        "azure": {"source": "inline", "account_name": AZ_ACCOUNT, "account_key": AZ_KEY},
        "gcs": {"source": "none"},
    }[p.provider]
    return {
        "name": f"demo {p.provider} ({p.emulator})", "provider": p.provider,
        "endpoint": endpoint, "region": p.region,
        "bucket": BUCKET, "path_style": p.provider == "s3", "interval_s": interval_s,
        "op_timeout_ms": 30_000, "contents": ["binary", "text"],
        "sizes_bytes": {"binary": DEMO_SIZES, "text": DEMO_TEXT_SIZES},
        "variants": {"gzip9": {"enabled": True, "contents": ["text"]},
                     "replication": {"enabled": True, "copies": 3,
                                     "sizes_bytes": [KIB, 100 * KIB]}},
        "assign_all": False, "agent_ids": [agent_id], "credentials": creds,
    }


# The fleet's niceness when the stack may raise priorities (root): twelve VMs and their network
# share this host with the API, the database and whatever else runs, and a late wake-up of the
# emulator or an echo server shows as a longer round trip. Given the CPU first, as each VM
# would have its own, their levels stay where the table puts them on a loaded machine.
FLEET_NICE = -10


def fleet_command(args: list[str]) -> list[str]:
    """args run at the fleet's priority where this process may raise it, else as they are."""
    if os.name == "posix" and os.geteuid() == 0:
        return ["nice", "-n", str(FLEET_NICE), *args]
    return args


class DemoFleet:
    """Starts the storage emulators, the WAN emulator and the agents through `spawn` (the
    stack's process starter, so stopping the stack stops them), and configures the org."""

    def __init__(self, data_dir: Path, state: dict[str, Any], save: Callable[[], None],
                 spawn: Callable[[str, list[str], dict[str, str]], None],
                 schedule: Schedule) -> None:
        self.dir = data_dir / "demo"
        self.state = state
        self.save = save
        self.spawn = spawn
        self.schedule = schedule
        self.status_file = self.dir / "wanem-status.json"
        self.emulator_dir = self.dir / "emulators"

    def _port(self, key: str, free_port: Callable[[], int]) -> int:
        ports = self.state.setdefault("demo_ports", {})
        if key not in ports:
            # A port is free when asked for but bound only later, when its process starts:
            # the kernel may hand the same port out again meanwhile, so never reuse one.
            taken = {int(v) for v in ports.values()}
            port = free_port()
            while port in taken:
                port = free_port()
            ports[key] = port
            self.save()
        return int(ports[key])

    def start(self, url: str, api_key: str, enrollment_token: str, env: dict[str, str],
              free_port: Callable[[], int]) -> dict[str, Any]:
        self.dir.mkdir(parents=True, exist_ok=True)
        for b in (AGENT_BIN, WANEM_BIN, SHAPER_BIN):
            if not b.exists():
                raise RuntimeError(f"{b} missing: build it with `make -C agents build wanem`")
        s = self.schedule
        api(url, api_key, "PATCH", "/org", {"mesh_settings": {
            "enabled": True, "rate_hz": DEMO_RATE_HZ, "payload_bytes": 1024,
            "timeout_ms": 1000}})
        upstreams = self._start_storage_emulators()
        def addr(key: str) -> str:
            return f"127.0.0.1:{self._port(key, free_port)}"

        mesh = [{"name": a.name, "listen": addr("emu_" + a.name),
                 "upstream": addr("echo_" + a.name), "provider": a.provider,
                 "region": a.region, "zone": a.zone} for a in FLEET]
        storage = [{"name": p.provider, "listen": addr("emu_" + p.provider),
                    "upstream": upstreams[p.provider].split("//", 1)[1].split("/", 1)[0],
                    "rtt_ms": p.rtt_ms, "jitter_frac": 0.05, "mbit_per_s": p.mbit_per_s}
                   for p in STORAGE if p.provider in upstreams]
        config = {"api_url": url, "seed": int(time.time()), "jitter_frac": 0.01,
                  "spike": {"prob": s.spike_prob, "min_x": 20, "max_x": 300, "cap_ms": 600},
                  "steps": {"pairs": s.step_pairs, "min_rtt_ms": STEP_MIN_RTT_MS,
                            "min_ms": s.step_min_ms,
                            "max_ms": s.step_max_ms, "first_after_s": s.step_first_after_s,
                            "spread_s": s.step_spread_s},
                  "mesh": mesh, "storage": storage, "status_file": str(self.status_file)}
        cfg_path = self.dir / "wanem.json"
        cfg_path.write_text(json.dumps(config, indent=2))
        self.status_file.unlink(missing_ok=True)
        self.spawn("wanem", fleet_command([str(WANEM_BIN), "-config", str(cfg_path)]),
                   {**env, "STORMWATCH_WANEM_API_KEY": api_key})
        deadline = time.monotonic() + 30
        while not self.status_file.exists():
            if time.monotonic() > deadline:
                raise RuntimeError("the WAN emulator did not start "
                                   f"(see {self.dir.parent}/wanem.log)")
            time.sleep(0.1)
        status = json.loads(self.status_file.read_text())
        tp = THROUGHPUT
        # The responder's probe listens behind the shaper and advertises the shaper.
        tput = {tp.initiator: (addr("tput_" + tp.initiator), addr("tput_" + tp.initiator)),
                tp.responder: (addr("tput_" + tp.responder), addr("shaper"))}
        self.spawn("shaper", fleet_command([
            str(SHAPER_BIN), "-listen", addr("shaper"), "-upstream", tput[tp.responder][0],
            "-high-mbit", str(tp.high_mbit), "-low-mbit", str(tp.low_mbit),
            "-switch-after-bytes", str(tp.switch_after_bytes),
            "-refill-after-idle", f"{tp.refill_after_idle_s}s"]), env)
        for a, m in zip(FLEET, mesh, strict=True):
            state = self.dir / "agents" / a.name
            state.mkdir(parents=True, exist_ok=True)
            listen, advertise = tput.get(a.name, ("", ""))
            self.spawn(f"agent-{a.name}", fleet_command([
                str(AGENT_BIN), "run", "--api-url", url, "--name", a.name,
                "--state-dir", str(state), "--mesh-listen", m["upstream"],
                "--mesh-advertise", status["mesh"][a.name], "--metadata-detect", "false",
                # Twelve agents share one host: one throughput path is emulated (THROUGHPUT).
                "--metrics-listen", "", "--throughput-listen", listen,
                "--throughput-advertise", advertise,
                "--provider", a.provider, "--region", a.region,
                "--zone", a.zone, "--subnet", a.subnet, "--log-level", "warn"]),
                {**env, "STORMWATCH_ENROLLMENT_TOKEN": enrollment_token})
        self._register_targets(url, api_key, status)
        self._start_throughput(url, api_key)
        log(f"{len(FLEET)} agents in {len({a.region for a in FLEET})} emulated regions, "
            f"{len(status['storage'])} storage targets; steps: "
            + ", ".join(f"{x['a']}{'->' if x.get('directed') else '<->'}{x['b']} "
                        f"+{x['delta_rtt_ms']:.1f} ms at {x['at']}" for x in status["steps"]))
        return status

    def _start_throughput(self, url: str, api_key: str) -> None:
        """Schedules the path's experiments hourly, and one now (unless one ran or is due):
        the Throughput page has a switch to show within minutes of the first start."""
        tp = THROUGHPUT
        ids: dict[str, str] = {}
        deadline = time.monotonic() + 60
        while True:
            agents = api(url, api_key, "GET", "/agents")
            ids = {a["name"]: a["id"] for a in agents
                   if a["name"] in (tp.initiator, tp.responder) and a["throughput_address"]}
            if len(ids) == 2:
                break
            if time.monotonic() > deadline:
                log("the throughput path's agents did not report their probes within 60 s; "
                    "no throughput experiments")
                return
            time.sleep(0.5)
        pair = {"src_agent_id": ids[tp.initiator], "dst_agent_id": ids[tp.responder]}
        api(url, api_key, "PUT", "/throughput/settings", {
            "enabled": True, "monthly_budget_bytes": 1000 * 10**9, "default_proto": "tcp",
            "default_duration_s": tp.duration_s, "streams": 2,
            "experiments_per_pair_per_day": tp.per_day, "pairs": [pair]})
        if not api(url, api_key, "GET", "/throughput/experiments"):
            api(url, api_key, "POST", "/throughput/experiments", {
                "initiator_agent_id": pair["src_agent_id"],
                "responder_agent_id": pair["dst_agent_id"], "proto": "tcp",
                "duration_s": tp.duration_s})

    def _start_storage_emulators(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for p in STORAGE:
            r = subprocess.run([str(EMULATORS / "start.sh"), p.emulator, str(self.emulator_dir)],
                               capture_output=True, text=True, timeout=900)
            if r.returncode != 0:
                log(f"{p.emulator} did not start; no {p.provider} target: {r.stderr[-500:]}")
                continue
            endpoint = r.stdout.strip()
            create_bucket(p.provider, endpoint)
            out[p.provider] = endpoint
        return out

    def stop(self) -> None:
        subprocess.run([str(EMULATORS / "stop.sh"), str(self.emulator_dir)], check=False)

    def _register_targets(self, url: str, api_key: str, status: dict[str, Any]) -> None:
        """Creates (or points again, after a restart) the demo targets at the emulator."""
        deadline = time.monotonic() + 60
        agent_id = None
        while agent_id is None:
            agent_id = next((a["id"] for a in api(url, api_key, "GET", "/agents")
                             if a["name"] == STORAGE_AGENT), None)
            if agent_id is None:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{STORAGE_AGENT} did not enroll within 60 s")
                time.sleep(0.5)
        existing = {t["name"]: t["id"] for t in api(url, api_key, "GET", "/storage-targets")}
        for p in STORAGE:
            listen = status["storage"].get(p.provider)
            if listen is None:
                continue
            endpoint = f"http://{listen}"
            if p.provider == "azure":
                endpoint += f"/{AZ_ACCOUNT}"
            body = target_body(p, endpoint, agent_id, self.schedule.storage_interval_s)
            if body["name"] in existing:
                api(url, api_key, "PATCH", f"/storage-targets/{existing[body['name']]}",
                    {k: v for k, v in body.items() if k != "provider"})
            else:
                api(url, api_key, "POST", "/storage-targets", body)


def rtt_table() -> dict[str, Any]:
    return dict(json.loads(RTT_TABLE.read_text()))
