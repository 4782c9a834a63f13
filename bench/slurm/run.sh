#!/usr/bin/env bash
# The Slurm half of the recovery benchmark in one command:
# installs Debian's slurm-wlm if it is missing, starts the cluster (start.sh),
# runs bench.py with the given arguments, and stops the cluster (stop.sh) when
# done, also on failure or Ctrl-C.
#   bash bench/slurm/run.sh --quick
#   bash bench/slurm/run.sh --kills 50 --json bench/results/slurm.json --md bench/results/slurm.md
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" = 0 ] || { echo "run as root (the cluster's daemons run as root in a private network namespace)" >&2; exit 1; }
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y slurm-wlm munge iproute2 util-linux
fi
trap 'bash "$HERE/stop.sh"' EXIT
bash "$HERE/start.sh"
MCJS_BENCH_COMMAND="bash bench/slurm/run.sh $*" /usr/bin/env python3 "$HERE/bench.py" "$@"
