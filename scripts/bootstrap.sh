#!/usr/bin/env bash
# Installs what Stormwatch needs on a fresh Debian machine, skipping what is already there.
# Usage: scripts/bootstrap.sh [run|test]   (test also installs Chromium and docker-compose)
set -euo pipefail
cd "$(dirname "$0")/.."
purpose="${1:-run}"
say() { printf '[bootstrap] %s\n' "$*" >&2; }

apt_install() {
  local missing=()
  for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  say "apt-get install ${missing[*]}"
  local sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  if [ ! -f /tmp/.stormwatch-apt-updated ]; then
    $sudo apt-get update -qq && touch /tmp/.stormwatch-apt-updated
  fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# PostgreSQL server binaries are expected on the machine; Redis comes from apt when absent.
if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 && ! command -v pg_ctl >/dev/null; then
  apt_install postgresql
fi
command -v redis-server >/dev/null || apt_install redis-server
if [ "$purpose" = test ]; then
  apt_install chromium docker-compose sockperf
  # Object-storage emulators for the storage-probe tests (moto, Azurite, fake-gcs-server).
  scripts/emulators/install.sh
fi

# Python: a venv pinned by backend/requirements.lock; reinstalled only when the lock changes.
stamp=.venv/.requirements.sha
want=$(sha256sum backend/requirements.lock | cut -d' ' -f1)
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "python venv (.venv) from backend/requirements.lock"
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -r backend/requirements.lock
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
    (cd frontend && rm -rf node_modules && npm install --no-save --no-audit --no-fund --loglevel=error)
    echo "$fwant" > "$fstamp"
  fi
fi
