#!/usr/bin/env bash
# Throughput benchmark: builds the agent, installs nuttcp (seed 004's tool, a reference only)
# when absent, and runs bench/throughput, which ends with the one-line summary.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
if ! command -v nuttcp >/dev/null 2>&1; then
  apt-get install -y nuttcp >/dev/null
fi
make -C "$root/agents" build >/dev/null
cd "$here"
go run . -agent-bin "$root/agents/bin/stormwatch-agent" "$@"
