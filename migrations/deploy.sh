#!/usr/bin/env bash
# Deploys the MCJS program's SBF ELF (scripts/build-sbf.sh, or `anchor build`
# where Solana's platform tools are installed) to a cluster by the upgradeable
# loader's transactions (`mcjs admin deploy`), then initialises its Config and
# publishes its IDL (`mcjs admin publish-idl`, where the ecosystem's tools read it).
# See migrations/README.md.
set -euo pipefail

usage() {
  cat >&2 <<USAGE
usage: $0 --url URL --admin KEYPAIR --program-keypair KEYPAIR --so PATH \\
          --usdc-mint MINT --treasury TOKEN_ACCOUNT --scheduler PUBKEY [--upgrade] \\
          [--commission-bps N] [--slash USDC] [--min-stake USDC] [--liveness-factor N] \\
          [--withdrawal-cooldown-secs N]
USAGE
  exit 2
}

url= admin= program_keypair= so= mint= treasury= scheduler= upgrade=0
params=()
while [ $# -gt 0 ]; do
  case "$1" in
    --url) url=$2; shift 2 ;;
    --admin) admin=$2; shift 2 ;;
    --program-keypair) program_keypair=$2; shift 2 ;;
    --so) so=$2; shift 2 ;;
    --usdc-mint) mint=$2; shift 2 ;;
    --treasury) treasury=$2; shift 2 ;;
    --scheduler) scheduler=$2; shift 2 ;;
    --upgrade) upgrade=1; shift ;;
    --commission-bps|--slash|--min-stake|--liveness-factor|--withdrawal-cooldown-secs)
      params+=("$1" "$2"); shift 2 ;;
    -h|--help) usage ;;
    *) echo "unknown argument: $1" >&2; usage ;;
  esac
done
for v in url admin program_keypair so mint treasury scheduler; do
  [ -n "${!v}" ] || { echo "missing --${v//_/-}" >&2; usage; }
done

command -v mcjs >/dev/null || { echo "the mcjs CLI is not on PATH: cargo install --path app/cli" >&2; exit 2; }
[ -f "$so" ] || { echo "no program binary at $so: run scripts/build-sbf.sh first" >&2; exit 2; }
[ -f "$admin" ] || { echo "no admin keypair at $admin" >&2; exit 2; }
[ -f "$program_keypair" ] || { echo "no program keypair at $program_keypair" >&2; exit 2; }

# Refuses a keypair other than the one the program declares, and a program
# already deployed unless --upgrade is given (then the admin must be its
# upgrade authority).
deploy=(mcjs -u "$url" -k "$admin" admin deploy --so "$so" --program-keypair "$program_keypair")
if [ "$upgrade" = 1 ]; then deploy+=(--upgrade); fi
if ! out=$("${deploy[@]}" 2>&1); then
  case "$out" in
    *"already deployed"*) echo "$out (carrying on with the Config)" ;;
    *) echo "$out" >&2; exit 1 ;;
  esac
else
  echo "$out"
fi

if mcjs -u "$url" admin show >/dev/null 2>&1; then
  echo "the Config is already initialised"
else
  mcjs -u "$url" -k "$admin" admin init \
    --usdc-mint "$mint" --treasury "$treasury" --scheduler "$scheduler" "${params[@]}"
fi
mcjs -u "$url" -k "$admin" admin publish-idl
mcjs -u "$url" admin show
