#!/usr/bin/env bash
# Installs what Stormwatch needs on a fresh Debian machine, skipping what is already there.
# Usage: scripts/bootstrap.sh [run|test]   (test also installs Chromium and docker-compose)
set -euo pipefail
cd "$(dirname "$0")/.."
purpose="${1:-run}"
say() { printf '[bootstrap] %s\n' "$*" >&2; }
# Installers' output goes to $STORMWATCH_LOG when set (make run and make test set it): one
# line per step on the terminal, and the end of the log when a step fails.
quiet() {
  if [ -z "${STORMWATCH_LOG:-}" ]; then "$@"; return; fi
  printf '\n=== bootstrap: %s\n' "$*" >>"$STORMWATCH_LOG"
  "$@" >>"$STORMWATCH_LOG" 2>&1 || {
    local rc=$?
    say "FAILED (exit $rc): $*; the end of $STORMWATCH_LOG:"
    tail -n 30 "$STORMWATCH_LOG" >&2
    return "$rc"
  }
}

apt_install() {
  local missing=()
  for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  say "apt-get install ${missing[*]}"
  local sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  if [ ! -f /tmp/.stormwatch-apt-updated ]; then
    quiet $sudo apt-get update -qq && touch /tmp/.stormwatch-apt-updated
  fi
  quiet $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}"
}

# PostgreSQL server binaries are expected on the machine; Redis comes from apt when absent.
if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 && ! command -v pg_ctl >/dev/null; then
  apt_install postgresql
fi
command -v redis-server >/dev/null || apt_install redis-server

# TimescaleDB (raw samples as compressed hypertables): installed from a prebuilt extension in
# ../shared/timescaledb/ when that folder is there; without it, plain PostgreSQL.
# docs/operations.md says which engine a user gets and how to switch (STORMWATCH_ENGINE).
tsdb_dir="${TIMESCALEDB_DIR:-../shared/timescaledb}"
tsdb_control=/usr/share/postgresql/15/extension/timescaledb.control
tsdb_version() { sed -n "s/^default_version = '\(.*\)'/\1/p" "$tsdb_control"; }
if [ -f "$tsdb_control" ] && [ -f /usr/lib/postgresql/15/lib/timescaledb.so ]; then
  if [ "${STORMWATCH_ENGINE:-auto}" = postgres ]; then
    say "raw storage: plain PostgreSQL (STORMWATCH_ENGINE=postgres; TimescaleDB $(tsdb_version) is installed)"
  else
    say "raw storage: TimescaleDB $(tsdb_version) (installed; clusters started here preload it;" \
        "STORMWATCH_ENGINE=postgres for plain PostgreSQL)"
  fi
elif [ -d "$tsdb_dir" ] && [ -x /usr/lib/postgresql/15/bin/pg_ctl ]; then
  say "installing TimescaleDB from $tsdb_dir"
  (cd "$tsdb_dir" && sha256sum --quiet -c SHA256SUMS) \
    || { say "checksum mismatch in $tsdb_dir/SHA256SUMS: not installing"; exit 1; }
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  # The build needs a current 15.x server; upgraded now, before any cluster of ours starts
  # (a server whose package changes under it fails its later library loads).
  say "apt-get install postgresql-15 (Debian's current 15.x, which the extension was built on)"
  quiet $sudo apt-get update -qq && touch /tmp/.stormwatch-apt-updated
  quiet $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    postgresql-15
  for tarball in "$tsdb_dir"/timescaledb-*.tar.gz; do $sudo tar -xzf "$tarball" -C /; done
  say "raw storage: TimescaleDB $(tsdb_version) installed; clusters started here preload it"
elif [ -d "$tsdb_dir" ]; then
  say "raw storage: plain PostgreSQL ($tsdb_dir holds a build for PostgreSQL 15, not installed here)"
else
  say "raw storage: plain PostgreSQL (no TimescaleDB build at $tsdb_dir)"
fi
if [ "$purpose" = test ]; then
  apt_install chromium docker-compose sockperf prometheus prometheus-alertmanager
  # The packages start their own servers (on :9090 and :9093) where the init system lets
  # them; the export and Alertmanager-channel tests run their own, so none is left running.
  for service in prometheus prometheus-alertmanager; do
    if [ -x "/etc/init.d/$service" ] && "/etc/init.d/$service" status >/dev/null 2>&1; then
      sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
      quiet $sudo "/etc/init.d/$service" stop || true
    fi
  done
  # helm for the chart's checks: built from its Go module once per machine (scripts/helm.sh).
  if command -v go >/dev/null && ! command -v helm >/dev/null; then
    say "helm (built from its Go module into ~/.cache/stormwatch when not there yet)"
    quiet scripts/helm.sh >/dev/null  # it prints the binary's path, which check.sh reads
  fi
  # Object-storage emulators for the storage-probe tests (moto, Azurite, fake-gcs-server).
  say "storage emulators (moto, Azurite, fake-gcs-server)"
  quiet scripts/emulators/install.sh
fi

# Python: a venv pinned by backend/requirements.lock; reinstalled only when the lock changes.
stamp=.venv/.requirements.sha
want=$(sha256sum backend/requirements.lock | cut -d' ' -f1)
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "python venv (.venv) from backend/requirements.lock"
  quiet python3 -m venv .venv
  quiet .venv/bin/pip install -q --disable-pip-version-check -r backend/requirements.lock
  echo "$want" > "$stamp"
fi

# Frontend dependencies, reinstalled only when the lock file changes.
if [ -f frontend/package-lock.json ]; then
  fstamp=frontend/node_modules/.lock.sha
  fwant=$(sha256sum frontend/package-lock.json | cut -d' ' -f1)
  if [ ! -d frontend/node_modules ] || [ "$(cat "$fstamp" 2>/dev/null)" != "$fwant" ]; then
    say "npm install (frontend, from package-lock.json)"
    # Not `npm ci`: npm 11 keeps only this platform's optional packages (rollup's native
    # builds) in the lock and then refuses it in `ci`. --no-save installs exactly the lock.
    quiet bash -c 'cd frontend && rm -rf node_modules &&
      npm install --no-save --no-audit --no-fund --loglevel=error'
    echo "$fwant" > "$fstamp"
  fi
fi

# The agent's Go modules, fetched here so later builds and tests print no `go: downloading`.
if [ -f agents/go.mod ] && command -v go >/dev/null; then
  quiet bash -c 'cd agents && go mod download'
fi
