#!/usr/bin/env bash
# Provisioning and recovery times (the recovery benchmark, docs/recovery.md)
# at an earlier commit and at this checkout, one after the other on one
# machine, so that a change to the scheduler's or the agent's shells can be
# held to "within noise of before".
#
#   bench/recovery_before_after.sh [BEFORE] [RUNS]   (default 7ec467f, 10 runs)
#
# The earlier commit is checked out in BEFORE_DIR (default
# ~/.cache/mcjs/before-<commit>). It builds in a target directory of its own
# (BEFORE_TARGET, default ~/.cache/mcjs/target-before; the first build there
# takes as long as a fresh one): cargo names a workspace crate's build by its
# path inside the workspace, not by the checkout, so two checkouts sharing a
# target directory can link each other's crates. About 5 minutes of runs per
# side after the builds; no partitions (they measure the heartbeat timeout).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v s3s-fs >/dev/null && [ ! -x "${CARGO_HOME:-$HOME/.cargo}/bin/s3s-fs" ]; then
    echo "the clusters need the s3s-fs S3 server: run scripts/setup.sh first" >&2
    exit 2
fi
before="${1:-7ec467f}"
runs="${2:-10}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/mcjs/target}"
before_dir="${BEFORE_DIR:-$HOME/.cache/mcjs/before-$before}"
before_target="${BEFORE_TARGET:-$HOME/.cache/mcjs/target-before}"
if [ ! -d "$before_dir" ]; then
    git worktree add -f --detach "$before_dir" "$before" >/dev/null
fi
# Each side's `mcjs` is copied out of the (shared) target directory before
# the other side builds over it.
bin="$(mktemp -d)"
(cd "$before_dir" && CARGO_TARGET_DIR="$before_target" cargo build --locked -q -p mcjs-cli --features localnet &&
    cp "$before_target/debug/mcjs" "$bin/mcjs-before" &&
    CARGO_TARGET_DIR="$before_target" cargo build --locked -q -p mcjs-cluster --example recovery_bench &&
    cp "$before_target/debug/examples/recovery_bench" "$bin/bench-before")
cargo build --locked -q -p mcjs-cli --features localnet
cp "$CARGO_TARGET_DIR/debug/mcjs" "$bin/mcjs-now"
cargo build --locked -q -p mcjs-cluster --example recovery_bench
cp "$CARGO_TARGET_DIR/debug/examples/recovery_bench" "$bin/bench-now"
# Each side's progress and errors go to a log, shown when a side fails (a
# cluster that cannot start: s3s-fs missing, say; scripts/setup.sh installs it).
measure() {
    local log="$bin/$1.log"
    if ! "$bin/bench-$1" --runs "$runs" --partitions 0 --mcjs "$bin/mcjs-$1" >"$bin/$1.out" 2>"$log"; then
        echo "the $1 side failed; its last lines:" >&2
        grep -v '^  ' "$log" | tail -20 >&2
        return 1
    fi
    grep -E '^\|( measure|---| provisioning| recovery| compute)' "$bin/$1.out"
}
echo "before ($before):"
# The earlier side's cluster builds its trainer image (examples/trainer/build-image.sh) in its own
# target directory too: built into the shared one, the earlier trainer would be taken as fresh there.
(cd "$before_dir/orchestrator/cluster" && CARGO_TARGET_DIR="$before_target" measure before)
echo "now ($(git rev-parse --short HEAD)$(git diff --quiet || echo ', with changes')):"
(cd orchestrator/cluster && measure now)
rm -rf "$bin"
