#!/usr/bin/env bash
# Runs every MCJS test on this machine, installing what a fresh machine lacks.
#
#   scripts/test.sh [extra cargo-nextest filters or args]
#
# Needs: Rust 1.95 (rustup), a C compiler, a running Docker engine (the agent's
# tests run real containers; they fail, not skip, without one). Installs the
# musl target for the reference trainer's static image, and cargo-nextest,
# which runs the tests: one process per test, many at once
# (.config/nextest.toml), so that the fault suite's clusters run side by side.
#
# The Solana crates are heavy: builds share one target directory outside the
# checkout (override with CARGO_TARGET_DIR), so a second run rebuilds only
# what changed, and every step below builds with one feature set
# ($features), so no step compiles again what an earlier one compiled.
#
# At the end, passed or failed, it prints a report: each step's wall time and
# crates compiled, the count of tests, and the ten slowest tests
# (scripts/test-report.py, from nextest's JUnit files).
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/mcjs/target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

# The one feature set of every step: `demo` builds `mcjs` with the local
# chain and the cluster harness that its tests (and the fault suite) start;
# `yellowstone` adds the program index's Yellowstone gRPC source (its unit
# tests, its test against the real plugin compiled but run by hand, and the
# scheduler built with it).
features="mcjs-cli/demo,mcjs-cli/yellowstone,mcjs-localnet/yellowstone"

