#!/usr/bin/env bash
# A throwaway PostgreSQL for tests and figures: a fresh cluster in a temporary folder on a free
# loopback port, trust authentication, stopped (and its folder removed) by `stop`.
#
#   scripts/pg.sh start [DIR]   prints the URL (postgres://postgres@127.0.0.1:PORT/postgres);
#                               DIR defaults to a new temporary folder, written to $DIR/url
#   scripts/pg.sh stop DIR      stops the cluster and removes DIR
#
# Debian's packages: installs `postgresql` when no initdb is found. PostgreSQL refuses to run
# as root, so as root the cluster belongs to (and runs as) the `postgres` user.
set -euo pipefail

find_bin() {
    local name=$1 d
    if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return; fi
    for d in /usr/lib/postgresql/*/bin; do
        [ -x "$d/$name" ] && { echo "$d/$name"; return; }
    done
    return 1
}

as_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start() {
    if ! find_bin initdb >/dev/null; then
        echo "pg.sh: no initdb; installing Debian's postgresql" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2
        apt-get install -y -qq postgresql >&2
    fi
    local initdb pg_ctl dir port
    initdb=$(find_bin initdb)
    pg_ctl=$(find_bin pg_ctl)
    dir=${1:-$(mktemp -d /tmp/harness-pg.XXXXXX)}
    mkdir -p "$dir"
    if [ "$(id -u)" = 0 ]; then
        id postgres >/dev/null 2>&1 || useradd --system --home-dir "$dir" postgres
        chown postgres "$dir"
        chmod 700 "$dir"
    fi
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    as_owner "$initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; exit 1; }
    as_owner "$pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=300" start >&2 \
        || { cat "$dir/server.log" >&2; exit 1; }
    echo "postgres://postgres@127.0.0.1:$port/postgres" | tee "$dir/url"
    echo "pg.sh: cluster in $dir (stop: scripts/pg.sh stop $dir)" >&2
}

stop() {
    local dir=${1:?usage: pg.sh stop DIR}
    [ -d "$dir/data" ] || { echo "pg.sh: no cluster in $dir" >&2; return 0; }
    as_owner "$(find_bin pg_ctl)" -D "$dir/data" -m fast -w stop >&2 || true
    rm -rf "$dir"
}

case "${1:-}" in
    start) shift; start "$@" ;;
    stop) shift; stop "$@" ;;
    *) echo "usage: $0 start [DIR] | stop DIR" >&2; exit 2 ;;
esac
