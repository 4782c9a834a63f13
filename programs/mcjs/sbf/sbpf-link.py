#!/usr/bin/env python3
"""The linker rustc calls for the SBF build (`-C linker=` this file).

Runs sbpf-linker in two passes with LLVM's `lower-atomic` pass between them:

  1. sbpf-linker <rustc's arguments> --emit llvm-bc   links and optimises the
     bitcode of every crate into one module, without code generation;
  2. opt -passes=lower-atomic                          turns atomic operations
     into plain loads and stores: std uses atomics, upstream LLVM's BPF backend
     cannot generate code for them (SBPF has no atomic instructions), and a
     Solana program runs on one thread;
  3. sbpf-linker <rustc's flags> lowered.bc -o <output>  code generation and
     the SBPF ELF.

Also maps -Os/-Oz to -O2: the bpf-linker inside sbpf-linker asks LLVM for the
pass pipeline "default<Os>", which LLVM 23 no longer has (rustc has already
marked every function optsize/minsize for opt-level s/z).

Environment: SBPF_LINKER (the sbpf-linker binary), LLVM_OPT (`opt` of the
same LLVM as rustc, from the toolchain's llvm-tools), MCJS_SBF_KEEP_BC (a
path: keep a copy of the lowered module there, for bench/program_size.sh).
"""
import os
import shutil
import subprocess
import sys
import tempfile

LINKER = os.environ.get("SBPF_LINKER", "sbpf-linker")
OPT = os.environ.get("LLVM_OPT", "opt")

# sbpf-linker's options that take a value as the next argument.
TAKES_VALUE = {
    "-o", "--output", "--emit", "-L", "--target", "--cpu", "--cpu-features",
    "--export-symbols", "--export", "--log-file", "--log-level", "--dump-module",
    "--llvm-args", "--arch", "--deploy", "--sbpf-optimize", "--fatal-errors",
    "--disable-expand-memcpy-in-order", "--override-cpu-flag", "--dump-cfg-dir",
    "--flavor", "-flavor",
}


def main() -> int:
    args = ["-O2" if a in ("-Os", "-Oz") else a for a in sys.argv[1:]]
    flags, inputs, output = [], [], None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-o", "--output"):
            output = args[i + 1]
            i += 2
        elif arg in TAKES_VALUE:
            flags += [arg, args[i + 1]]
            i += 2
        elif arg.startswith("-"):
            flags.append(arg)
            i += 1
        else:
            inputs.append(arg)
            i += 1
    if output is None:
        sys.exit("sbpf-link: rustc passed no -o")

    work = tempfile.mkdtemp(prefix="sbpf-link-", dir=os.path.dirname(os.path.abspath(output)))
    try:
        linked = os.path.join(work, "linked.bc")
        lowered = os.path.join(work, "lowered.bc")
        # Pass 1 writes bitcode, then fails to read it back as an ELF (for
        # `--deploy`): only the bitcode file tells whether it worked.
        first = subprocess.run(
            [LINKER, *flags, *inputs, "--emit", "llvm-bc", "--deploy", "false", "-o", linked],
            capture_output=True, text=True)
        if not os.path.exists(linked):
            sys.stderr.write(first.stdout + first.stderr)
            return first.returncode or 1
        subprocess.run([OPT, "-passes=lower-atomic", linked, "-o", lowered], check=True)
        keep = os.environ.get("MCJS_SBF_KEEP_BC")
        if keep:
            shutil.copy(lowered, keep)
        return subprocess.run([LINKER, *flags, lowered, "-o", output]).returncode
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
