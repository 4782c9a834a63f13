# Source this. Paths of the Slurm benchmark cluster, and the helpers that put
# every daemon and client into a private network namespace that has only `lo`.
export SLURM_BENCH=${SLURM_BENCH:-/tmp/mcjs-slurm-bench}
export SLURM_CONF=$SLURM_BENCH/etc/slurm.conf
export SLURM_BENCH_NS=$SLURM_BENCH/netns
# the nodes start.sh brings up (must match the NodeName lines of slurm.conf)
export SLURM_BENCH_NODES=${SLURM_BENCH_NODES:-"n1 n2 n3 n4"}

# true when this shell already runs inside the bench namespace
in_bench_ns() {
  [ -e "$SLURM_BENCH_NS" ] &&
    [ "$(stat -L -c %i "$SLURM_BENCH_NS" 2>/dev/null)" = "$(stat -L -c %i /proc/self/ns/net)" ]
}

# create (once) the namespace, bind-mounted on $SLURM_BENCH_NS
ensure_bench_ns() {
  mkdir -p "$SLURM_BENCH"
  if ! mountpoint -q "$SLURM_BENCH_NS" 2>/dev/null; then
    touch "$SLURM_BENCH_NS"
    unshare --net="$SLURM_BENCH_NS" true
  fi
  nsenter --net="$SLURM_BENCH_NS" ip link set lo up
  # glibc getaddrinfo(AI_ADDRCONFIG) ignores 127.0.0.1, and slurmctld's passive
  # bind fails without one more IPv4 address; a private /32 on lo (no route out).
  nsenter --net="$SLURM_BENCH_NS" ip -br addr show dev lo | grep -q 10.254.254.1 ||
    nsenter --net="$SLURM_BENCH_NS" ip addr add 10.254.254.1/32 dev lo
}
