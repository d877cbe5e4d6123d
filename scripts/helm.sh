#!/usr/bin/env bash
# Prints the path of a helm binary: the one on PATH, else one built from helm's Go module
# into a cache shared by every checkout on this machine (no Debian package offers helm).
set -euo pipefail
version=v3.22.0
if command -v helm >/dev/null 2>&1; then command -v helm; exit 0; fi
dir="${XDG_CACHE_HOME:-$HOME/.cache}/stormwatch/helm-$version"
if [ ! -x "$dir/helm" ]; then
  echo "[helm] building helm $version from its Go module into $dir (once per machine)" >&2
  mkdir -p "$dir"
  GOBIN="$dir" GOFLAGS=-buildvcs=false CGO_ENABLED=0 \
    go install "helm.sh/helm/v3/cmd/helm@$version" >&2
fi
echo "$dir/helm"
