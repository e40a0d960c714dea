#!/usr/bin/env bash
# A private single-node Ray head for the tests, bound to loopback (shared/recipes/RAY.md).
# Idempotent: the venv is cached and a running head is reused.
#   .ci/ray.sh install - create the venv if needed (cached)
#   .ci/ray.sh start   - create the venv if needed, start the head if not running, print the
#                        dashboard URL (the only line on stdout)
#   .ci/ray.sh stop
# Fake capacity for the tests: 4 CPUs, 2 GPUs, 2 `accel`, label pool=test. Workers take ports
# 20002-29999, not Ray's default 10002-19999, which holds the test Slurm clusters' 16857-16878.
set -euo pipefail
RAY_VERSION=${RAY_VERSION:-2.60.0}
RAY_VENV=${BERTH_RAY_VENV:-$HOME/.cache/berth-ray-venv}
RAY_TMP=${BERTH_RAY_TMP:-/tmp/berth-ray}        # short: unix socket paths live under it
DASH_PORT=${BERTH_RAY_DASHBOARD_PORT:-8265}
GCS_PORT=${BERTH_RAY_GCS_PORT:-6379}
URL="http://127.0.0.1:$DASH_PORT"
export RAY_USAGE_STATS_ENABLED=0
# Without it Ray rewrites 127.0.0.1 to the eth0 address and gRPC listens on every interface.
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0
# A job Ray can never place fails after this instead of 900 s.
export RAY_JOB_START_TIMEOUT_SECONDS=${RAY_JOB_START_TIMEOUT_SECONDS:-60}
say() { printf '\033[1m[ray]\033[0m %s\n' "$*" >&2; }

install() {
  if [ -x "$RAY_VENV/bin/ray" ] && "$RAY_VENV/bin/python" -c "import ray, sys; sys.exit(ray.__version__ != '$RAY_VERSION')" 2>/dev/null; then
    return
  fi
  say "creating $RAY_VENV with ray[default]==$RAY_VERSION (about 20 s)"
  python3 -m venv "$RAY_VENV"
  "$RAY_VENV/bin/pip" install -q "ray[default]==$RAY_VERSION" >&2
}

ready() { curl -sf "$URL/api/version" >/dev/null 2>&1; }

case "${1:-start}" in
install) install ;;
start)
  install
  if ! ready; then
    say "starting a Ray head on $URL"
    (cd "$(dirname "$RAY_TMP")" && PATH="$RAY_VENV/bin:$PATH" "$RAY_VENV/bin/ray" start --head \
      --node-ip-address=127.0.0.1 --port="$GCS_PORT" \
      --dashboard-host=127.0.0.1 --dashboard-port="$DASH_PORT" \
      --num-cpus=4 --num-gpus=2 --resources='{"accel":2}' --labels='pool=test' \
      --min-worker-port=20002 --max-worker-port=29999 \
      --temp-dir="$RAY_TMP" --disable-usage-stats) >&2
  fi
  # Ready once the Jobs API has run a no-op job to the end (the first one is slow).
  id="berth-ready-$$-$(date +%s)"
  for _ in $(seq 1 60); do
    curl -sf -X POST -d "{\"entrypoint\":\"true\",\"submission_id\":\"$id\"}" "$URL/api/jobs/" >/dev/null 2>&1 && break
    sleep 0.5
  done
  for _ in $(seq 1 120); do
    if curl -sf "$URL/api/jobs/$id" | grep -q '"status": "SUCCEEDED"'; then
      echo "$URL"
      exit 0
    fi
    sleep 0.25
  done
  say "the Ray Jobs API at $URL did not become ready"; exit 1 ;;
stop)
  # ray stop prints every process's command line; keep only whether it worked.
  if [ -x "$RAY_VENV/bin/ray" ]; then
    "$RAY_VENV/bin/ray" stop --grace-period 10 >/dev/null 2>&1 && say "stopped" || say "ray stop failed (was it running?)"
  fi ;;
*) echo "usage: $0 install|start|stop" >&2; exit 2 ;;
esac
