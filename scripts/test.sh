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

# The program as a cluster runs it: its SBF build (scripts/build-sbf.sh
# installs its toolchain on first use and builds in its own target
# directory). Every test below that runs the program runs this ELF: the
# program suite through LiteSVM's loader and verifier, and every local chain
# (the CLI's, the agents', the fault suite's, `mcjs demo`) deploys it by
# loader transactions at start (mcjs-localnet, MCJS_PROGRAM_SO).
program_so="$(scripts/build-sbf.sh)"
export MCJS_PROGRAM_SO="$program_so"

# `demo` builds `mcjs` with the local chain and the cluster harness that
# its tests (and the fault suite) start.
cargo test --workspace --locked --features mcjs-cli/demo "$@"

# The program suite once more, on the native build of the program: a
# panic's backtrace and a debugger reach into it, and coverage counts it.
env -u MCJS_PROGRAM_SO cargo test --locked -p mcjs-tests --test program

# The program index's Yellowstone gRPC source (feature `yellowstone`, off by
# default): its unit tests, its test against the real plugin compiled (run
# by hand: it needs the plugin, scripts/yellowstone-plugin.sh, a large
# build), and the scheduler built with it.
cargo test --locked -p mcjs-client --features yellowstone --lib rpc::yellowstone
cargo test --locked -p mcjs-localnet --features yellowstone --test yellowstone --no-run
cargo build --locked -q -p mcjs-cli --features yellowstone

# The `mcjs` users and providers build has neither the local chain nor the
# cluster harness (app/cli/tests/linking.rs checks what it links); it must
# still build, and say how to get `mcjs demo`.
cargo build --locked -q -p mcjs-cli
unbuilt="$("$CARGO_TARGET_DIR/debug/mcjs" demo 2>&1 || true)"
case "$unbuilt" in
*"--features demo"*) ;;
*) echo "mcjs-test: a plain mcjs build answered 'mcjs demo' with: $unbuilt" >&2; exit 1 ;;
esac
