#!/usr/bin/env bash
# Stops emulators started by start.sh. Usage: stop.sh RUNDIR [moto|azurite|fakegcs ...]
set -uo pipefail
rundir="${1:?usage: stop.sh RUNDIR [name ...]}"
shift
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(moto azurite fakegcs)
for n in "${names[@]}"; do
	f="$rundir/$n.pid"
	[ -f "$f" ] || continue
	pid="$(cat "$f")"
	# The emulator was started with setsid, so its pid is its process group.
	kill -TERM -- "-$pid" 2>/dev/null || true
	for _ in $(seq 50); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL -- "-$pid" 2>/dev/null || true
	rm -f "$f"
done
