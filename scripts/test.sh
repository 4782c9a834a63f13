#!/usr/bin/env bash
# Runs every MCJS test on this machine, installing what a fresh machine lacks.
#
#   scripts/test.sh [extra cargo test args]
#
# Needs: Rust 1.95 (rustup), a C compiler, a running Docker engine (the agent's
# tests run real containers; they fail, not skip, without one). Installs the
# musl target for the reference trainer's static image.
#
# The Solana crates are heavy: builds share one target directory outside the
# checkout (override with CARGO_TARGET_DIR), so a second run rebuilds only
# what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/mcjs/target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

source scripts/setup.sh

cargo test --workspace --locked "$@"

# The program suite once more, on the program's SBF build. The run above
# executes the program natively (fast, debuggable, counted by coverage);
# this one runs the bytecode a cluster runs, through LiteSVM's loader and
# verifier. scripts/build-sbf.sh installs its toolchain on first use and
# builds in its own target directory.
program_so="$(scripts/build-sbf.sh)"
MCJS_PROGRAM_SO="$program_so" cargo test --locked -p mcjs-tests --test program
