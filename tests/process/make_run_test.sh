#!/usr/bin/env bash
# `make run` as a newcomer meets it: scripts/run.sh started exactly as the Makefile starts it
# (from the repository root, with the built binary), on its own data directory and port. After
# 30 s it must still be serving: /healthz, the console, the demo tenant's allocations, and every
# demo agent heartbeating. Then Ctrl-C (SIGINT) must stop the script, the server and the agents.
# Usage: make_run_test.sh SOURCE_DIR GPUPLANE_BINARY [plaintext|tls]
set -euo pipefail
src=$1
bin=$(realpath "$2")
mode=${3:-tls}
work=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
script_pid=
finish() {
  [ -n "$script_pid" ] && kill -9 -- "-$script_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap finish EXIT
die() {
  echo "FAIL: $*" >&2
  echo "--- run.sh output" >&2; cat "$work/out" >&2 || true
  echo "--- server.log (tail)" >&2; tail -20 "$work/data/server.log" >&2 || true
  echo "--- agents.log (tail)" >&2; tail -20 "$work/data/agents.log" >&2 || true
  exit 1
}

env=(GPUPLANE_DATA="$work/data" GPUPLANE_LISTEN="127.0.0.1:$port" GPUPLANE_CONFIG="$work/none")
[ "$mode" = plaintext ] && env+=(GPUPLANE_PLAINTEXT=1)
# Its own process group, so the test can signal the script as a terminal's Ctrl-C would.
cd "$src"
setsid env -u GPUPLANE_ENDPOINT -u GPUPLANE_TOKEN -u GPUPLANE_CA_FILE "${env[@]}" \
  scripts/run.sh "$bin" >"$work/out" 2>&1 &
script_pid=$!

# The closing message says the demo is up; then it must stay up.
for _ in $(seq 300); do
  grep -q "Stop with Ctrl-C" "$work/out" 2>/dev/null && break
  kill -0 "$script_pid" 2>/dev/null || die "run.sh exited before serving"
  sleep 0.2
done
grep -q "Stop with Ctrl-C" "$work/out" || die "run.sh printed no closing message within 60 s"
sleep 30
kill -0 "$script_pid" 2>/dev/null || die "run.sh died after starting"

if [ "$mode" = plaintext ]; then
  endpoint="http://127.0.0.1:$port"
  curl_tls=()
  export GPUPLANE_ENDPOINT=$endpoint
else
  endpoint="https://127.0.0.1:$port"
  curl_tls=(--cacert "$work/data/tls/ca.pem")
  export GPUPLANE_ENDPOINT=$endpoint GPUPLANE_CA_FILE="$work/data/tls/ca.pem"
fi
export GPUPLANE_CONFIG="$work/none"
export GPUPLANE_TOKEN=$(sed -n 's/^api_key: //p' "$work/data/admin-credential")
[ -n "$GPUPLANE_TOKEN" ] || die "no admin credential in $work/data/admin-credential"
curl -sf "${curl_tls[@]}" "$endpoint/healthz" >/dev/null || die "/healthz does not answer"
curl -sf "${curl_tls[@]}" "$endpoint/console/" | grep -qi "<html" || die "/console/ does not answer"

"$bin" --output json allocation list --tenant acme >"$work/allocs.json" ||
  die "the demo tenant's allocations do not answer"
"$bin" --output json node list >"$work/nodes.json" || die "node list does not answer"
python3 - "$work/allocs.json" "$work/nodes.json" "$src/deploy/demo" <<'PY' || die "demo state"
import datetime, json, os, sys
allocs = json.load(open(sys.argv[1]))
allocs = allocs.get("items", allocs) if isinstance(allocs, dict) else allocs
if not allocs:
    sys.exit("the demo tenant acme has no allocations")
nodes = json.load(open(sys.argv[2]))
nodes = nodes.get("items", nodes) if isinstance(nodes, dict) else nodes
want = len([f for f in os.listdir(sys.argv[3]) if f.endswith(".json")])
now = datetime.datetime.now(datetime.timezone.utc)
fresh = 0
for n in nodes:
    hb = n.get("last_heartbeat")
    if hb and (now - datetime.datetime.fromisoformat(hb.replace("Z", "+00:00"))).total_seconds() < 25:
        fresh += 1
if fresh != want:
    sys.exit(f"{fresh} of {want} demo agents heartbeated in the last 25 s: {json.dumps(nodes)[:2000]}")
print(f"{len(allocs)} acme allocations, {fresh} agents heartbeating")
PY

# Ctrl-C stops everything it started.
pids=$(pgrep -g "$script_pid" | tr '\n' ' ')
kill -INT -- "-$script_pid"
for _ in $(seq 100); do
  pgrep -g "$script_pid" >/dev/null || break
  sleep 0.1
done
left=$(pgrep -g "$script_pid" -a || true)
[ -z "$left" ] || die "still running 10 s after Ctrl-C: $left"
script_pid=
echo "PASS: make run ($mode) served for 30 s and stopped on Ctrl-C (processes: $pids)"
