#!/usr/bin/env bash
# Builds the MCJS program into an SBF ELF, the bytecode a Solana cluster runs,
# and prints the ELF's path on stdout (everything else goes to stderr).
#
#   scripts/build-sbf.sh            # then e.g. MCJS_PROGRAM_SO=$(scripts/build-sbf.sh)
#
# Where Solana's platform tools are installed (`cargo build-sbf`), they build
# it. Otherwise the program is built by upstream rustc for the target
# programs/mcjs/sbf/bpfel-solana-solana.json and linked by sbpf-linker; this
# script installs what that needs, pinned, and reuses it on later runs:
#
#   - the nightly below (its LLVM 23 is the first whose BPF backend compiles
#     the program), with rust-src (std is built for the target) and
#     llvm-tools (`opt`, used by the linker wrapper);
#   - sbpf-linker, into $MCJS_SBF_TOOLS;
#   - a copy of that nightly whose std carries programs/mcjs/sbf/std-solana.patch,
#     registered with rustup as `mcjs-sbf-<hash of the patch and tools dir>`
#     (a changed patch makes a new toolchain, so std is rebuilt from it).
#
# See programs/mcjs/sbf/README.md for each piece and what it costs.
#
# Environment:
#   MCJS_SBF_TARGET_DIR  cargo's target dir (default ~/.cache/mcjs/target-sbf,
#                        apart from the host builds' so neither waits on the other)
#   MCJS_SBF_TOOLS       installed tools (default ~/.cache/mcjs/sbf-tools)
#   MCJS_SBF_PROFILE     cargo profile (default `sbf`, see Cargo.toml)
#   MCJS_SBF_UPSTREAM=1  use the upstream route even where platform tools exist
#   MCJS_SBF_MEM_STORES  stores a memcpy/memset/memcmp may be expanded into
#                        before it calls the syscall instead (default 8)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
sbf=$root/programs/mcjs/sbf

nightly=nightly-2026-08-21
linker_version=0.2.6
target_dir=${MCJS_SBF_TARGET_DIR:-$HOME/.cache/mcjs/target-sbf}
tools=${MCJS_SBF_TOOLS:-$HOME/.cache/mcjs/sbf-tools}
profile=${MCJS_SBF_PROFILE:-sbf}
deploy=$target_dir/deploy

say() { echo "build-sbf: $*" >&2; }

# --- Solana's platform tools, where a machine has them ----------------------
if [ -z "${MCJS_SBF_UPSTREAM:-}" ] && cargo build-sbf --version >/dev/null 2>&1; then
    say "building with cargo build-sbf (Solana platform tools)"
    CARGO_TARGET_DIR=$target_dir nice -n 19 cargo build-sbf \
        --manifest-path programs/mcjs/Cargo.toml --sbf-out-dir "$deploy" -- --locked >&2
    echo "$deploy/mcjs.so"
    exit 0
fi

# --- 1. the nightly ----------------------------------------------------------
sysroot=$(rustc "+$nightly" --print sysroot 2>/dev/null || true)
host=$(rustc -vV | sed -n 's/^host: //p')
if [ -z "$sysroot" ] || [ ! -d "$sysroot/lib/rustlib/src/rust/library/std" ] \
    || [ ! -x "$sysroot/lib/rustlib/$host/bin/opt" ]; then
    say "installing $nightly with rust-src and llvm-tools"
    rustup toolchain install "$nightly" --profile minimal -c rust-src -c llvm-tools >&2
    sysroot=$(rustc "+$nightly" --print sysroot)
fi

# --- 2. sbpf-linker ----------------------------------------------------------
linker=$tools/sbpf-linker-$linker_version/bin/sbpf-linker
if [ ! -x "$linker" ]; then
    say "installing sbpf-linker $linker_version (a few minutes)"
    CARGO_TARGET_DIR=$tools/build nice -n 19 cargo "+$nightly" install \
        "sbpf-linker@$linker_version" --locked --root "$tools/sbpf-linker-$linker_version" >&2
    rm -rf "$tools/build"
fi

