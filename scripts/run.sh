#!/usr/bin/env bash
# `make run`: installs what is missing, builds the UI and the agent, then runs the stack
# in the foreground with its data under .data/ (reused by the next run).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh run
if [ -f frontend/package.json ]; then
  echo "[run] building the UI" >&2
  (cd frontend && npm run --silent build >/dev/null)
fi
# DEMO=0 for a real deployment: no demo agents, WAN emulator or storage emulators.
demo_args=()
if [ "${DEMO:-1}" != "0" ]; then
  echo "[run] building the agent and the WAN emulator (demo fleet; DEMO=0 turns it off)" >&2
  make -s -C agents build wanem >/dev/null
  scripts/emulators/install.sh >&2
  demo_args=(--demo)
fi
export PYTHONPATH="$PWD/backend"
exec .venv/bin/python -m stormwatch.devtools.stack --data-dir .data --port "${PORT:-8000}" \
  --with-worker "${demo_args[@]}" --human
