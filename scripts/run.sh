#!/usr/bin/env bash
# `make run`: installs what is missing, builds the UI and the agent, then runs the stack
# in the foreground with its data under .data/ (reused by the next run).
# One line per step on the terminal; what the steps print goes to .data/run.log, and a step
# that fails shows the end of it. The stack's processes log to .data/<name>.log.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .data
export STORMWATCH_LOG="$PWD/.data/run.log"
: > "$STORMWATCH_LOG"
echo "[run] each step's output: $STORMWATCH_LOG" >&2

step() {
  local what=$1; shift
  echo "[run] $what" >&2
  printf '\n=== %s: %s\n' "$what" "$*" >>"$STORMWATCH_LOG"
  "$@" >>"$STORMWATCH_LOG" 2>&1 || {
    local rc=$?
    echo "[run] FAILED (exit $rc): $what; the end of $STORMWATCH_LOG:" >&2
    tail -n 30 "$STORMWATCH_LOG" >&2
    exit "$rc"
  }
}

# bootstrap prints its own one-line steps and sends the installers' output to the log.
scripts/bootstrap.sh run
if [ -f frontend/package.json ]; then
  step "building the UI" bash -c 'cd frontend && npm run --silent build'
fi
# DEMO=0 for a real deployment: no demo agents, WAN emulator or storage emulators.
demo_args=()
if [ "${DEMO:-1}" != "0" ]; then
  step "building the agent and the WAN emulator (demo fleet; DEMO=0 turns it off)" \
    make -s -C agents build wanem
  step "storage emulators for the demo fleet" scripts/emulators/install.sh
  demo_args=(--demo)
fi
export PYTHONPATH="$PWD/backend"
exec .venv/bin/python -m stormwatch.devtools.stack --data-dir .data --port "${PORT:-8000}" \
  --with-worker "${demo_args[@]}" --human
