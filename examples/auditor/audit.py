#!/usr/bin/env python3
"""An auditor's view of MCJS from the chain alone, with the ecosystem's tools.

Everything here comes from Solana's JSON-RPC (through solana-py, the
ecosystem's Python client) and the program's published Anchor IDL
(idl/mcjs.json, or with `--idl chain` the copy the program's upgrade
authority wrote into Anchor's IDL account): no MCJS code. Accounts are found by the 8-byte
discriminator the IDL gives each, decoded by the IDL's types (Borsh), and a
job's history is read from its transactions' `Program data:` lines (Anchor
events, each named by its discriminator), believed only where the MCJS
program itself logged them.

    python3 examples/auditor/audit.py --url http://127.0.0.1:8899 provider <PROVIDER ACCOUNT>
    python3 examples/auditor/audit.py --url http://127.0.0.1:8899 job <JOB ACCOUNT>
    ... --idl chain      (the IDL the program published on chain, not the file)
    ... --output json    (one JSON document instead of text)

Needs solana-py: `pip install -r examples/auditor/requirements.txt`.
"""

import argparse
import base64
import json
import re
import struct
import sys
import zlib
from pathlib import Path

from solana.rpc.api import Client
from solana.rpc.types import MemcmpOpts
from solders.pubkey import Pubkey

DEFAULT_IDL = Path(__file__).resolve().parents[2] / "idl" / "mcjs.json"

INTS = {
    "u8": "<B", "i8": "<b", "u16": "<H", "i16": "<h", "u32": "<I", "i32": "<i",
    "u64": "<Q", "i64": "<q", "f32": "<f", "f64": "<d",
}


class Idl:
    """The program's IDL: its types, and accounts and events by discriminator."""

    def __init__(self, raw):
        self.raw = raw
        self.program = Pubkey.from_string(self.raw["address"])
        self.types = {t["name"]: t for t in self.raw.get("types", [])}
        self.accounts = {a["name"]: bytes(a["discriminator"]) for a in self.raw["accounts"]}
        self.events = {bytes(e["discriminator"]): e["name"] for e in self.raw.get("events", [])}

    def decode(self, ty, data, at=0):
        """Decodes `ty` (an IDL type) from `data` at `at`: (value, next offset)."""
        if isinstance(ty, str):
            if ty in INTS:
                fmt = INTS[ty]
                return struct.unpack_from(fmt, data, at)[0], at + struct.calcsize(fmt)
            if ty in ("u128", "i128"):
                raw = data[at:at + 16]
                return int.from_bytes(raw, "little", signed=ty == "i128"), at + 16
            if ty == "bool":
                return data[at] != 0, at + 1
            if ty == "pubkey":
                return str(Pubkey.from_bytes(data[at:at + 32])), at + 32
            if ty in ("string", "bytes"):
                (n,) = struct.unpack_from("<I", data, at)
                raw = data[at + 4:at + 4 + n]
                return (raw.decode() if ty == "string" else raw.hex()), at + 4 + n
            raise ValueError(f"IDL type {ty} not understood")
        if "option" in ty:
            if data[at] == 0:
                return None, at + 1
            return self.decode(ty["option"], data, at + 1)
        if "vec" in ty:
            (n,) = struct.unpack_from("<I", data, at)
            at += 4
            out = []
            for _ in range(n):
                v, at = self.decode(ty["vec"], data, at)
                out.append(v)
            return out, at
        if "array" in ty:
            inner, n = ty["array"]
            if inner == "u8":
                return data[at:at + n].hex(), at + n
            out = []
            for _ in range(n):
                v, at = self.decode(inner, data, at)
                out.append(v)
            return out, at
        if "defined" in ty:
            return self.decode_defined(ty["defined"]["name"], data, at)
        raise ValueError(f"IDL type {ty} not understood")

    def decode_fields(self, fields, data, at):
        if fields and isinstance(fields[0], dict) and "name" in fields[0]:
            out = {}
            for f in fields:
                out[f["name"]], at = self.decode(f["type"], data, at)
            return out, at
        out = []
        for f in fields:
            v, at = self.decode(f, data, at)
            out.append(v)
        return out, at

    def decode_defined(self, name, data, at=0):
        ty = self.types[name]["type"]
        if ty["kind"] == "struct":
            return self.decode_fields(ty.get("fields", []), data, at)
        if ty["kind"] == "enum":
            variant = ty["variants"][data[at]]
            fields = variant.get("fields")
            if not fields:
                return variant["name"], at + 1
            value, at = self.decode_fields(fields, data, at + 1)
            return {variant["name"]: value}, at
        raise ValueError(f"IDL type kind {ty['kind']} not understood")

    def account(self, name, data):
        """Decodes account `name`, checking its discriminator."""
        if bytes(data[:8]) != self.accounts[name]:
            raise ValueError(f"not a {name} account")
        value, _ = self.decode_defined(name, bytes(data), 8)
        return value


