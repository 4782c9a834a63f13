"""What scripts/agave.sh needs from solana-py (the ecosystem's Python client):
a keypair file's address, whether a validator serves RPC, and a USDC-like mint
(6 decimals) with a treasury token account, as a deployment on a fresh
cluster needs them before migrations/deploy.sh.

    python agave_usdc.py pubkey KEYPAIR_FILE
    python agave_usdc.py ready RPC_URL            (exit 0 once it has passed genesis)
    python agave_usdc.py mint RPC_URL ADMIN_FILE  (prints "MINT TREASURY")
"""

import json
import sys

from solana.rpc.api import Client
from solana.rpc.commitment import Confirmed
from solders.keypair import Keypair
from spl.token.client import Token
from spl.token.constants import TOKEN_PROGRAM_ID

USDC_DECIMALS = 6


def keypair(path: str) -> Keypair:
    with open(path) as f:
        return Keypair.from_bytes(bytes(json.load(f)))


def main(argv: list[str]) -> int:
    match argv:
        case ["pubkey", path]:
            print(keypair(path).pubkey())
        case ["ready", url]:
            slot = Client(url, commitment=Confirmed).get_slot().value
            return 0 if slot > 0 else 1
        case ["mint", url, admin_path]:
            conn = Client(url, commitment=Confirmed)
            admin = keypair(admin_path)
            token = Token.create_mint(
                conn, admin, admin.pubkey(), USDC_DECIMALS, TOKEN_PROGRAM_ID
            )
            treasury = token.create_associated_token_account(admin.pubkey())
            print(token.pubkey, treasury)
        case _:
            print(__doc__, file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
