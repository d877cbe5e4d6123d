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

# Suites run in lanes (below): each suite's output goes to its own log and is printed whole,
# under a lock, when the suite ends, so concurrent suites never interleave their lines.
# Each suite's wall time is printed with its outcome, so a run's output shows where time goes.
results="$(mktemp -d "${TMPDIR:-/tmp}/stormwatch-test.XXXXXX")"
trap 'rm -rf "$results"' EXIT
: > "$results/failed"
suite() {
  local name=$1; shift
  local log t0=$SECONDS status
  log="$(mktemp "$results/suite.XXXXXX")"
  "$@" > "$log" 2>&1 </dev/null && status=ok || status=FAILED
  {
    flock 9
    printf '\n=== %s ===\n' "$name"
    cat "$log"
    printf '=== %s: %s in %d s ===\n' "$name" "$status" $((SECONDS - t0))
    [ "$status" = ok ] || printf '%s\n' "$name" >> "$results/failed"
  } 9>> "$results/lock"
}

# The storage suites: the timescaledb pass runs these.
STORAGE_SUITES=(tests/test_migrations.py tests/api/test_ingest.py tests/api/test_ingest_sections.py
  tests/api/test_ingest_strict.py tests/api/test_analytics.py tests/api/test_analytics_fresh.py
  tests/api/test_agents.py tests/services/test_rollups.py
  tests/services/test_retention.py tests/services/test_compressed_raw.py
  tests/worker/test_rollup_tasks.py tests/e2e/test_agent_mesh_e2e.py
  tests/e2e/test_agent_storage_e2e.py)
# Three pytest workers (xdist), a file at a time each: much of the suite waits on real
# servers, agents and schedules, so one worker's waits overlap the others' work (a whole run
# used 1.2 of its 2 cores with two workers). Each worker starts its own PostgreSQL, Redis and
# API on free ports.
pytest_on() {
  local engine=$1; shift
  (cd backend && STORMWATCH_ENGINE=$engine ../.venv/bin/python -m pytest -q -p no:cacheprovider \
    -n "${PYTEST_WORKERS:-3}" --dist loadfile --durations=12 "$@")
}
timescaledb_installed() {
  PYTHONPATH=backend .venv/bin/python -c \
    'import sys; from stormwatch.devtools.services import timescaledb_installed as t; sys.exit(not t())'
}
# Three lanes run side by side; much of every suite waits on real servers, agents and
# schedules, so one lane's waits overlap another's work. Lane 1 is the backend, on both
# raw-storage engines when TimescaleDB is installed: the full suite on plain PostgreSQL, then
# the suites that touch raw storage on TimescaleDB (each pass's session fixture fails, never
# skips, when the schema is not on the engine it asked for). Lane 2 is the agents and the
# browser tests; lane 3 the quick ones, lint, the soak and the UI's unit tests (lanes 1 and 2
# take 12-14 minutes each, lane 3 about 7).
lane1() {
  suite "docker-compose config" env POSTGRES_PASSWORD=compose-check SECRET_KEY=compose-check-secret-key docker-compose -f docker-compose.yml config -q
  if timescaledb_installed; then
    suite "backend on postgres (pytest, every suite but the soak)" pytest_on postgres \
      --ignore=tests/devtools/test_soak.py
    suite "backend on timescaledb (pytest, storage suites)" pytest_on timescaledb "${STORAGE_SUITES[@]}"
  else
    suite "backend on postgres (pytest, every suite but the soak; TimescaleDB not installed)" \
      pytest_on postgres --ignore=tests/devtools/test_soak.py
  fi
}

lane2() {
  if [ -f agents/go.mod ]; then
    # One package at a time: the shaper's and the mesh's timing tests share two cores with
    # the other lane.
    suite "agents (go test -race)" bash -c 'cd agents && go vet ./... && go test -race -count=1 -p 1 ./...'
    suite "agent deployment files" agents/deploy/check.sh
  fi
  if [ -f frontend/package.json ]; then
    # The browser tests build the demo's binaries themselves. The demo fleet they start runs
    # at a raised priority (docs/demo.md, "The fleet's CPU"), so the other lane's load does
    # not move its paths' levels. Dots and failures, not every step's name (NODE_OPTIONS
    # reaches the test runner).
    suite "frontend (browser e2e)" env NODE_OPTIONS=--test-reporter=dot \
      bash -c 'make -s -C agents build wanem && cd frontend && npm run -s test:e2e'
  fi
}

lane3() {
  suite "lint (ruff, mypy, gofmt, go vet, tsc, eslint)" scripts/lint.sh
  suite "kubernetes manifests (helm lint, helm template, rendered objects)" backend/deploy/check.sh
  # The 3-minute soak starts its own stack and fleet and mostly waits on its faults: in the
  # backend pass it held one of the three workers for 224 s at the end of the run; here it
  # overlaps that pass instead of lengthening it.
  suite "soak (3 minutes of faults, tests/devtools/test_soak.py)" bash -c \
    'cd backend && ../.venv/bin/python -m pytest -q -s -p no:cacheprovider tests/devtools/test_soak.py'
  if [ -f frontend/package.json ]; then
    # `npm test` in two suites, so the browser tests' time shows apart from the unit tests'.
    suite "frontend (client check + unit)" bash -c 'cd frontend && npm run -s check:client && npm run -s test:unit -- --reporter=dot'
  fi
}

lane1 &
lane2 &
lane3 &
wait

printf '\n=== all suites: %d s ===\n' "$SECONDS"
if [ -s "$results/failed" ]; then
  echo "FAILED suites:"; sed 's/^/  /' "$results/failed"
  exit 1
fi
echo "all test suites passed"