B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def b58(raw):
    """Base58, as the RPC's `memcmp` filter takes its bytes."""
    n = int.from_bytes(raw, "big")
    out = ""
    while n:
        n, r = divmod(n, 58)
        out = B58[r] + out
    return "1" * (len(raw) - len(raw.lstrip(b"\0"))) + out


def accounts_of(client, idl, name):
    """Every account of type `name` the program owns, decoded: (address, value)."""
    disc = b58(idl.accounts[name])
    found = client.get_program_accounts(
        idl.program, encoding="base64", filters=[MemcmpOpts(offset=0, bytes=disc)]
    ).value
    return [(str(a.pubkey), idl.account(name, a.account.data)) for a in found]


def account(client, idl, name, address):
    info = client.get_account_info(Pubkey.from_string(address)).value
    if info is None:
        raise SystemExit(f"error: {address} holds no account on this chain")
    if info.owner != idl.program:
        raise SystemExit(f"error: {address} is not an account of the MCJS program {idl.program}")
    return idl.account(name, info.data)


INVOKE = re.compile(r"^Program (\w+) invoke \[\d+\]$")
ENDS = re.compile(r"^Program (\w+) (success|failed.*)$")


def events_of(client, idl, address):
    """The MCJS events of every transaction that touched `address`, oldest first."""
    sigs = client.get_signatures_for_address(Pubkey.from_string(address), limit=1000).value
    out = []
    for s in reversed(sigs):
        if s.err is not None:
            continue
        tx = client.get_transaction(s.signature, encoding="json", max_supported_transaction_version=0).value
        logs = (tx.transaction.meta.log_messages or []) if tx else []
        stack = []
        for line in logs:
            if m := INVOKE.match(line):
                stack.append(m.group(1))
            elif ENDS.match(line) and stack:
                stack.pop()
            elif line.startswith("Program data: ") and stack and stack[-1] == str(idl.program):
                raw = base64.b64decode(line[len("Program data: "):])
                name = idl.events.get(raw[:8])
                if name is None:
                    continue
                value, _ = idl.decode_defined(name, raw, 8)
                out.append({"event": name, "signature": str(s.signature), "slot": s.slot, **value})
    return out


def state_name(state):
    return state if isinstance(state, str) else next(iter(state))


def job_report(client, idl, address):
    job = account(client, idl, "Job", address)
    events = events_of(client, idl, address)
    checkpoints = [
        {k: e[k] for k in ("generation", "epoch", "step", "checkpoint_hash", "by", "at")}
        for e in events if e["event"] == "CheckpointAttested"
    ]
    payments = [
        {"event": e["event"], **{k: v for k, v in e.items() if k in (
            "provider", "generation", "provider_amount", "commission", "amount", "refund")}}
        for e in events if e["event"] in ("SegmentSettled", "JobCompleted", "OwnerCompensated",
                                           "JobCancelled", "JobExpired", "BondToppedUp")
    ]
    return {
        "job": address,
        "owner": job["owner"],
        "state": state_name(job["state"]),
        "node": job["node"],
        "provider": job["provider"],
        "generation": job["generation"],
        "bond": job["bond"],
        "paid": job["paid"],
        "accrued": job["accrued"],
        "rate_per_hour": job["rate_per_hour"],
        "checkpoint_count": job["checkpoint_count"],
        "last_checkpoint": job["last_checkpoint"],
        "checkpoint_chain": job["checkpoint_chain"],
        "output_hash": job["output_hash"],
        "events": [e["event"] for e in events],
        "checkpoints": checkpoints,
        "payments": payments,
    }


