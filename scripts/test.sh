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

# `demo` builds `mcjs` with the local chain and the cluster harness that
# its tests (and the fault suite) start.
cargo test --workspace --locked --features mcjs-cli/demo "$@"

# The program suite once more, on the program's SBF build. The run above
# executes the program natively (fast, debuggable, counted by coverage);
# this one runs the bytecode a cluster runs, through LiteSVM's loader and
# verifier. scripts/build-sbf.sh installs its toolchain on first use and
# builds in its own target directory.
program_so="$(scripts/build-sbf.sh)"
MCJS_PROGRAM_SO="$program_so" cargo test --locked -p mcjs-tests --test program

# The `mcjs` users and providers build has neither the local chain nor the
# cluster harness (app/cli/tests/linking.rs checks what it links); it must
# still build, and say how to get `mcjs demo`.
cargo build --locked -q -p mcjs-cli
unbuilt="$("$CARGO_TARGET_DIR/debug/mcjs" demo 2>&1 || true)"
case "$unbuilt" in
*"--features demo"*) ;;
*) echo "mcjs-test: a plain mcjs build answered 'mcjs demo' with: $unbuilt" >&2; exit 1 ;;
esac