report_dir="$(mktemp -d)"
steps="$report_dir/steps.tsv"
: >"$steps"
report() {
    local rc=$?
    python3 scripts/test-report.py "$report_dir" target/nextest || true
    rm -rf "$report_dir"
    exit "$rc"
}
trap report EXIT
# This run's JUnit files only (nextest keeps them under the checkout's
# target/nextest, whatever CARGO_TARGET_DIR says).
rm -f target/nextest/*/junit.xml

# step NAME CMD...: runs CMD with its output copied to a log whose
# `Compiling` lines are counted, and records the step's wall time.
step() {
    local name="$1" start rc=0
    shift
    echo "mcjs-test: --- $name" >&2
    start=$(date +%s)
    "$@" 2>&1 | tee "$report_dir/$name.log" || rc=$?
    printf '%s\t%s\t%s\t%s\n' "$name" "$(($(date +%s) - start))" \
        "$(grep -c '^ *Compiling ' "$report_dir/$name.log" || true)" "$rc" >>"$steps"
    return "$rc"
}

step setup bash -euo pipefail scripts/setup.sh

if ! cargo nextest --version >/dev/null 2>&1; then
    echo "mcjs-test: installing cargo-nextest (cargo install cargo-nextest --locked, several minutes)" >&2
    step install-nextest cargo install cargo-nextest --locked --quiet
fi

# NVRTC, CUDA's run-time compiler: a GPU node compiles the hardware challenge's kernels with
# it; compiling needs no GPU, so a test here compiles them for every generation a node may
# have (and fails if NVRTC is missing). NVIDIA's wheel from PyPI, unpacked into the cache
# and put on the loader's path for the tests.
nvrtc_dir="$HOME/.cache/mcjs/nvrtc-12.9.86"
install_nvrtc() {
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
}
if [ ! -f "$nvrtc_dir/libnvrtc.so.12" ]; then
    step nvrtc install_nvrtc
fi
export LD_LIBRARY_PATH="$nvrtc_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MCJS_REQUIRE_NVRTC=1

# The program as a cluster runs it: its SBF build (scripts/build-sbf.sh
# installs its toolchain on first use and builds, at low priority, in its own
# target directory), started beside the workspace's build: on a fresh machine
# the two fill each other's idle cores. Every test below that runs the program
# runs this ELF: the program suite through LiteSVM's loader and verifier, and
# every local chain (the CLI's, the agents', the fault suite's, `mcjs demo`)
# deploys it by loader transactions at start (mcjs-localnet, MCJS_PROGRAM_SO).
sbf_start=$(date +%s)
scripts/build-sbf.sh >"$report_dir/sbf.out" 2>"$report_dir/sbf.log" &
sbf_pid=$!

# The PyTorch example's image (Debian's PyTorch by mmdebstrap, no registry;
# about two minutes once, then cached by content): the runtime's
# pytorch_image test runs it.
step pytorch-image examples/pytorch/build-image.sh

step build cargo test --workspace --locked --features "$features" --no-run

sbf_rc=0
wait "$sbf_pid" || sbf_rc=$?
printf '%s\t%s\t%s\t%s\n' "sbf (beside build)" "$(($(date +%s) - sbf_start))" \
    "$(grep -c '^ *Compiling ' "$report_dir/sbf.log" || true)" "$sbf_rc" >>"$steps"
if [ "$sbf_rc" -ne 0 ]; then
    cat "$report_dir/sbf.log" >&2
    exit "$sbf_rc"
fi
MCJS_PROGRAM_SO="$(cat "$report_dir/sbf.out")"
export MCJS_PROGRAM_SO

# Python packages from PyPI, pinned, into a virtual environment over Debian's
# python3, made again when the pins change: make_venv DIR PINS [VENV ARGS]
# [-- PIP ARGS].
make_venv() {
    local dir="$1" pins="$2" venv_args=() pip_args=()
    shift 2
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do venv_args+=("$1"); shift; done
    [ "${1:-}" = "--" ] && shift
    pip_args=("$@")
    echo "mcjs-test: installing $pins into $dir" >&2
    if ! /usr/bin/python3 -c "import ensurepip" >/dev/null 2>&1; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
    fi
    rm -rf "$dir"
    /usr/bin/python3 -m venv "${venv_args[@]}" "$dir"
    "$dir/bin/python" -m pip install -q --disable-pip-version-check "${pip_args[@]}" -r "$pins"
    cp "$pins" "$dir/pins.txt"
}
venv_current() { cmp -s "$2" "$1/pins.txt" 2>/dev/null; }

# The auditor example's client (solana-py, pinned; about 70 MB, a few
# seconds): app/cli/tests/chain.rs runs examples/auditor/audit.py against the
# local chain with it.
auditor_venv="$HOME/.cache/mcjs/python-auditor"
auditor_pins="examples/auditor/requirements.txt"
if ! venv_current "$auditor_venv" "$auditor_pins"; then
    step install-auditor make_venv "$auditor_venv" "$auditor_pins"
fi
export MCJS_AUDITOR_PYTHON="$auditor_venv/bin/python" MCJS_REQUIRE_AUDITOR=1

# Threads: twice the cores (most tests wait on the clock, not the CPU; the
# fault suite is held to its group's count whatever this is).
threads="${MCJS_TEST_THREADS:-$(($(nproc) * 2))}"
status=0
step tests cargo nextest run --workspace --locked --features "$features" \
    --test-threads "$threads" "$@" || status=$?
# No doctests: nextest does not run them, and `cargo test --doc` would build
# the libraries again under other features; the one example in a crate's
# documentation (mcjs-spec's) is run as a test of its crate.

# The program suite once more, on the native build of the program (the same
# test binary, without MCJS_PROGRAM_SO): a panic's backtrace and a debugger
# reach into it, and coverage counts it.
step native-program env -u MCJS_PROGRAM_SO cargo nextest run --workspace --locked \
    --features "$features" --profile native --test-threads "$threads" \
    -E 'package(mcjs-tests) & binary(program)' || status=$?

# The job contract's Python package (sdk/python): its own tests, the
# PyTorch example on it and the Hugging Face example on its callback, stopped
# and resumed (torch from Debian, transformers in an environment over it made
# here; Lightning's tests skip: it does not import with Debian's torch).
hf_venv="$HOME/.cache/mcjs/python-hf"
hf_pins="sdk/python/tests/hf-requirements.txt"
# transformers and accelerate over Debian's torch, numpy and pytest
# (--system-site-packages; --no-deps: pip would replace Debian's torch with a
# CUDA wheel). About 140 MB, 15 s.
if ! venv_current "$hf_venv" "$hf_pins"; then
    step install-hf make_venv "$hf_venv" "$hf_pins" --system-site-packages -- --no-deps || status=$?
fi
step python-sdk env MCJS_REQUIRE_TORCH=1 MCJS_REQUIRE_HF=1 \
    "$hf_venv/bin/python" -m pytest -q -p no:cacheprovider -rs \
    sdk/python/tests || status=$?

# The deployment and the demo's story on Agave's own validator, where one is
# installed on this machine (`scripts/agave.sh install`: about an hour to
# build, so never here): migrations/deploy.sh on a bare validator, then
# `mcjs demo` with the validator as its chain.
if scripts/agave.sh path >/dev/null; then
    step agave-deploy scripts/agave.sh deploy || status=$?
    step agave-story env MCJS_AGAVE_DEMO_DIR="$report_dir/agave-demo" \
        scripts/agave.sh story || status=$?
else
    echo "mcjs-test: Agave's solana-test-validator is not installed here (scripts/agave.sh install); the story on it is not run" >&2
fi

# The `mcjs` users and providers build has neither the local chain nor the
# cluster harness (app/cli/tests/linking.rs checks what it links; the tests
# check what it answers `mcjs demo` with); it must still compile. Being the
# one build without the test features, it is checked under its own profile
# (`plain`, Cargo.toml), so that it compiles its crates once per machine and
# never overwrites the tests' build.
step plain-mcjs cargo check --locked -p mcjs-cli --profile plain || status=$?
exit "$status"
