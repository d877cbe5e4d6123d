#!/usr/bin/env bash
# Agent benchmark: builds the agent and StormCloud (the reference tool of seed 003, from its
# tarball, outside the repository), installs sockperf when absent, runs bench/agent and ends
# with the one-line summary.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
if ! command -v sockperf >/dev/null 2>&1; then
  apt-get install -y sockperf >/dev/null
fi
make -C "$root/agents" build >/dev/null

# StormCloud (UNH-CLT) is a benchmark reference only: it is built under $BENCH_DIR (default
# a folder in /tmp), never in the repository. PEERS_DIR overrides where its tarball is.
tarball_name=unh-clt-a9a7094.tar.gz
tarball=""
for d in ${PEERS_DIR:-} "$root/../shared/peers" "$root/../../shared/peers"; do
  if [ -n "$d" ] && [ -f "$d/$tarball_name" ]; then tarball="$(cd "$d" && pwd)/$tarball_name"; break; fi
done
if [ -z "$tarball" ]; then
  echo "agent-bench: StormCloud's source $tarball_name not found in \$PEERS_DIR, $root/../shared/peers or $root/../../shared/peers" >&2
  exit 1
fi
sc_dir="${BENCH_DIR:-/tmp/stormwatch-bench}/${tarball_name%.tar.gz}"
if [ ! -x "$sc_dir/unh-clt/bin/node" ] || [ ! -x "$sc_dir/unh-clt/bin/master" ] || [ "$tarball" -nt "$sc_dir/unh-clt/bin/node" ]; then
  rm -rf "$sc_dir" && mkdir -p "$sc_dir"
  tar -xzf "$tarball" -C "$sc_dir"
  (cd "$sc_dir/unh-clt" && go build -o bin/node ./main/node/ && go build -o bin/master ./main/master/) \
    || { echo "agent-bench: building StormCloud in $sc_dir failed" >&2; exit 1; }
fi

cd "$here"
go run . -agent-bin "$root/agents/bin/stormwatch-agent" -agents-dir "$root/agents" -sc-bin "$sc_dir/unh-clt/bin" "$@"
