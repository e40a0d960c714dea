#!/usr/bin/env bash
# schemathesis (from PyPI) against the server's own OpenAPI document, GET /api/v1/openapi.json:
# a bounded number of generated requests per operation; fails on any 5xx, any status, content
# type or body the document does not describe. Runs the already-built debug binary.
#   .ci/schemathesis.sh install - create the cached venv if needed
#   .ci/schemathesis.sh [run]   - install if needed, start a private server, run, stop it
# BERTH_SCHEMATHESIS_EXAMPLES (default 5) bounds the generated cases per operation in the fuzzing
# and stateful phases (the coverage phase's boundary cases come on top, about 4,500 in all);
# BERTH_SCHEMATHESIS_SEED (default 1) makes a run reproducible.
set -euo pipefail
cd "$(dirname "$0")/.."
ST_VERSION=${SCHEMATHESIS_VERSION:-4.32.5}
ST_VENV=${BERTH_SCHEMATHESIS_VENV:-$HOME/.cache/berth-schemathesis-venv}
BIN=${BERTH_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/berth-target}/debug/berth}
EXAMPLES=${BERTH_SCHEMATHESIS_EXAMPLES:-5}
SEED=${BERTH_SCHEMATHESIS_SEED:-1}
say() { printf '\033[1m[schemathesis]\033[0m %s\n' "$*" >&2; }

install() {
  if "$ST_VENV/bin/python" -c "import schemathesis, sys; sys.exit(schemathesis.__version__ != '$ST_VERSION')" 2>/dev/null; then
    return
  fi
  say "creating $ST_VENV with schemathesis==$ST_VERSION (about 30 s)"
  rm -rf "$ST_VENV"
  python3 -m venv "$ST_VENV"
  "$ST_VENV/bin/pip" install -q "schemathesis==$ST_VERSION" >&2
}

case "${1:-run}" in
install) install; exit 0 ;;
run) install ;;
*) echo "usage: $0 install|run" >&2; exit 2 ;;
esac

[ -x "$BIN" ] || { say "no server binary at $BIN: build it first (make server)"; exit 1; }
TMP=$(mktemp -d /tmp/berth-schemathesis.XXXXXX)
# A free loopback port, unless one is given.
PORT=${BERTH_SCHEMATHESIS_PORT:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
URL="http://127.0.0.1:$PORT"
SERVER_PID=""
stop() {
  if [ -n "$SERVER_PID" ]; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$TMP"
}
trap stop EXIT

# ---- The server under test: its one start command. ---------------------------------------
# Schemathesis submits jobs with generated entrypoints, and the local backend runs an
# entrypoint as a shell command. So the local node offers no capacity at all (no CPU, no
# memory, no GPU, no other resource): every job asks for at least one resource, no node can
# ever hold it, and it is refused at submit (stored as `rejected`, answered 422). Nothing is
# ever admitted or run; the checks after the run make sure of it.
# Authentication is on, and every case carries the first admin token, given here (a token
# cannot revoke itself, so the stateful phase cannot lock the run out).
TOKEN="berth_schemathesis_admin_$(date +%s%N)"
BERTH_ADMIN_TOKEN="$TOKEN" "$BIN" serve --addr "127.0.0.1:$PORT" --database-url "sqlite://$TMP/berth.db" --data-dir "$TMP/data" \
  --site-root "$TMP/site" --local-cpus 0 --local-memory-gb 0 --local-gpus 0 \
  >"$TMP/server.log" 2>&1 &
SERVER_PID=$!
# -------------------------------------------------------------------------------------------

for i in $(seq 1 150); do
  curl -sf "$URL/readyz" >/dev/null 2>&1 && break
  if ! kill -0 "$SERVER_PID" 2>/dev/null || [ "$i" -eq 150 ]; then
    tail -20 "$TMP/server.log" >&2; say "the server did not become ready on $URL"; exit 1
  fi
  sleep 0.1
done

say "schemathesis $ST_VERSION against $URL/api/v1/openapi.json, at most $EXAMPLES cases per operation, seed $SEED"
rc=0
# The event stream never ends by design: it is documented but not fuzzed. Run from $TMP:
# schemathesis keeps its replay cache (.schemathesis/) in the working directory.
(cd "$TMP" && "$ST_VENV/bin/schemathesis" run "$URL/api/v1/openapi.json" \
  --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
  --max-examples "$EXAMPLES" --seed "$SEED" --generation-database none \
  --header "Authorization: Bearer $TOKEN" \
  --exclude-path /api/v1/stream --request-timeout 20 --no-color) || rc=$?

# Nothing may have run: no run directory or journal record, no child process, no admission
# in the event log. (The local backend makes its journal and spares dirs when it opens.)
runs=$(ls -A "$TMP/data/runs" 2>/dev/null | grep -vx -e journal -e .spare || true)
if [ -n "$runs" ]; then
  say "a job was run: $(echo "$runs" | head -3)"; rc=1
fi
if [ -n "$(cat "$TMP/data/runs/journal/"* 2>/dev/null)" ]; then
  say "the run journal has records: $(cat "$TMP/data/runs/journal/"* | head -3)"; rc=1
fi
if pgrep -P "$SERVER_PID" >/dev/null; then
  say "the server has child processes: $(pgrep -a -P "$SERVER_PID" | head -3)"; rc=1
fi
admitted=$(curl -sf -H "Authorization: Bearer $TOKEN" "$URL/api/v1/events?kind=admitted,started&max_items=1" || echo '{"events":["unreadable"]}')
if [ "$admitted" != '{"events":[]}' ]; then
  say "a job was admitted: $admitted"; rc=1
fi
if ! kill -0 "$SERVER_PID" 2>/dev/null; then
  say "the server died:"; tail -20 "$TMP/server.log" >&2; rc=1
fi
if grep -q 'panicked' "$TMP/server.log"; then
  say "the server panicked:"; grep -A3 'panicked' "$TMP/server.log" | head -20 >&2; rc=1
fi
if [ "$rc" -ne 0 ]; then
  say "FAILED; the server's last errors:"; grep -E 'ERROR|WARN' "$TMP/server.log" | grep -v 'slow statement' | tail -10 >&2 || true
  exit "$rc"
fi
say "passed in $SECONDS s"
