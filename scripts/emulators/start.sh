#!/usr/bin/env bash
# Starts one object-storage emulator on a free loopback port and waits until it answers.
# Usage: start.sh moto|azurite|fakegcs RUNDIR
# Prints the endpoint URL on stdout (Azurite: the account's blob service URL).
# Writes RUNDIR/NAME.pid (the emulator's process group leader) and RUNDIR/NAME.log.
# Installs the emulator first when it is missing (install.sh). Stop it with stop.sh.
set -euo pipefail

name="${1:?usage: start.sh moto|azurite|fakegcs RUNDIR}"
rundir="${2:?usage: start.sh moto|azurite|fakegcs RUNDIR}"
here="$(cd "$(dirname "$0")" && pwd)"
DIR="${STORMWATCH_EMULATOR_DIR:-$HOME/.cache/stormwatch/emulators}"
READY_TIMEOUT_S="${READY_TIMEOUT_S:-60}"
mkdir -p "$rundir"

"$here/install.sh" "$name" >&2

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# ready URL answers with any HTTP status once the emulator serves requests.
ready() {
	local code
	code="$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$1" || true)"
	[ -n "$code" ] && [ "$code" != "000" ]
}

launch() {
	local port="$1" log="$rundir/$name.log"
	case "$name" in
	moto)
		setsid "$DIR/bin/moto_server" -H 127.0.0.1 -p "$port" >"$log" 2>&1 &
		endpoint="http://127.0.0.1:$port"
		probe="$endpoint/moto-api/"
		;;
	azurite)
		# In-memory persistence; the debug-less run still writes its metadata to the cwd.
		(cd "$rundir" && exec setsid "$DIR/bin/azurite-blob" --blobHost 127.0.0.1 --blobPort "$port" \
			--inMemoryPersistence --skipApiVersionCheck \
			--loose --disableProductStyleUrl) >"$log" 2>&1 &
		endpoint="http://127.0.0.1:$port/devstoreaccount1"
		probe="$endpoint?comp=list"
		;;
	fakegcs)
		# A public host without a port matches any port, so proxies in front of it work too.
		setsid "$DIR/bin/fake-gcs-server" -scheme http -host 127.0.0.1 -port "$port" \
			-backend memory -public-host 127.0.0.1 -external-url "http://127.0.0.1:$port" \
			-log-level warn >"$log" 2>&1 &
		endpoint="http://127.0.0.1:$port"
		probe="$endpoint/storage/v1/b"
		;;
	*)
		echo "unknown emulator $name" >&2
		exit 2
		;;
	esac
	pid=$!
	echo "$pid" >"$rundir/$name.pid"
}

# A port found free can be taken before the emulator binds it: try a few.
for try in 1 2 3; do
	port="$(free_port)"
	launch "$port"
	deadline=$((SECONDS + READY_TIMEOUT_S))
	while [ $SECONDS -lt $deadline ]; do
		if ! kill -0 "$pid" 2>/dev/null; then
			break
		fi
		if ready "$probe"; then
			echo "$endpoint"
			exit 0
		fi
		sleep 0.2
	done
	# The process group exists only once setsid has run: signal the process itself too.
	kill -- "-$pid" 2>/dev/null || true
	kill "$pid" 2>/dev/null || true
	echo "emulators: $name did not become ready on port $port (try $try); log:" >&2
	tail -n 20 "$rundir/$name.log" >&2 || true
done
exit 1
