#!/usr/bin/env bash
# A throwaway PostgreSQL 15 cluster for the tests: `pg_cluster.sh start DIR` runs initdb and
# pg_ctl under DIR (listening on 127.0.0.1 on a free port, trust authentication, no system
# service) and writes its libpq connection string to DIR/conninfo; `pg_cluster.sh restart DIR`
# restarts it on the same port (fast shutdown: sessions are cut); `pg_cluster.sh stop DIR`
# stops it and removes DIR. As root, the cluster runs as the `postgres` user (initdb refuses
# root). The cluster is thrown away after the tests, so it skips fsync and full-page writes:
# the tests kill gpuplane or restart PostgreSQL, never the host, and every commit is still
# written to the operating system before it returns.
set -euo pipefail
cmd=${1:?usage: pg_cluster.sh start|restart|stop DIR}
dir=${2:?usage: pg_cluster.sh start|restart|stop DIR}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$bin/initdb" ] || { echo "pg_cluster: PostgreSQL server binaries not found (scripts/setup.sh installs them)" >&2; exit 1; }
as_owner() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

case "$cmd" in
  start)
    [ -f "$dir/conninfo" ] && as_owner "$bin/pg_ctl" -D "$dir/data" stop -m immediate >/dev/null 2>&1 || true
    rm -rf "$dir" && mkdir -p "$dir"
    [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$dir"
    as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
      { cat "$dir/initdb.log" >&2; exit 1; }
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start \
      -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=400 -c shared_buffers=128MB -c fsync=off -c full_page_writes=off" >/dev/null ||
      { cat "$dir/server.log" >&2; exit 1; }
    echo "host=127.0.0.1 port=$port user=postgres dbname=postgres" >"$dir/conninfo"
    echo "pg_cluster: PostgreSQL on 127.0.0.1:$port ($dir)"
    ;;
  restart)
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 restart -m fast >/dev/null ||
      { cat "$dir/server.log" >&2; exit 1; }
    ;;
  stop)
    [ -d "$dir/data" ] && as_owner "$bin/pg_ctl" -D "$dir/data" stop -m fast -w >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
  *) echo "usage: pg_cluster.sh start|restart|stop DIR" >&2; exit 2 ;;
esac
