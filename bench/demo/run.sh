#!/usr/bin/env bash
# Demo bench: the stack of `make run` with the demo fleet (its own data directory), left to
# settle for SW_BENCH_WARMUP_S (default 180 s), then measured for SW_BENCH_SECONDS (default
# 300 s): CPU of every process of the run (API, worker, beat, PostgreSQL, Redis, agents, WAN
# emulator, storage emulators) as a share of the machine's cores, their resident memory, the
# node pairs with samples and the worst p50 error of a region pair against the table.
# Last line: "demo: cpu <p>% of <n> cores, rss <m> MiB, pairs <n>, p50 error <e>%".
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../.."
make -s -C agents build wanem >/dev/null
scripts/emulators/install.sh >&2
export PYTHONPATH="$PWD/backend"
exec .venv/bin/python "$here/bench.py" "$@"
