#!/usr/bin/env bash
# Run a command with MELO_TEST_PG_URL naming a throwaway local PostgreSQL server.
#
#   scripts/with_postgres.sh CMD [ARGS...]
#
# - MELO_TEST_PG_URL already set: run CMD as it is (your own server).
# - Else find Debian's PostgreSQL server (/usr/lib/postgresql/*/bin); if it is missing and we are
#   root with apt-get (a fresh CI machine), install the `postgresql` package quietly
#   (MELO_NO_APT=1 forbids it).
# - initdb a cluster in a temporary folder (as the `postgres` user when root: initdb refuses
#   root), start it on a free port of 127.0.0.1 with its socket in that folder, export
#   MELO_TEST_PG_URL, run CMD, then stop the server and delete the folder, whatever happens.
# - No PostgreSQL to be had: one notice on stderr, and CMD runs anyway (the PG tests skip).
#
# The exit status is CMD's.
set -uo pipefail

if [ $# -eq 0 ]; then
    echo "usage: $0 CMD [ARGS...]" >&2
    exit 2
fi
if [ -n "${MELO_TEST_PG_URL:-}" ]; then
    exec "$@"
fi

notice() { echo "with_postgres: $*" >&2; }

find_bindir() {
    local dir
    # Newest Debian major version first.
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -n -r); do
        if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] && [ -x "$dir/postgres" ]; then
            echo "$dir"
            return 0
        fi
    done
    if command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then
        dirname "$(readlink -f "$(command -v pg_ctl)")"
        return 0
    fi
    return 1
}

is_root() { [ "$(id -u)" = 0 ]; }

bindir=$(find_bindir)
if [ -z "$bindir" ] && is_root && command -v apt-get >/dev/null 2>&1 && [ "${MELO_NO_APT:-}" != 1 ]; then
    notice "installing PostgreSQL (Debian package postgresql) for the store tests..."
    apt_log=$(mktemp)
    if (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql) \
        >"$apt_log" 2>&1; then
        bindir=$(find_bindir)
    else
        tail -n 5 "$apt_log" >&2
    fi
    rm -f "$apt_log"
fi
if [ -z "$bindir" ]; then
    notice "no PostgreSQL server (Debian package postgresql); running without it: the PostgreSQL store tests skip"
    exec "$@"
fi

run_as_pg() {
    if is_root; then
        if command -v runuser >/dev/null 2>&1; then
            runuser -u postgres -- "$@"
        else
            su -s /bin/sh postgres -c "$(printf '%q ' "$@")"
        fi
    else
        "$@"
    fi
}

if is_root && ! id postgres >/dev/null 2>&1; then
    notice "running as root and there is no 'postgres' user for initdb; running without PostgreSQL"
    exec "$@"
fi

cluster=$(mktemp -d "${TMPDIR:-/tmp}/melo-pg.XXXXXX")
is_root && chown postgres "$cluster"
started=0

cleanup() {
    if [ "$started" = 1 ]; then
        run_as_pg "$bindir/pg_ctl" -D "$cluster/data" -m immediate -w stop >/dev/null 2>&1
    fi
    rm -rf "$cluster"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
if ! run_as_pg "$bindir/initdb" -D "$cluster/data" -U melo --auth=trust -E UTF8 --no-locale --no-sync \
    >"$cluster/initdb.log" 2>&1; then
    tail -n 5 "$cluster/initdb.log" >&2
    notice "initdb failed; running without PostgreSQL"
    "$@"
    exit $?
fi
# fsync off: a throwaway cluster for tests.
if run_as_pg "$bindir/pg_ctl" -D "$cluster/data" -l "$cluster/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $cluster -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
    start >/dev/null 2>&1; then
    started=1
else
    tail -n 5 "$cluster/server.log" >&2
    notice "the PostgreSQL server did not start; running without it"
    "$@"
    exit $?
fi

export MELO_TEST_PG_URL="postgresql+psycopg://melo@127.0.0.1:$port/postgres"
notice "PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') on 127.0.0.1:$port (MELO_TEST_PG_URL)"
"$@"
exit $?
