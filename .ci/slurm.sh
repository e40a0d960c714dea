#!/usr/bin/env bash
# Two private single-node Slurm 22.05 clusters (munged + slurmctld + slurmd each) for the
# tests, loopback only, state under /tmp/berth-slurm/ (.ci/slurm-local.sh is the tested
# script of shared/recipes/SLURM.md). Idempotent: installed packages and running clusters
# are reused.
#   .ci/slurm.sh install - apt-get install the packages if missing (needs root)
#   .ci/slurm.sh start   - install if needed, start the clusters if not running, print
#                          `GPU_CONF:CPU_CONF`, their slurm.conf paths (the only line on
#                          stdout; what BERTH_TEST_SLURM takes)
#   .ci/slurm.sh stop
# Fake capacity for the tests:
#   berthtest: node n1, 16 CPUs, 64000 MB, 4 GPUs (gpu:a100), features a100,spot,
#              partitions cpu (default) and gpu; ports 16857-16858
#   berthcpu:  node n1, 8 CPUs, 32000 MB, no GPUs, feature spot; ports 16877-16878
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export SLURM_LOCAL_REST=0          # the backend uses the CLI, not slurmrestd
say() { printf '\033[1m[slurm]\033[0m %s\n' "$*" >&2; }

gpu() { SLURM_LOCAL_NAME=berthtest SLURM_LOCAL_PORT_BASE=${BERTH_SLURM_PORT_BASE:-16857} "$here/slurm-local.sh" "$@"; }
cpu() {
  SLURM_LOCAL_NAME=berthcpu SLURM_LOCAL_PORT_BASE=${BERTH_SLURM_CPU_PORT_BASE:-16877} SLURM_LOCAL_CPUS=8 \
    SLURM_LOCAL_MEM_MB=32000 SLURM_LOCAL_GPUS=0 SLURM_LOCAL_FEATURES=spot "$here/slurm-local.sh" "$@"
}
conf_of() { sed -n 's/^SLURM_CONF=//p'; }

case "${1:-start}" in
install) "$here/slurm-local.sh" install ;;
start)
  "$here/slurm-local.sh" install
  a=$(cd /tmp && gpu start | conf_of) || { say "Slurm cluster berthtest did not start"; exit 1; }
  b=$(cd /tmp && cpu start | conf_of) || { say "Slurm cluster berthcpu did not start"; exit 1; }
  [ -f "$a" ] && [ -f "$b" ] || { say "no slurm.conf in the start output"; exit 1; }
  echo "$a:$b" ;;
stop) gpu stop; cpu stop ;;
*) echo "usage: $0 install|start|stop" >&2; exit 2 ;;
esac
