#!/usr/bin/env bash
# UI bench: a 24-agent fleet (3 providers x 4 regions x 2 zones) with 24 h of mesh data,
# seeded through the ingest API; measures how long the overview takes to become interactive
# in headless Chromium and the gzipped size of the production JS.
# Last line: "ui: overview interactive <x> ms, bundle <x> kB gz".
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
frontend="$here/../../frontend"
cd "$frontend"
if [ ! -d node_modules ]; then npm ci --no-audit --no-fund >&2; fi
npm run build >&2
exec node "$here/bench.mjs" "$@"
