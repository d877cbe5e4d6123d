"""Measures the demo fleet of `make run` on this machine (see run.sh)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import psutil
from stormwatch.devtools.demo import rtt_table

REPO = Path(__file__).resolve().parents[2]
WARMUP_S = float(os.environ.get("SW_BENCH_WARMUP_S", "180"))
SECONDS = float(os.environ.get("SW_BENCH_SECONDS", "300"))


def tree(stack: psutil.Process, data: Path) -> list[psutil.Process]:
    """Every process of the run: the stack's descendants, plus the daemons that left its
    tree (PostgreSQL via pg_ctl, the storage emulators via setsid) found by their pid files."""
    procs = {p.pid: p for p in [stack, *stack.children(recursive=True)]}
    pids = [data / "pg" / "postmaster.pid", *(data / "demo" / "emulators").glob("*.pid")]
    for f in pids:
        if f.exists():
            try:
                root = psutil.Process(int(f.read_text().split()[0]))
            except (psutil.NoSuchProcess, ValueError):
                continue
            for p in [root, *root.children(recursive=True)]:
                procs[p.pid] = p
    return list(procs.values())


def cpu_s(procs: list[psutil.Process]) -> dict[int, float]:
    out = {}
    for p in procs:
        try:
            t = p.cpu_times()
            out[p.pid] = t.user + t.system + t.children_user + t.children_system
        except psutil.NoSuchProcess:
            pass
    return out


def rss_mib(procs: list[psutil.Process]) -> float:
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total / (1 << 20)


def main() -> int:
    data = Path(tempfile.mkdtemp(prefix="stormwatch-bench-demo-"))
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    proc = subprocess.Popen([sys.executable, "-m", "stormwatch.devtools.stack", "--data-dir",
                             str(data), "--with-worker", "--demo"], stdout=subprocess.PIPE,
                            env=env, cwd=REPO, text=True)
    try:
        assert proc.stdout is not None
        info = json.loads(proc.stdout.readline())
        stack = psutil.Process(proc.pid)
        print(f"demo bench: stack up at {info['url']}; settling {WARMUP_S:.0f} s", file=sys.stderr)
        time.sleep(WARMUP_S)
        procs = tree(stack, data)
        load0 = os.getloadavg()
        t0, c0 = time.monotonic(), cpu_s(procs)
        start = datetime.now(UTC)
        time.sleep(SECONDS)
        t1, c1 = time.monotonic(), cpu_s(procs)
        end = datetime.now(UTC)
        load1 = os.getloadavg()
        rss = rss_mib(procs)
        used = sum(c1[p] - c0[p] for p in c1 if p in c0)
        cores = psutil.cpu_count() or 1
        cpu_pct = 100 * used / (t1 - t0) / cores
        headers = {"Authorization": f"Bearer {info['api_key']}"}
        params = {"start": start.isoformat(), "end": end.isoformat()}

        def heatmap(level: str, stat: str) -> dict:
            return httpx.get(f"{info['url']}/api/v1/analytics/mesh/heatmap", headers=headers,
                             params={**params, "level": level, "stat": stat}, timeout=120).json()

        nodes = heatmap("node", "p50")
        pairs = sum(1 for c in nodes["cells"] if c["count"])
        table = {}
        for p in rtt_table()["pairs"]:
            a, b = p["a"].split("/")[1], p["b"].split("/")[1]
            table[(a, b)] = table[(b, a)] = p["rtt_ms"]
        regions, floors = heatmap("region", "p50"), heatmap("region", "min")
        errors = {(c["src"], c["dst"]): c["value"] / 1000 / table[(c["src"], c["dst"])] - 1
                  for c in regions["cells"] if c["src"] != c["dst"] and c["value"]}
        worst = max(errors, key=lambda k: abs(errors[k]))
        # Jitter, spikes and steps only add delay: no round trip may come in under the table.
        under = {(c["src"], c["dst"]): c["value"] / 1000 - table[(c["src"], c["dst"])]
                 for c in floors["cells"] if c["src"] != c["dst"] and c["value"]}
        lowest = min(under, key=lambda k: under[k])
        # Within a region: node pairs by the zones of their agents, against the table's
        # same-zone and cross-AZ figures; self-loops cross no emulator (the machine's floor).
        agents = {a["name"]: a for a in httpx.get(f"{info['url']}/api/v1/agents", headers=headers,
                                                 timeout=60).json()}
        intra = rtt_table()["intra_region"]
        by_class: dict[str, list[float]] = {"self": [], "same_zone": [], "cross_az": []}
        for c in nodes["cells"]:
            a, b = agents.get(c["src"]), agents.get(c["dst"])
            if not (a and b and c["value"]) or (a["provider"], a["region"]) != (b["provider"], b["region"]):
                continue
            cls = "self" if a["name"] == b["name"] else "same_zone" if a["zone"] == b["zone"] else "cross_az"
            by_class[cls].append(c["value"] / 1000)

        def med(v: list[float]) -> float:
            return sorted(v)[len(v) // 2] if v else float("nan")

        # Steps raise some pairs by a few ms on purpose: report them beside the worst.
        print(f"demo bench: {len(procs)} processes, {len(errors)} region pairs, worst "
              f"{worst[0]}->{worst[1]} {errors[worst]:+.2%}; lowest minimum "
              f"{lowest[0]}->{lowest[1]} {under[lowest]:+.2f} ms against the table; within "
              f"regions p50 self {med(by_class['self']):.3f} ms, same zone "
              f"{med(by_class['same_zone']):.3f} ms (table {intra['same_zone_rtt_ms']}), cross-AZ "
              f"{med(by_class['cross_az']):.3f} ms (table {intra['cross_az_rtt_ms']}); machine "
              f"load average {load0[0]:.1f} -> {load1[0]:.1f} on {cores} cores "
              f"({(end - start) / timedelta(seconds=1):.0f} s measured)", file=sys.stderr)
        print(f"demo: cpu {cpu_pct:.0f}% of {cores} cores, rss {rss:.0f} MiB, pairs {pairs}, "
              f"p50 error {100 * abs(errors[worst]):.1f}%, minimum under table "
              f"{max(0.0, -under[lowest]):.2f} ms, cross-AZ p50 {med(by_class['cross_az']):.2f} ms")
        return 0
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(90)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
