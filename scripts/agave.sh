#!/usr/bin/env bash
# Agave's own validator for MCJS: installs `solana-test-validator` at the
# workspace's Agave version (the `agave-*` crates in Cargo.lock), and runs
# MCJS on it instead of surfpool.
#
#   scripts/agave.sh install            build it once, cached (about an hour on 2 cores)
#   scripts/agave.sh path               print its path; exit 1 when not installed
#   scripts/agave.sh deploy             a bare validator: a USDC mint and treasury made
#                                       with solana-py, then migrations/deploy.sh unaided
#                                       (twice: the second run must change nothing)
#   scripts/agave.sh story [ARGS]       `mcjs demo` on it (submit, run, node killed,
#                                       recovered, completed, paid, audited)
#   scripts/agave.sh bench [ARGS]       the recovery bench on it (provisioning over
#                                       --runs submissions, recovery, partitions)
#
# Every MCJS chain (`mcjs localnet`, the cluster harness, `mcjs demo`, the
# benches) runs the validator named by MCJS_VALIDATOR; this script sets it.
#
# Environment:
#   MCJS_AGAVE_ROOT   where it is installed (default ~/.cache/mcjs/agave-<version>)
#   CARGO_TARGET_DIR  the workspace's builds (default ~/.cache/mcjs/target, as scripts/test.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/mcjs/target}"
version=$(awk '/^name = "agave-feature-set"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' Cargo.lock)
agave_root="${MCJS_AGAVE_ROOT:-$HOME/.cache/mcjs/agave-$version}"
validator="$agave_root/bin/solana-test-validator"
# The feature set of scripts/test.sh: what it built is reused, not rebuilt.
features="mcjs-cli/demo,mcjs-cli/yellowstone,mcjs-localnet/yellowstone"

say() { echo "mcjs-agave: $*" >&2; }

install() {
    if [ -x "$validator" ]; then
        say "solana-test-validator $version is installed: $validator"
        return
    fi
    local missing=()
    for pkg in libclang-dev clang protobuf-compiler libudev-dev; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        say "installing ${missing[*]} (Debian's packages; Agave's build needs them)"
        local sudo=
        [ "$(id -u)" -eq 0 ] || sudo=sudo
        $sudo apt-get install -y --no-install-recommends "${missing[@]}" >&2
    fi
    say "building solana-test-validator $version into $agave_root (about an hour on 2 cores, at low priority)"
    nice -n 19 cargo install agave-validator --version "$version" --locked \
        --bin solana-test-validator --root "$agave_root" \
        --target-dir "$HOME/.cache/mcjs/agave-build"
    rm -rf "$HOME/.cache/mcjs/agave-build"
}

require() {
    [ -x "$validator" ] || {
        say "solana-test-validator $version is not installed: run scripts/agave.sh install first"
        exit 1
    }
    export MCJS_VALIDATOR="$validator"
}

# The program's SBF build, as every local chain on Agave runs it.
program() {
    if [ -z "${MCJS_PROGRAM_SO:-}" ]; then
        MCJS_PROGRAM_SO="$(scripts/build-sbf.sh)"
    fi
    export MCJS_PROGRAM_SO
}

# `mcjs` as scripts/test.sh builds it (built here when absent).
mcjs_bin() {
    local bin="$CARGO_TARGET_DIR/debug/mcjs"
    if [ ! -x "$bin" ]; then
        say "building mcjs (the feature set of scripts/test.sh)"
        cargo build --locked -p mcjs-cli --features "$features" >&2
    fi
    echo "$bin"
}

# solana-py, as scripts/test.sh installs it for the auditor's example.
python_bin() {
    local venv="$HOME/.cache/mcjs/python-auditor"
    if [ ! -x "$venv/bin/python" ]; then
        rm -rf "$venv"
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check -r examples/auditor/requirements.txt >&2
        cp examples/auditor/requirements.txt "$venv/pins.txt"
    fi
    echo "$venv/bin/python"
}

deploy() {
    require
    program
    local mcjs python
    mcjs=$(mcjs_bin)
    python=$(python_bin)
    # Global: the trap runs after this function has returned.
    deploy_dir=$(mktemp -d)
    local dir=$deploy_dir
    trap 'kill "${pid:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$deploy_dir"' EXIT
    "$mcjs" node keygen -o "$dir/admin.json" >/dev/null
    "$mcjs" node keygen -o "$dir/scheduler.json" >/dev/null
    local admin port
    admin=$("$python" scripts/agave_usdc.py pubkey "$dir/admin.json")
    port=$((20000 + RANDOM % 20000))
    # The admin is the genesis mint: its SOL pays for the deployment.
    "$validator" --ledger "$dir/ledger" --reset --quiet --bind-address 127.0.0.1 \
        --rpc-port "$port" --faucet-port $((port + 2)) --gossip-port $((port + 3)) \
        --dynamic-port-range "$((port + 10))-$((port + 60))" --mint "$admin" \
        >"$dir/validator.log" 2>&1 &
    pid=$!
    local url="http://127.0.0.1:$port" waited=0
    until "$python" scripts/agave_usdc.py ready "$url" 2>/dev/null; do
        sleep 1
        waited=$((waited + 1))
        if [ "$waited" -gt 120 ] || ! kill -0 "$pid" 2>/dev/null; then
            tail -20 "$dir/validator.log" >&2
            say "the validator did not serve RPC"
            exit 1
        fi
    done
    say "validator up at $url after ${waited} s; a USDC mint and treasury by solana-py"
    local made mint treasury
    made=$("$python" scripts/agave_usdc.py mint "$url" "$dir/admin.json")
    mint=${made% *}
    treasury=${made#* }
    local start=$SECONDS
    PATH="$(dirname "$mcjs"):$PATH" bash migrations/deploy.sh --url "$url" --admin "$dir/admin.json" \
        --program-keypair migrations/keys/mcjs-program-keypair.json --so "$MCJS_PROGRAM_SO" \
        --usdc-mint "$mint" --treasury "$treasury" \
        --scheduler "$("$python" scripts/agave_usdc.py pubkey "$dir/scheduler.json")"
    say "migrations/deploy.sh deployed, initialised and published the IDL in $((SECONDS - start)) s"
    # Run again: already deployed, initialised and published; nothing changes.
    local again
    again=$(PATH="$(dirname "$mcjs"):$PATH" bash migrations/deploy.sh --url "$url" --admin "$dir/admin.json" \
        --program-keypair migrations/keys/mcjs-program-keypair.json --so "$MCJS_PROGRAM_SO" \
        --usdc-mint "$mint" --treasury "$treasury" \
        --scheduler "$("$python" scripts/agave_usdc.py pubkey "$dir/scheduler.json")" 2>&1)
    echo "$again"
    case "$again" in
        *"already deployed"*"already initialised"*"IDL already published"*) say "a second run changed nothing" ;;
        *) say "a second run of migrations/deploy.sh did not find the deployment"; exit 1 ;;
    esac
}

case "${1:-}" in
    install) install ;;
    path)
        [ -x "$validator" ] || exit 1
        echo "$validator"
        ;;
    deploy) deploy ;;
    story)
        shift
        require
        program
        exec "$(mcjs_bin)" demo --dir "${MCJS_AGAVE_DEMO_DIR:-$(mktemp -d)/demo}" "$@"
        ;;
    bench)
        shift
        require
        program
        mcjs=$(mcjs_bin)
        cargo build --locked --workspace --examples --features "$features" >&2
        exec "$CARGO_TARGET_DIR/debug/examples/recovery_bench" --mcjs "$mcjs" "$@"
        ;;
    *)
        sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
        exit 2
        ;;
esac
