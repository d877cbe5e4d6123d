#!/usr/bin/env bash
# Installs the object-storage emulators used by the storage-probe tests:
#   moto server (S3, PyPI), Azurite (Azure Blob, npm), fake-gcs-server (GCS, Go proxy).
# Everything goes under $STORMWATCH_EMULATOR_DIR (default ~/.cache/stormwatch/emulators),
# never into the project venv. Idempotent: an installed emulator is left alone.
# Usage: install.sh [moto|azurite|fakegcs ...]   (no argument: all three)
set -euo pipefail

DIR="${STORMWATCH_EMULATOR_DIR:-$HOME/.cache/stormwatch/emulators}"
MOTO_VERSION="${MOTO_VERSION:-5.2.5}"
AZURITE_VERSION="${AZURITE_VERSION:-3.35.0}"
FAKE_GCS_VERSION="${FAKE_GCS_VERSION:-v1.56.1}"
mkdir -p "$DIR/bin"

log() { printf 'emulators: %s\n' "$*" >&2; }

install_moto() {
	if [ -x "$DIR/moto/bin/moto_server" ] && "$DIR/moto/bin/python" -c 'import moto, flask' 2>/dev/null; then
		return 0
	fi
	log "installing moto[server]==$MOTO_VERSION"
	python3 -m venv "$DIR/moto"
	"$DIR/moto/bin/pip" install --quiet --disable-pip-version-check "moto[server]==$MOTO_VERSION"
	ln -sf "$DIR/moto/bin/moto_server" "$DIR/bin/moto_server"
}

install_azurite() {
	if [ -x "$DIR/azurite/node_modules/.bin/azurite-blob" ]; then
		return 0
	fi
	log "installing azurite@$AZURITE_VERSION"
	mkdir -p "$DIR/azurite"
	npm install --silent --no-audit --no-fund --prefix "$DIR/azurite" "azurite@$AZURITE_VERSION" >/dev/null
	ln -sf "$DIR/azurite/node_modules/.bin/azurite-blob" "$DIR/bin/azurite-blob"
}

install_fakegcs() {
	if [ -x "$DIR/bin/fake-gcs-server" ]; then
		return 0
	fi
	log "installing fake-gcs-server@$FAKE_GCS_VERSION"
	# Built outside any module so it never touches the project's go.mod.
	(cd "$DIR" && GOBIN="$DIR/bin" CGO_ENABLED=0 GOFLAGS=-mod=mod go install "github.com/fsouza/fake-gcs-server@$FAKE_GCS_VERSION")
}

which_ones=("$@")
[ ${#which_ones[@]} -eq 0 ] && which_ones=(moto azurite fakegcs)
status=0
for e in "${which_ones[@]}"; do
	case "$e" in
	moto) install_moto || { log "moto install failed"; status=1; } ;;
	azurite) install_azurite || { log "azurite install failed"; status=1; } ;;
	fakegcs) install_fakegcs || { log "fake-gcs-server install failed"; status=1; } ;;
	*) log "unknown emulator $e"; status=2 ;;
	esac
done
exit $status
