#!/usr/bin/env bash
# Start the Slurm benchmark cluster from scratch: munged (own key and socket),
# slurmctld and one slurmd per logical node (n1..n4), all as root, all state under
# $SLURM_BENCH (default /tmp/mcjs-slurm-bench), every Slurm daemon inside a
# network namespace that has only `lo`.
# Idempotent: it first runs stop.sh (stale daemons, leftover job processes, the old
# namespace), wipes controller state, spool and logs, then starts everything and
# waits until every node is idle. /etc/munge and /etc/slurm are not used.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/env.sh"
B=$SLURM_BENCH
for c in munged slurmctld slurmd sbatch unshare nsenter ip; do
  command -v $c >/dev/null || { echo "missing: $c (apt-get install -y slurm-wlm iproute2 util-linux)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }

if ! in_bench_ns; then
  bash "$HERE/stop.sh" >/dev/null
  rm -rf "$B"/{etc,log,spool,state,run,jobs,munge}
  mkdir -p "$B"/{etc,log,spool,state,run,jobs,munge}
  chmod 0755 "$B" "$B/munge"

  # munged: a fresh key of our own, socket and pid under $B/munge
  dd if=/dev/urandom of="$B/munge/munge.key" bs=128 count=1 status=none
  chmod 0600 "$B/munge/munge.key"
  MCJS_SLURM_BENCH_DAEMON=$B munged --key-file="$B/munge/munge.key" --socket="$B/munge/munge.socket.2" \
    --pid-file="$B/munge/munged.pid" --log-file="$B/log/munged.log" --seed-file="$B/munge/munged.seed" \
    --num-threads=4
  for _ in $(seq 50); do [ -S "$B/munge/munge.socket.2" ] && break; sleep 0.1; done
  munge -n -S "$B/munge/munge.socket.2" | unmunge -S "$B/munge/munge.socket.2" >/dev/null

  # slurm.conf: the committed file with the bench dir and host name filled in
  sed -e "s|@BENCH@|$B|g" -e "s|@HOST@|$(hostname -s)|g" "$HERE/slurm.conf" > "$SLURM_CONF"

  ensure_bench_ns
  exec nsenter --net="$SLURM_BENCH_NS" bash "$0" "$@"
fi

# --- inside the namespace ---
export MCJS_SLURM_BENCH_DAEMON=$B
slurmctld -f "$SLURM_CONF" -c -i
for _ in $(seq 100); do
  timeout 2 scontrol ping 2>/dev/null | grep -q UP && break
  if [ -s "$B/run/slurmctld.pid" ] && ! kill -0 "$(cat "$B/run/slurmctld.pid")" 2>/dev/null; then
    echo "slurmctld died:" >&2; tail -5 "$B/log/slurmctld.log" >&2; exit 1
  fi
  sleep 0.1
done
for n in $SLURM_BENCH_NODES; do
  mkdir -p "$B/spool/$n"
  slurmd -f "$SLURM_CONF" -N "$n"
done
want=$(echo $SLURM_BENCH_NODES | wc -w)
for _ in $(seq 300); do
  [ "$(sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2=="idle"' | wc -l)" = "$want" ] && break
  sleep 0.1
done
unset MCJS_SLURM_BENCH_DAEMON
sinfo -N -o '%N %t %c %P'
[ "$(sinfo -h -N -o '%t' | grep -c '^idle$')" = "$want" ] || { echo "not all nodes idle" >&2; exit 1; }
echo "cluster up: $(scontrol -V), conf $SLURM_CONF"
