#!/usr/bin/env bash
# Agent benchmark (issue 3 item 10): builds the agent, installs sockperf when absent, runs
# bench/agent and ends with the one-line summary.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
if ! command -v sockperf >/dev/null 2>&1; then
  apt-get install -y sockperf >/dev/null
fi
make -C "$root/agents" build >/dev/null
cd "$here"
go run . -agent-bin "$root/agents/bin/stormwatch-agent" -agents-dir "$root/agents" "$@"
