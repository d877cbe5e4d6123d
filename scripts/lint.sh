#!/usr/bin/env bash
# The lint gate, run by `make lint` and as the first suite of `make test`: ruff and mypy on the
# backend, gofmt and go vet on the agents, tsc and ESLint on the UI. One line per tool when it
# passes; a failing tool prints what it found. Runs every tool, then exits non-zero if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-$PWD/.venv/bin/python}"
failed=()

# check NAME DIR CMD...: runs CMD in DIR, its output kept for when it fails.
check() {
  local name=$1 dir=$2; shift 2
  local t0=$SECONDS out
  if out=$(cd "$dir" && "$@" 2>&1); then
    printf 'lint: %s ok (%d s)\n' "$name" $((SECONDS - t0))
  else
    failed+=("$name")
    printf 'lint: %s FAILED (%d s):\n%s\n' "$name" $((SECONDS - t0)) "$out"
  fi
}

# gofmt -l exits 0 whatever it lists: any file it names is unformatted.
gofmt_clean() {
  local unformatted
  unformatted=$(gofmt -l .) || return 1
  [ -z "$unformatted" ] && return 0
  printf 'not gofmt-formatted (gofmt -w fixes them):\n%s\n' "$unformatted"
  return 1
}

check ruff . "$PY" -m ruff check --quiet backend migrations bench
check mypy backend "$PY" -m mypy stormwatch
if [ -f agents/go.mod ]; then
  check gofmt agents gofmt_clean
  check "go vet" agents go vet ./...
fi
if [ -f frontend/package.json ]; then
  check tsc frontend npx tsc -b
  check eslint frontend npm run -s lint
fi

if [ ${#failed[@]} -gt 0 ]; then
  echo "lint FAILED: ${failed[*]}"
  exit 1
fi
