#!/usr/bin/env bash
# Compute units per MCJS instruction, on the program's SBF build (what a
# cluster charges), over every transaction of the program suite: builds the
# ELF (scripts/build-sbf.sh), runs tests/program against it with
# MCJS_CU_LOG, and prints per instruction how many succeeded with their
# median and largest compute units (CPIs included), the largest that one
# the program refused consumed, and the ELF's size. While measuring, the
# suite grants every transaction the most a transaction may have, so the
# figures are not capped by the client's limits they are the source of
# (orchestrator/client/src/compute.rs).
# Writes the same to bench/results/program-cu.txt.
#
#   bench/program_cu.sh              (about 2 minutes once both builds are warm)
#
# For scale: a transaction may use 1.4M compute units, an instruction 200k
# unless it asks for more; an SPL token transfer costs about 4.6k.
#
# The property test's sequences make most of the samples; they are drawn
# from PROPTEST_RNG_SEED (fixed here unless set), so runs compare. Figures
# still move by about ±1.5k: the tests' keys are random, and so is the
# number of tries each PDA's bump search takes.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/mcjs/target}"
out="${1:-bench/results/program-cu.txt}"

elf=$(scripts/build-sbf.sh)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
MCJS_PROGRAM_SO="$elf" MCJS_CU_LOG="$log" PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-1}" \
    nice -n 19 cargo test --locked -p mcjs-tests --test program >&2

mkdir -p "$(dirname "$out")"
{
    echo "# Compute units per MCJS instruction: SBF build, top-level instructions"
    echo "# of tests/program (bench/program_cu.sh, $(date -u +%Y-%m-%d)): count, median"
    echo "# and max of the successful ones; max of the ones the program refused"
    echo "# ELF: $(stat -c %s "$elf") bytes (profile ${MCJS_SBF_PROFILE:-sbf})"
    bench/program_cu.py "$log"
} | tee "$out"
