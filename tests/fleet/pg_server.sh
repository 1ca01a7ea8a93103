#!/usr/bin/env bash
# A private PostgreSQL server for the fleet tests, from Debian's postgresql package: its own data
# folder and socket under DIR, on a port of its own, so it neither needs nor disturbs the cluster
# the package starts. As root (CI) the server runs as the postgres user (runuser); otherwise as
# the caller.
#
#   pg_server.sh start DIR   initdb + pg_ctl start; prints the superuser's URL on stdout
#   pg_server.sh stop DIR    pg_ctl stop (immediate), then removes DIR
#
# Exit status 77 when the server binaries are absent (the tests report a skip).
# Authentication: the superuser "postgres" is trusted on the socket; every other role needs its
# password (scram-sha-256), so a wrong password is refused as on a real server.
set -euo pipefail

mode="${1:?usage: pg_server.sh start|stop DIR}"
dir="${2:?usage: pg_server.sh start|stop DIR}"
bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
if [[ -z "$bin" || ! -x "$bin/initdb" ]]; then
    echo "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin (Debian package postgresql)" >&2
    exit 77
fi
as_owner() {
    if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "$mode" in
start)
    if [[ $(id -u) -eq 0 ]] && ! runuser -u postgres -- test -x "$bin/initdb"; then
        echo "the postgres user cannot run $bin/initdb: a folder on its path is not open to other users" >&2
        exit 1
    fi
    mkdir -p "$dir"
    [[ $(id -u) -eq 0 ]] && chown postgres "$dir"
    as_owner "$bin/initdb" -D "$dir/data" -U postgres -A trust --no-sync >"$dir/initdb.log" 2>&1 ||
        { cat "$dir/initdb.log" >&2; exit 1; }
    printf 'local all postgres trust\nlocal all all scram-sha-256\n' >"$dir/data/pg_hba.conf"
    [[ $(id -u) -eq 0 ]] && chown postgres "$dir/data/pg_hba.conf"
    # a free port: the socket file names it, and nothing listens on TCP
    port=$((20000 + RANDOM % 20000))
    while [[ -e "$dir/.s.PGSQL.$port" ]]; do port=$((port + 1)); done
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-c listen_addresses='' -c unix_socket_directories='$dir' -p $port -c fsync=off -c max_connections=60" start >/dev/null ||
        { cat "$dir/server.log" >&2; exit 1; }
    echo "$port" >"$dir/port"
    echo "postgresql://postgres@/postgres?host=$dir&port=$port"
    ;;
stop)
    [[ -d "$dir/data" ]] && as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
*)
    echo "usage: pg_server.sh start|stop DIR" >&2
    exit 2
    ;;
esac
