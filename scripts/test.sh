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

# NVRTC, CUDA's run-time compiler: a GPU node compiles the hardware challenge's kernels with
# it; compiling needs no GPU, so a test here compiles them for every generation a node may
# have (and fails if NVRTC is missing). NVIDIA's wheel from PyPI, unpacked into the cache
# and put on the loader's path for the tests.
nvrtc_dir="$HOME/.cache/mcjs/nvrtc-12.9.86"
if [ ! -f "$nvrtc_dir/libnvrtc.so.12" ]; then
    echo "mcjs-test: installing NVRTC 12.9 from PyPI (nvidia-cuda-nvrtc-cu12, about 90 MB)" >&2
    wheel_dir="$(mktemp -d)"
    python3 -m pip download --quiet --no-deps nvidia-cuda-nvrtc-cu12==12.9.86 -d "$wheel_dir"
    mkdir -p "$nvrtc_dir"
    # The builtins first and libnvrtc last: a run cut short leaves no libnvrtc to find.
    python3 - "$wheel_dir" "$nvrtc_dir" <<'PY'
import glob, os, sys, zipfile
wheel, out = glob.glob(os.path.join(sys.argv[1], "*.whl"))[0], sys.argv[2]
wanted = ["libnvrtc-builtins.so.12.9", "libnvrtc.so.12"]
with zipfile.ZipFile(wheel) as z:
    names = {os.path.basename(n): n for n in z.namelist()}
    for base in wanted:
        with z.open(names[base]) as src, open(os.path.join(out, base + ".part"), "wb") as dst:
            dst.write(src.read())
        os.replace(os.path.join(out, base + ".part"), os.path.join(out, base))
PY
    rm -rf "$wheel_dir"
fi
export LD_LIBRARY_PATH="$nvrtc_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MCJS_REQUIRE_NVRTC=1

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
