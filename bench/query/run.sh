#!/usr/bin/env bash
# Query bench (issue 5): loads a 24-agent fleet's 7 days of rollups and 1 day of raw samples
# into a throwaway PostgreSQL, times every analysis endpoint, and ends with
#   query: heatmap_24h p95 <x> ms, pair_7d p95 <x> ms
# Smaller runs: BENCH_DAYS=2 BENCH_RAW_HOURS=2 bench/query/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON="${PYTHON:-.venv/bin/python}"
exec "$PYTHON" bench/query/bench.py "$@"
