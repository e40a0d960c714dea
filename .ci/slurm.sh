#!/usr/bin/env bash
# A private single-node Slurm 22.05 (munged + slurmctld + slurmd) for the tests, loopback
# only, all state under /tmp/berth-slurm/berthtest (.ci/slurm-local.sh is the tested script
# of shared/recipes/SLURM.md). Idempotent: installed packages and a running cluster are reused.
#   .ci/slurm.sh install - apt-get install the packages if missing (needs root)
#   .ci/slurm.sh start   - install if needed, start the cluster if not running, print its
#                          slurm.conf path (the only line on stdout; BERTH_TEST_SLURM)
#   .ci/slurm.sh stop
# Fake capacity for the tests: node n1 with 16 CPUs, 64000 MB, 4 GPUs (gpu:a100), features
# a100,spot, partitions cpu (default) and gpu.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export SLURM_LOCAL_NAME=${BERTH_SLURM_NAME:-berthtest}
export SLURM_LOCAL_PORT_BASE=${BERTH_SLURM_PORT_BASE:-16857}
export SLURM_LOCAL_REST=0          # the backend uses the CLI, not slurmrestd
say() { printf '\033[1m[slurm]\033[0m %s\n' "$*" >&2; }

case "${1:-start}" in
install) "$here/slurm-local.sh" install ;;
start)
  "$here/slurm-local.sh" install
  out=$(cd /tmp && "$here/slurm-local.sh" start) || { say "Slurm did not start"; exit 1; }
  conf=$(printf '%s\n' "$out" | sed -n 's/^SLURM_CONF=//p')
  [ -f "$conf" ] || { say "no slurm.conf in the start output"; exit 1; }
  echo "$conf" ;;
stop) "$here/slurm-local.sh" stop ;;
*) echo "usage: $0 install|start|stop" >&2; exit 2 ;;
esac
