#!/usr/bin/env bash
# Runs every MCJS test on this machine, installing what a fresh machine lacks.
#
# Usage: scripts/test.sh [extra cargo test args]
#
# The Solana crates are heavy: builds share one target directory outside the
# checkout (override with CARGO_TARGET_DIR), so a second run rebuilds only
# what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/mcjs/target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

need() { command -v "$1" >/dev/null 2>&1; }

if ! need cargo; then
    echo "error: cargo is not installed; install Rust 1.95 with rustup" >&2
    exit 2
fi
if ! need cc; then
    echo "installing a C compiler (gcc) ..." >&2
    apt-get update -qq && apt-get install -y -qq gcc >/dev/null
fi

cargo test --workspace --locked "$@"
