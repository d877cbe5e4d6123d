#!/usr/bin/env bash
# Path-tracing bench (docs/paths.md): builds agents/testbed/cmd/benchpaths and runs it as root.
# It makes a chain of network namespaces (host, three routers, destination; veth links, or
# links delayed BENCH_PATHS_DELAY each way by testbed/linkem), meshes host to destination,
# alternates quiet phases with phases of TCP traces at BENCH_PATHS_PER_MIN traces a minute
# (default 6: 60 peers at the default 600 s interval), takes each round's shift of the mesh
# median against the quiet phase just before it, and ends with one line:
#   paths: trace <ms> ms for <n> hops, mesh p50 shift <us> us, agent cpu <pct>% of a core at <n> traces/min
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="$(mktemp -d "${TMPDIR:-/tmp}/stormwatch-bench-paths.XXXXXX")"
trap 'rm -rf "$bin"' EXIT
(cd "$root/agents" && CGO_ENABLED=0 go build -o "$bin/benchpaths" ./testbed/cmd/benchpaths)
exec "$bin/benchpaths" -phase "${BENCH_PATHS_PHASE:-10s}" -rounds "${BENCH_PATHS_ROUNDS:-8}" \
  -traces-per-min "${BENCH_PATHS_PER_MIN:-6}" -link-delay "${BENCH_PATHS_DELAY:-0}"
