#!/usr/bin/env bash
# `make run`: the control plane on https://127.0.0.1:8080 with its embedded SQLite store under
# ./var, plus a demo fleet of simulated node agents (H200 and A100 nodes, some GPUs in MIG mode,
# one pool dedicated to the demo tenant "acme"). Ctrl-C stops everything.
# On first start a local CA and a server certificate for 127.0.0.1, ::1 and localhost are made in
# ./var/tls (kept afterwards); the CLI and the agents trust that CA. GPUPLANE_PLAINTEXT=1 serves
# plain HTTP instead.
set -euo pipefail
bin=$(realpath "${1:-build/src/gpuplane}")
# The demo fleet's inventories, wherever the script is started from.
demo_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/deploy/demo"
data=${GPUPLANE_DATA:-var}
demo_image=localhost/gpuplane-demo/busybox:1
jobs=()
listen=${GPUPLANE_LISTEN:-127.0.0.1:8080}
demo=${GPUPLANE_DEMO:-1}
mkdir -p "$data"
cred="$data/admin-credential"
if [ "${GPUPLANE_PLAINTEXT:-0}" = 1 ]; then
  export GPUPLANE_ENDPOINT="http://$listen"
  transport=(--plaintext)
  curl_tls=()
  agent_tls=()
else
  # Never regenerated: an existing CA stays trusted by the CLI configs and agents that use it.
  "$bin" tls dev-certs --dir "$data/tls" >/dev/null
  export GPUPLANE_ENDPOINT="https://$listen"
  export GPUPLANE_CA_FILE="$(realpath "$data/tls/ca.pem")"
  transport=(--tls-cert "$data/tls/server.pem" --tls-key "$data/tls/server.key")
  curl_tls=(--cacert "$GPUPLANE_CA_FILE")
  agent_tls=(--ca-file "$GPUPLANE_CA_FILE")
fi

pids=()
declare -A agent_pid=()  # demo node name -> its agent's pid
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
# Ctrl-C (or a TERM) ends the script; leaving it, however it ends, stops the server and agents.
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

"$bin" serve --data "$data" --listen "$listen" --bootstrap-credential-file "$cred" \
  "${transport[@]}" 2>"$data/server.log" &
pids+=($!)
for _ in $(seq 1 100); do
  curl -sf "${curl_tls[@]}" "$GPUPLANE_ENDPOINT/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -sf "${curl_tls[@]}" "$GPUPLANE_ENDPOINT/healthz" >/dev/null || { echo "server did not start; see $data/server.log"; exit 1; }
export GPUPLANE_TOKEN=$(sed -n 's/^api_key: //p' "$cred")

