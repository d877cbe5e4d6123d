#!/usr/bin/env bash
# UI bench: a 24-agent fleet (3 providers x 4 regions x 2 zones) with 24 h of mesh data,
# seeded through the ingest API (one round per SW_BENCH_INTERVAL_S, default 10 s); measures
# how long the overview takes to become interactive in headless Chromium at the region level
# (the default) and the node level (24x24), and the gzipped size of the production JS.
# Last line: "ui: overview interactive <x> ms, bundle <x> kB gz" (x = the slower level).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
frontend="$here/../../frontend"
cd "$frontend"
# Same install as scripts/bootstrap.sh: exactly the lock, without `npm ci` (npm 11 keeps only
# this platform's optional packages in the lock and then refuses it in `ci`).
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -d node_modules ] || [ "$(cat node_modules/.lock.sha 2>/dev/null)" != "$want" ]; then
  rm -rf node_modules
  npm install --no-save --no-audit --no-fund --loglevel=error >&2
  echo "$want" > node_modules/.lock.sha
fi
npm run build >&2
exec node "$here/bench.mjs" "$@"