# --- 3. the nightly with std patched for target_os = "solana" ---------------
# Named by the patch and the tools dir: rustup's toolchain names are global.
toolchain=mcjs-sbf-$({ cat "$sbf/std-solana.patch"; echo "$tools"; } | sha256sum | cut -c1-12)
toolchain_dir=$tools/toolchains/$toolchain
if [ ! -e "$toolchain_dir/.complete" ]; then
    say "making toolchain $toolchain: $nightly with std-solana.patch"
    rm -rf "$toolchain_dir" "$toolchain_dir.tmp"
    mkdir -p "$tools/toolchains"
    # Hard links where possible: only library/ is changed, and it is copied.
    cp -al "$sysroot" "$toolchain_dir.tmp" 2>/dev/null \
        || { rm -rf "$toolchain_dir.tmp"; cp -a "$sysroot" "$toolchain_dir.tmp"; }
    library=$toolchain_dir.tmp/lib/rustlib/src/rust/library
    rm -rf "$library"
    cp -a "$sysroot/lib/rustlib/src/rust/library" "$library"
    (cd "$library" && patch -p1 --forward --quiet <"$sbf/std-solana.patch") >&2
    touch "$toolchain_dir.tmp/.complete"
    mv "$toolchain_dir.tmp" "$toolchain_dir"
fi
linked=$(rustc "+$toolchain" --print sysroot 2>/dev/null || true)
if [ -z "$linked" ] || [ "$(readlink -f "$linked")" != "$(readlink -f "$toolchain_dir")" ]; then
    rustup toolchain uninstall "$toolchain" >/dev/null 2>&1 || true
    rustup toolchain link "$toolchain" "$toolchain_dir" >&2
fi
# Toolchains of earlier versions of the patch.
for old in "$tools"/toolchains/mcjs-sbf-*; do
    [ "$old" = "$toolchain_dir" ] && continue
    [ -e "$old" ] || continue
    name=$(basename "$old")
    say "removing $name (an earlier std patch)"
    rustup toolchain uninstall "$name" >/dev/null 2>&1 || true
    rm -rf "$old"
done

# --- 4. the program ------------------------------------------------------
# The wrapper's passes, the std crates built from the patched source, and a
# 4 KiB stack frame limit (SBF's): LLVM reports every function whose frame is
# larger, and the build fails. Code generation for SBPF, not the kernel's BPF:
# misaligned loads and stores (the SBPF VM allows them), and mem functions of
# more than MCJS_SBF_MEM_STORES (default 8) stores call Solana's sol_mem*
# syscalls instead of being expanded inline; together they halve the ELF and
# take about 40% off each instruction's compute units (programs/mcjs/sbf/
# README.md, "Code generation"). Source paths (kept for panic locations) are
# written machine-independently, so the same commit gives the same ELF.
export SBPF_LINKER=$linker
export LLVM_OPT=$toolchain_dir/lib/rustlib/$host/bin/opt
registry=${CARGO_HOME:-$HOME/.cargo}/registry/src
mem_stores=${MCJS_SBF_MEM_STORES:-8}
export RUSTFLAGS="-C linker=$sbf/sbpf-link.py -C panic=abort -C relocation-model=static -C link-arg=--llvm-args=-bpf-stack-size=4096 -C link-arg=--llvm-args=-bpf-max-stores-per-memfunc=$mem_stores -C link-arg=--cpu-features=+allows-misaligned-mem-access --remap-path-prefix=$toolchain_dir/lib/rustlib/src/rust=/rustc/$nightly --remap-path-prefix=$registry=/cargo/registry/src --remap-path-prefix=$root=/mcjs"
export CARGO_TARGET_DIR=$target_dir
say "building programs/mcjs (profile $profile) into $target_dir"
nice -n 19 cargo "+$toolchain" build --locked -p mcjs --profile "$profile" \
    --target "$sbf/bpfel-solana-solana.json" \
    -Zjson-target-spec -Zbuild-std=std,panic_abort \
    --config 'unstable.build-std-features=[]' >&2

elf=$target_dir/bpfel-solana-solana/$profile/libmcjs.so
[ -f "$elf" ] || { say "no ELF at $elf"; exit 1; }
mkdir -p "$deploy"
cmp -s "$elf" "$deploy/mcjs.so" || cp "$elf" "$deploy/mcjs.so"
say "$(stat -c %s "$deploy/mcjs.so") bytes"
echo "$deploy/mcjs.so"
