#!/usr/bin/env bash
# A private PostgreSQL server for the tests: its own data dir and port, owned by the
# `postgres` user (PostgreSQL refuses to run as root). Idempotent.
#   .ci/pg.sh start   - initdb if needed, start if not running, print the admin URL
#   .ci/pg.sh stop
set -euo pipefail
PGPORT=${BERTH_PG_PORT:-55432}
PGDATA=${BERTH_PG_DATA:-/tmp/berth-pg/data}
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n1)
as_pg() { if [ "$(id -u)" -eq 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi; }
case "${1:-start}" in
start)
  if ! "$bin/pg_isready" -q -h 127.0.0.1 -p "$PGPORT"; then
    mkdir -p "$(dirname "$PGDATA")"
    [ "$(id -u)" -eq 0 ] && chown postgres "$(dirname "$PGDATA")"
    if [ ! -f "$PGDATA/PG_VERSION" ]; then
      as_pg "$bin/initdb -D $PGDATA -A trust -U postgres --no-sync >/dev/null"
    fi
    # -t 300: after an unclean stop (the machine went down) PostgreSQL first replays its
    # log, which can take longer than pg_ctl's default minute on a busy machine.
    as_pg "$bin/pg_ctl -D $PGDATA -l $PGDATA/../server.log -w -t 300 -o '-p $PGPORT -k /tmp -c listen_addresses=127.0.0.1 -c max_connections=200' start >/dev/null"
  fi
  # Databases the tests and benches made (berth_test_PID_..., berth_e2e_NAME_PID_...,
  # berth_bench_PID_CASE, and older benches' berth_bench_NAME_PID) are never dropped by them:
  # drop those whose process is gone, so runs do not pile up gigabytes here. A database
  # still in use is left alone.
  as_pg "$bin/psql -h 127.0.0.1 -p $PGPORT -Atqc \"SELECT datname FROM pg_database WHERE datname ~ '^berth_(test|e2e|bench)_'\"" |
    while read -r db; do
      pid=$(sed -E 's/^berth_(test|bench|e2e_[a-z]+|bench_[a-z]+)_([0-9]+).*/\2/' <<<"$db")
      [[ $pid =~ ^[0-9]+$ ]] && [ ! -e "/proc/$pid" ] && echo "DROP DATABASE IF EXISTS \"$db\";"
    done | as_pg "$bin/psql -h 127.0.0.1 -p $PGPORT -q" >/dev/null 2>&1 || true
  echo "postgres://postgres@127.0.0.1:$PGPORT/postgres" ;;
stop)
  as_pg "$bin/pg_ctl -D $PGDATA -m fast stop" >/dev/null 2>&1 || true ;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
