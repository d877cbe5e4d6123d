"""The soak run of `make soak`, for 3 minutes: the whole stack and a loopback fleet under the
fault injector must end with its line saying nothing was lost or duplicated, every notified
alert transition arrived once, the loss rule's states agreed with the model's window by
window, and every answer >= 500 was a 503 while PostgreSQL was down; and it must leave no
process behind."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[3]
LINE = re.compile(
    r"^soak: 3 min, (?P<faults>\d+) faults, samples sent (?P<sent>\d+) stored (?P<stored>\d+) "
    r"lost (?P<lost>\d+) duplicated (?P<dup>\d+) .*alerts (?P<alerts>\d+) \(model agrees on "
    r"(?P<compared>\d+) pair windows.*\), notifications "
    r"(?P<notes>\d+) \((?P<ndup>\d+) duplicated, (?P<nmiss>\d+) missing\), 5xx (?P<e5>\d+) "
    r"\(only 503 while the database was down\), longest recovery (?P<rec>[\d.]+) s, "
    r"restarted after exiting by themselves (?P<crashes>\d+).*$", re.M)


def test_a_three_minute_soak_loses_nothing_duplicates_nothing_and_leaves_no_process() -> None:
    seed = random.randrange(1 << 31)
    proc = subprocess.Popen(
        [sys.executable, "-m", "stormwatch.devtools.soak", "--minutes", "3", "--seed",
         str(seed)], cwd=REPO, env={**{k: v for k, v in os.environ.items()
                                        if k not in ("DATABASE_URL", "REDIS_URL")},
                                     "PYTHONPATH": str(REPO / "backend")},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: dict[int, psutil.Process] = {}
    deadline = time.monotonic() + 20 * 60  # 3 minutes of faults, set-up and settling on load
    while proc.poll() is None:
        assert time.monotonic() < deadline, "the soak did not end"
        try:
            for child in psutil.Process(proc.pid).children(recursive=True):
                seen.setdefault(child.pid, child)
        except psutil.NoSuchProcess:
            pass
        time.sleep(1)
    out = proc.stdout.read() if proc.stdout else ""
    assert proc.returncode == 0, f"seed {seed}:\n{out[-8000:]}"
    m = LINE.search(out)
    assert m, f"seed {seed}: no soak line in:\n{out[-8000:]}"
    print(f"\n{m.group(0)}")
    assert int(m["faults"]) >= 4
    assert int(m["sent"]) > 0 and int(m["stored"]) > 0
    assert int(m["compared"]) > 0
    assert (m["lost"], m["dup"], m["ndup"], m["nmiss"]) == ("0", "0", "0", "0")

    workdir = re.search(r"logs in (\S+)", out)
    assert workdir
    _, alive = psutil.wait_procs([p for p in seen.values() if p.is_running()], timeout=30)
    left = [p for p in psutil.process_iter(["pid", "cmdline"])
            if any(workdir.group(1) in arg for arg in (p.info["cmdline"] or []))]
    assert not alive and not left, f"left behind: {alive + left}"
