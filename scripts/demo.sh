#!/usr/bin/env bash
# Runs `mcjs demo` on this machine, installing what a fresh machine lacks:
# a local chain, the scheduler and three agents as separate processes, the
# reference training job submitted from a wallet, its node killed part-way,
# the recovery on another node, the payout and refund, and the audit.
#
#   scripts/demo.sh [mcjs demo flags, e.g. --slot-time-ms 400 --epochs 12]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/mcjs/target}"
source scripts/setup.sh
# The local chain deploys the program's SBF build by loader transactions
# (MCJS_PROGRAM_SO; set it empty to run the native build instead).
if [ -z "${MCJS_PROGRAM_SO+set}" ]; then
    MCJS_PROGRAM_SO="$(scripts/build-sbf.sh)"
    export MCJS_PROGRAM_SO
fi
cargo build --locked -p mcjs-cli --features demo
exec "$CARGO_TARGET_DIR/debug/mcjs" demo "$@"
