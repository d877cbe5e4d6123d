#!/usr/bin/env bash
# Starts or stops a fleet of local agents meshing over loopback, for `make run` and demos.
#   local-fleet.sh start <api_url> <enrollment_token> [count=3] [dir=.stormwatch/agents]
#   local-fleet.sh stop [dir=.stormwatch/agents]
# Each agent gets its own state directory, mesh port and metrics port; zones alternate so
# the default quorum groups have members. Logs: <dir>/<name>/agent.log.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${STORMWATCH_AGENT_BIN:-$here/../bin/stormwatch-agent}"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

case "${1:-}" in
start)
  api_url="$2"; token="$3"; count="${4:-3}"; dir="${5:-.stormwatch/agents}"
  [ -x "$bin" ] || make -C "$here/.." build >/dev/null
  mkdir -p "$dir"
  for i in $(seq 1 "$count"); do
    name="local-$i"; home="$dir/$name"; mkdir -p "$home"
    if [ -f "$home/pid" ] && kill -0 "$(cat "$home/pid")" 2>/dev/null; then
      echo "$name already running (pid $(cat "$home/pid"))"; continue
    fi
    zone="local-$(( (i - 1) % 2 == 0 ? 1 : 2 ))"
    # Keep the mesh port across restarts so peers' configured addresses stay valid.
    [ -f "$home/mesh_port" ] || free_port > "$home/mesh_port"
    [ -f "$home/metrics_port" ] || free_port > "$home/metrics_port"
    cat > "$home/agent.yaml" <<YAML
api_url: $api_url
enrollment_token: $token
state_dir: $home/state
name: $name
mesh:
  listen: "127.0.0.1:$(cat "$home/mesh_port")"
throughput:
  listen: "127.0.0.1:0"
metadata:
  detect: false
  provider: local
  region: local
  zone: $zone
  subnet: lo
metrics:
  listen: "127.0.0.1:$(cat "$home/metrics_port")"
YAML
    # Enroll first so that every agent's first config already lists all peers.
    "$bin" enroll -config "$home/agent.yaml" >>"$home/agent.log" 2>&1
  done
  for i in $(seq 1 "$count"); do
    home="$dir/local-$i"
    if [ -f "$home/pid" ] && kill -0 "$(cat "$home/pid")" 2>/dev/null; then continue; fi
    nohup "$bin" run -config "$home/agent.yaml" >>"$home/agent.log" 2>&1 &
    echo $! > "$home/pid"
    echo "local-$i: pid $!, metrics http://127.0.0.1:$(cat "$home/metrics_port")/metrics"
  done
  ;;
stop)
  dir="${2:-.stormwatch/agents}"
  for pidf in "$dir"/*/pid; do
    [ -f "$pidf" ] || continue
    pid="$(cat "$pidf")"
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid"
      for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    fi
    rm -f "$pidf"
  done
  ;;
*)
  sed -n '2,6p' "$0"; exit 2 ;;
esac
