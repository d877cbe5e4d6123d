#!/usr/bin/env bash
# Runs every test suite; each starts the servers it needs on free ports and stops them.
# Exits non-zero if any suite fails, after running all of them.
set -uo pipefail
cd "$(dirname "$0")/.."
# Emulator-backed storage tests fail here when an emulator is unavailable (a bare run skips them).
export STORMWATCH_REQUIRE_EMULATORS=1
t0=$SECONDS
# The installers' output goes to a log (bootstrap prints a line per step, and the end of the
# log when one fails); the suites' own output, failures included, stays on the terminal.
mkdir -p .data
bootstrap_log="$PWD/.data/test-bootstrap.log"
: > "$bootstrap_log"
STORMWATCH_LOG="$bootstrap_log" scripts/bootstrap.sh test || {
  echo "=== bootstrap: FAILED (its output: $bootstrap_log) ==="; exit 1; }
printf '=== bootstrap: ok in %d s (its output: %s) ===\n' $((SECONDS - t0)) "$bootstrap_log"

failed=()
# Each suite's wall time is printed with its outcome, so a run's output shows where time goes.
suite() {
  local name=$1; shift
  printf '\n=== %s ===\n' "$name"
  local t0=$SECONDS
  if "$@"; then
    printf '=== %s: ok in %d s ===\n' "$name" $((SECONDS - t0))
  else
    failed+=("$name"); printf '=== %s: FAILED in %d s ===\n' "$name" $((SECONDS - t0))
  fi
}

suite "lint (ruff, mypy, gofmt, go vet, tsc, eslint)" scripts/lint.sh
suite "docker-compose config" env POSTGRES_PASSWORD=compose-check SECRET_KEY=compose-check-secret-key docker-compose -f docker-compose.yml config -q
# The backend runs on both raw-storage engines when TimescaleDB is installed: the full suite on
# plain PostgreSQL, then the suites that touch raw storage on TimescaleDB. Each pass's session
# fixture fails (never skips) when the schema is not on the engine it asked for.
STORAGE_SUITES=(tests/test_migrations.py tests/api/test_ingest.py tests/api/test_ingest_sections.py
  tests/api/test_ingest_strict.py tests/api/test_analytics.py tests/api/test_analytics_fresh.py
  tests/api/test_agents.py tests/services/test_rollups.py
  tests/services/test_retention.py tests/services/test_compressed_raw.py
  tests/worker/test_rollup_tasks.py tests/e2e/test_agent_mesh_e2e.py
  tests/e2e/test_agent_storage_e2e.py)
# Two pytest workers (xdist), a file at a time each: much of the suite waits on real servers,
# agents and schedules, so one worker's waits overlap the other's work. Each worker starts
# its own PostgreSQL, Redis and API on free ports.
pytest_on() {
  local engine=$1; shift
  (cd backend && STORMWATCH_ENGINE=$engine ../.venv/bin/python -m pytest -q -p no:cacheprovider \
    -n "${PYTEST_WORKERS:-2}" --dist loadfile --durations=12 "$@")
}
if PYTHONPATH=backend .venv/bin/python -c \
    'import sys; from stormwatch.devtools.services import timescaledb_installed as t; sys.exit(not t())'; then
  suite "backend on postgres (pytest, every suite)" pytest_on postgres
  suite "backend on timescaledb (pytest, storage suites)" pytest_on timescaledb "${STORAGE_SUITES[@]}"
else
  suite "backend on postgres (pytest, every suite; TimescaleDB not installed)" pytest_on postgres
fi
if [ -f agents/go.mod ]; then
  suite "agents (go test -race)" bash -c 'cd agents && go vet ./... && go test -race -count=1 ./...'
  suite "agent deployment files" agents/deploy/check.sh
fi
if [ -f frontend/package.json ]; then
  # `npm test` in two suites, so the browser tests' time shows apart from the unit tests'.
  suite "frontend (client check + unit)" bash -c 'cd frontend && npm run -s check:client && npm run -s test:unit'
  suite "frontend (browser e2e)" bash -c 'cd frontend && npm run -s test:e2e'
fi

printf '\n=== all suites: %d s ===\n' "$SECONDS"
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED suites: ${failed[*]}"
  exit 1
fi
echo "all test suites passed"