if [ "$demo" = 1 ]; then
  if [ ! -f "$data/demo-fleet" ]; then
    "$bin" tenant create acme --class sensitive --admin alice >/dev/null
    "$bin" pool create acme-dedicated --tenant acme --description "H200 node dedicated to acme" >/dev/null
    "$bin" project create --tenant acme training >/dev/null
    "$bin" tenant create lab --class standard --admin bob >/dev/null
    "$bin" project create --tenant lab research >/dev/null
    # The service catalog and quotas (GPU-equivalents per model).
    "$bin" offering create h200-8x-node --tier dedicated-node --model H200 --gpus 8 >/dev/null
    "$bin" offering create h200-1x --tier dedicated-gpu --model H200 >/dev/null
    "$bin" offering create h200-mig-3g --tier mig --model H200 --mig-profile 3g.71gb >/dev/null
    "$bin" offering create h200-shared-250 --tier shared --model H200 --milli 250 >/dev/null
    "$bin" offering create a100-1x --tier dedicated-gpu --model A100-80GB >/dev/null
    "$bin" quota set --tenant acme --model H200 --nominal 8 --limit 16 --cohort demo >/dev/null
    "$bin" quota set --tenant lab --model H200 --nominal 2 --cohort demo >/dev/null
    "$bin" quota set --tenant lab --model A100-80GB --nominal 4 >/dev/null
    for n in "$demo_dir"/*.json; do
      name=$(basename "$n" .json)
      pool=()
      [ "$name" = h200-dedicated ] && pool=(--pool acme-dedicated)
      "$bin" node join-token "${pool[@]}" --ttl 600 | head -1 >"$data/join-$name"
    done
    touch "$data/demo-fleet"
  fi
  # As root with podman, the demo agents run jobs (docs/jobs.md) from a local image made of
  # busybox-static (nothing is pulled; lab is a standard tenant, so its jobs use the local image
  # where a sensitive tenant's would pull every time).
  if [ "$(id -u)" = 0 ] && command -v podman >/dev/null && [ -x /bin/busybox ]; then
    if ! podman image exists "$demo_image" 2>/dev/null; then
      img=$(mktemp -d)
      mkdir -p "$img/root/bin" "$img/root/tmp"
      cp /bin/busybox "$img/root/bin/busybox"
      for a in sh cat ls echo sleep nc seq env id head tail grep wc test; do
        ln -s busybox "$img/root/bin/$a"
      done
      tar -C "$img/root" -cf "$img/image.tar" bin tmp &&
        podman import --quiet "$img/image.tar" "$demo_image" >/dev/null || true
      rm -rf "$img"
    fi
    podman image exists "$demo_image" 2>/dev/null && jobs=(--jobs)
  fi
  for n in "$demo_dir"/*.json; do
    name=$(basename "$n" .json)
    token=()
    [ -f "$data/join-$name" ] && token=(--join-token-file "$data/join-$name")
    # Each simulated node works on its own copy: the agent rewrites it as it applies the
    # scheduler's MIG plans (docs/lifecycle.md), and an operator may edit it live.
    mkdir -p "$data/agents/$name"
    [ -f "$data/agents/$name/inventory.json" ] || cp -- "$n" "$data/agents/$name/inventory.json"
    "$bin" agent --server "$GPUPLANE_ENDPOINT" "${agent_tls[@]}" --state-dir "$data/agents/$name" \
      --simulate "$data/agents/$name/inventory.json" --heartbeat-seconds 10 "${jobs[@]}" \
      "${token[@]}" 2>>"$data/agents.log" &
    pids+=($!)
    agent_pid[$name]=$!
  done
  # A join token is removed once its agent has enrolled (its credential is in its state
  # directory), has exited, or 60 s have passed: a slow start (a sanitizer build, a loaded
  # machine) still finds it.
  for n in "$demo_dir"/*.json; do
    name=$(basename "$n" .json)
    for _ in $(seq 300); do
      [ -f "$data/join-$name" ] && [ ! -s "$data/agents/$name/node-credential" ] &&
        kill -0 "${agent_pid[$name]}" 2>/dev/null || break
      sleep 0.2
    done
    rm -f "$data/join-$name"
  done
  if [ ! -f "$data/demo-allocations" ]; then
    # Wait for the agents to enrol (up to 60 s), then place a few allocations so the queue is
    # not empty.
    for _ in $(seq 300); do
      [ "$("$bin" --output json fleet summary 2>/dev/null | sed -n 's/.*"gpus_total": *\([0-9]*\).*/\1/p')" -ge 36 ] 2>/dev/null && break
      sleep 0.2
    done
    "$bin" allocation create --tenant acme --project training --offering h200-1x --count 2 || true
    "$bin" allocation create --tenant lab --project research --offering h200-mig-3g --count 2 || true
    "$bin" allocation create --tenant lab --project research --offering a100-1x --count 6 || true
    touch "$data/demo-allocations"
  fi
fi

# The closing message is a here-document: values with shell syntax in them are made here first.
job_hint=""
if [ "${#jobs[@]}" -gt 0 ]; then
  job_hint="  $bin job run --tenant lab --project research --offering h200-1x --image $demo_image --follow -- sh -c 'echo hello from \$NVIDIA_VISIBLE_DEVICES'"
fi
if [ -n "${GPUPLANE_CA_FILE:-}" ]; then
  trust="your browser must trust $GPUPLANE_CA_FILE"
else
  trust="plain HTTP, no certificate"
fi
cat <<MSG
gpuplane is serving on $GPUPLANE_ENDPOINT (data in $data/, logs in $data/*.log).
The console: $GPUPLANE_ENDPOINT/console/ (user admin, password in $cred; $trust).
Log in as the platform admin (credential in $cred, written on first start, mode 0600):
  export GPUPLANE_ENDPOINT=$GPUPLANE_ENDPOINT
  export GPUPLANE_CA_FILE=${GPUPLANE_CA_FILE:-}
  export GPUPLANE_TOKEN=\$(sed -n 's/^api_key: //p' $cred)     # or: $bin login -u admin
  $bin fleet summary
  $bin node list
  $bin fleet map --svg fleet.svg
  $bin tenant list
  $bin queue
  $bin allocation list --tenant lab
  $bin why --tenant lab --project research ALLOCATION
$job_hint
Stop with Ctrl-C.
MSG
wait "${pids[0]}"