def provider_report(client, idl, address):
    provider = account(client, idl, "Provider", address)
    nodes = [(k, n) for k, n in accounts_of(client, idl, "Node") if n["provider"] == address]
    node_keys = {k for k, _ in nodes}
    # Jobs on its nodes now, and every job its history names (a finished
    # job's account no longer names its provider; the events do).
    jobs = {k: j for k, j in accounts_of(client, idl, "Job")
            if j["provider"] == address or j["node"] in node_keys}
    for e in events_of(client, idl, address):
        if "job" in e and (e.get("provider") == address or e.get("node") in node_keys):
            jobs.setdefault(e["job"], None)
    for key in [k for k, j in jobs.items() if j is None]:
        info = client.get_account_info(Pubkey.from_string(key)).value
        jobs[key] = idl.account("Job", info.data) if info is not None else {
            "state": "Closed", "paid": None, "checkpoint_count": None}
    jobs = sorted(jobs.items())
    return {
        "provider": address,
        "owner": provider["owner"],
        "payout": provider["payout"],
        "stake": provider["stake"],
        "jobs_completed": provider["jobs_completed"],
        "failures": provider["failures"],
        "slashed_total": provider["slashed_total"],
        "nodes": [{"node": k, "operator": n["operator"], "gpu_model": n["hardware"]["gpu_model"],
                   "status": state_name(n["status"]), "price_per_gpu_hour": n["price_per_gpu_hour"]}
                  for k, n in sorted(nodes)],
        "jobs": [{"job": k, "state": state_name(j["state"]), "paid": j["paid"],
                  "checkpoint_count": j["checkpoint_count"]} for k, j in jobs],
    }


def print_text(report):
    for key, value in report.items():
        if isinstance(value, list):
            print(f"{key}: {len(value)}")
            for item in value:
                print("  " + (json.dumps(item) if not isinstance(item, str) else item))
        else:
            print(f"{key}: {value}")


# MCJS's program, as it declares itself (used only to find its IDL on chain).
MCJS_PROGRAM = "AuhJzp4ahHy1c5roHmYBic35bHXpUk5B9L5TCxErDQLe"


def chain_idl(client, program):
    """The IDL a program published in Anchor's IDL account, where anchorpy's
    `fetch_idl` and explorers read it: at create_with_seed(PDA of no seeds,
    "anchor:idl", program), an 8-byte discriminator, the authority, a u32
    length and the zlib-compressed JSON."""
    base, _ = Pubkey.find_program_address([], program)
    address = Pubkey.create_with_seed(base, "anchor:idl", program)
    account = client.get_account_info(address).value
    if account is None or account.owner != program:
        raise SystemExit(f"the program {program} has published no IDL (no account at {address})")
    data = bytes(account.data)
    length = struct.unpack_from("<I", data, 40)[0]
    if length == 0:
        raise SystemExit(f"the IDL at {address} is being written: try again in a moment")
    return json.loads(zlib.decompress(data[44:44 + length]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8899", help="the chain's JSON-RPC URL")
    parser.add_argument(
        "--idl", default=str(DEFAULT_IDL),
        help="the program's Anchor IDL: a file, or `chain` for the one the program published",
    )
    parser.add_argument("--program", default=MCJS_PROGRAM, help="with --idl chain: the program")
    parser.add_argument("--output", choices=["text", "json"], default="text")
    sub = parser.add_subparsers(dest="what", required=True)
    sub.add_parser("provider", help="a provider's nodes and jobs").add_argument("address")
    sub.add_parser("job", help="a job's state, checkpoints and payments").add_argument("address")
    args = parser.parse_args(argv)
    try:
        Pubkey.from_string(args.address)
    except ValueError:
        parser.error(f"{args.address} is not a base58 account address")
    client = Client(args.url)
    if args.idl == "chain":
        idl = Idl(chain_idl(client, Pubkey.from_string(args.program)))
    else:
        idl = Idl(json.loads(Path(args.idl).read_text()))
    report = (provider_report if args.what == "provider" else job_report)(client, idl, args.address)
    if args.output == "json":
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        print_text(report)


if __name__ == "__main__":
    main()
