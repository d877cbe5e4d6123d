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
demo_agents="${DEMO_AGENTS:-3}"
if [ "$demo_agents" -gt 0 ] && [ -f agents/go.mod ]; then
  echo "[run] building the agent" >&2
  make -s -C agents build >/dev/null
fi
export PYTHONPATH="$PWD/backend"
exec .venv/bin/python -m stormwatch.devtools.stack --data-dir .data --port "${PORT:-8000}" \
  --with-worker --demo-agents "$demo_agents" --human
