#!/usr/bin/env bash
# Run a command inside the bench network namespace, with SLURM_CONF set.
#   bash bench/slurm/ns.sh sinfo -N
#   bash bench/slurm/ns.sh squeue
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/env.sh"
if in_bench_ns; then exec "$@"; fi
mountpoint -q "$SLURM_BENCH_NS" 2>/dev/null || { echo "no bench namespace; run start.sh first" >&2; exit 1; }
exec nsenter --net="$SLURM_BENCH_NS" "$@"
