#!/usr/bin/env bash
# Verification's cost at sample rate 0.1 (checker seconds over job
# seconds), before and now, in one run on one machine: the same measurement
# (`verification_cost_at_sample_rate_one_tenth`, the reference trainer, 200
# epochs, three agents, the S3 store) at an earlier commit and at this
# checkout, one after the other.
#
#   bench/verification_cost.sh [BEFORE]     (default c44f1b4: one checker,
#                                            a referee only on dispute)
#
# The earlier commit is checked out in BEFORE_DIR (default
# ~/.cache/mcjs/before-<commit>) and built in its own target directory
# (BEFORE_TARGET), so this checkout's builds are left alone. About 10
# minutes after both builds.
set -euo pipefail
cd "$(dirname "$0")/.."
before="${1:-c44f1b4}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/mcjs/target}"
before_dir="${BEFORE_DIR:-$HOME/.cache/mcjs/before-$before}"
before_target="${BEFORE_TARGET:-$HOME/.cache/mcjs/target-before}"
if [ ! -d "$before_dir" ]; then
    git worktree add -f --detach "$before_dir" "$before" >/dev/null
fi
measure() {
    cargo test -p mcjs-cli --test faults --locked "$@" -- --ignored --nocapture \
        verification_cost_at_sample_rate_one_tenth 2>&1 |
        grep -E "verification at sample rate|test result|panicked"
}
echo "before ($before):"
(cd "$before_dir" && CARGO_TARGET_DIR="$before_target" measure)
echo "now ($(git rev-parse --short HEAD)$(git diff --quiet || echo ', with changes')):"
# The fault suite needs `mcjs` with the local chain and the cluster harness.
measure --features demo
