#!/usr/bin/env bash
# Runs every test suite; each starts the servers it needs on free ports and stops them.
# Exits non-zero if any suite fails, after running all of them.
set -uo pipefail
cd "$(dirname "$0")/.."
# Emulator-backed storage tests fail here when an emulator is unavailable (a bare run skips them).
export STORMWATCH_REQUIRE_EMULATORS=1
scripts/bootstrap.sh test || exit 1

failed=()
suite() {
  local name=$1; shift
  printf '\n=== %s ===\n' "$name"
  if "$@"; then printf '=== %s: ok ===\n' "$name"; else failed+=("$name"); printf '=== %s: FAILED ===\n' "$name"; fi
}

suite "docker-compose config" env POSTGRES_PASSWORD=compose-check SECRET_KEY=compose-check-secret-key docker-compose -f docker-compose.yml config -q
suite "backend (pytest)" bash -c 'cd backend && ../.venv/bin/python -m pytest -q -p no:cacheprovider'
if [ -f agents/go.mod ]; then
  suite "agents (go test -race)" bash -c 'cd agents && go vet ./... && go test -race -count=1 ./...'
  suite "agent deployment files" agents/deploy/check.sh
fi
if [ -f frontend/package.json ]; then
  suite "frontend (unit + e2e)" bash -c 'cd frontend && npm test'
fi

echo
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED suites: ${failed[*]}"
  exit 1
fi
echo "all test suites passed"
