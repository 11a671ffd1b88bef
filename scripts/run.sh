#!/usr/bin/env bash
# Starts the control plane for `make run`: embedded SQLite under ./var, HTTP on 127.0.0.1:8080.
set -euo pipefail
bin=${1:-build/src/gpuplane}
data=${GPUPLANE_DATA:-var}
listen=${GPUPLANE_LISTEN:-127.0.0.1:8080}
mkdir -p "$data"
cred="$data/admin-credential"
cat <<MSG
Starting gpuplane on http://$listen (data in $data/).
Log in as the platform admin:
  export GPUPLANE_ENDPOINT=http://$listen
  $bin login -u admin          # password: see $cred (written on first start, mode 0600)
or use the bootstrap API key from $cred:
  export GPUPLANE_TOKEN=\$(sed -n 's/^api_key: //p' $cred)
  $bin tenant create acme --class standard --admin alice
Stop with Ctrl-C.
MSG
exec "$bin" serve --data "$data" --listen "$listen" --bootstrap-credential-file "$cred"
