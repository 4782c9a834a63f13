#!/usr/bin/env bash
# Deploys the MCJS program (an `anchor build` artefact) to a cluster and
# initialises its Config. See migrations/README.md.
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

command -v solana >/dev/null || { echo "the solana CLI is not installed (see migrations/README.md)" >&2; exit 2; }
command -v mcjs >/dev/null || { echo "the mcjs CLI is not on PATH: cargo install --path app/cli" >&2; exit 2; }
[ -f "$so" ] || { echo "no program binary at $so: run \`anchor build -p mcjs\` first" >&2; exit 2; }
[ -f "$admin" ] || { echo "no admin keypair at $admin" >&2; exit 2; }
[ -f "$program_keypair" ] || { echo "no program keypair at $program_keypair" >&2; exit 2; }

program_id=$(solana-keygen pubkey "$program_keypair")
declared=$(grep -o 'declare_id!("[^"]*")' programs/mcjs/src/lib.rs | cut -d'"' -f2)
if [ "$program_id" != "$declared" ]; then
  echo "the program keypair is $program_id but the program declares $declared: update declare_id! and rebuild" >&2
  exit 2
fi

if solana -u "$url" program show "$program_id" >/dev/null 2>&1 && [ "$upgrade" = 0 ]; then
  echo "program $program_id is already deployed on $url (pass --upgrade to deploy again)"
else
  echo "deploying $so as $program_id to $url"
  solana -u "$url" -k "$admin" program deploy --program-id "$program_keypair" "$so"
fi

if mcjs -u "$url" admin show >/dev/null 2>&1; then
  echo "the Config is already initialised"
else
  mcjs -u "$url" -k "$admin" admin init \
    --usdc-mint "$mint" --treasury "$treasury" --scheduler "$scheduler" "${params[@]}"
fi
mcjs -u "$url" admin show
