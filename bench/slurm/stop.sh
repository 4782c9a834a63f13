#!/usr/bin/env bash
# Stop the Slurm benchmark cluster: cancel its jobs, stop slurmd x N, slurmctld and
# munged by the PIDs in their pid files, then end any process left over from it
# (slurmstepd and job processes of killed nodes, daemons whose pid file is gone):
# exactly the processes that carry the bench's marker variable in their
# environment (MCJS_SLURM_BENCH_DAEMON / MCJS_SLURM_BENCH_JOB = the bench dir).
# Finally removes the network namespace (KEEP_NS=1 keeps it). Safe to run twice.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/env.sh"
B=$SLURM_BENCH

in_ns() { # run a command in the bench namespace (if there is one)
  if in_bench_ns; then "$@"
  elif mountpoint -q "$SLURM_BENCH_NS" 2>/dev/null; then nsenter --net="$SLURM_BENCH_NS" "$@"
  else return 1; fi
}

cmdline() { { tr '\0' ' ' < "/proc/$1/cmdline"; } 2>/dev/null; }
marked() { { tr '\0' '\n' < "/proc/$1/environ"; } 2>/dev/null | grep -qxE "MCJS_SLURM_BENCH_(DAEMON|JOB)=$B"; }

stop_pidfile() { # pidfile: TERM, wait up to 10 s, then KILL; only if the PID is one of ours
  local f=$1 p
  [ -f "$f" ] || return 0
  p=$(cat "$f" 2>/dev/null)
  if [ -z "$p" ] || ! kill -0 "$p" 2>/dev/null; then rm -f "$f"; return 0; fi
  if ! { cmdline "$p" | grep -q "$B" || marked "$p"; }; then
    echo "pid file $f: pid $p is not a bench daemon, left alone"; rm -f "$f"; return 0
  fi
  kill -TERM "$p" 2>/dev/null
  for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null
  rm -f "$f"; echo "stopped $(basename "$f" .pid) (pid $p)"
}

# 1. cancel every job while the controller is still up
if [ -f "$B/run/slurmctld.pid" ] && kill -0 "$(cat "$B/run/slurmctld.pid")" 2>/dev/null; then
  jobs=$(in_ns squeue -h -o %i 2>/dev/null)
  if [ -n "$jobs" ]; then
    in_ns scancel $jobs 2>/dev/null
    for _ in $(seq 50); do [ -z "$(in_ns squeue -h -t R,PD -o %i 2>/dev/null)" ] && break; sleep 0.2; done
  fi
fi

# 2. daemons by pid file
for f in "$B"/run/slurmd-*.pid; do stop_pidfile "$f"; done
stop_pidfile "$B/run/slurmctld.pid"
stop_pidfile "$B/munge/munged.pid"

# 3. leftovers that carry the marker (never this script or its ancestors)
skip=" $$ "
p=$$
while [ "$p" -gt 1 ] 2>/dev/null; do
  p=$(awk '/^PPid:/{print $2}' "/proc/$p/status" 2>/dev/null || echo 0); skip+="$p "
done
left=()
for d in /proc/[0-9]*; do
  p=${d#/proc/}
  case "$skip" in *" $p "*) continue ;; esac
  marked "$p" && left+=("$p")
done
if [ ${#left[@]} -gt 0 ]; then
  for p in "${left[@]}"; do echo "killing leftover pid $p: $(cmdline "$p" | cut -c1-80)"; kill -KILL "$p" 2>/dev/null; done
fi

# 4. the namespace
if [ "${KEEP_NS:-0}" != 1 ] && mountpoint -q "$SLURM_BENCH_NS" 2>/dev/null; then
  umount "$SLURM_BENCH_NS" && rm -f "$SLURM_BENCH_NS" && echo "removed network namespace"
fi
exit 0
