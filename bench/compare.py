#!/usr/bin/env python3
"""Side by side: two benchmark result files -> one markdown table with ratios.

  python3 bench/compare.py bench/results/slurm.json bench/results/mcjs.json

Each file is a JSON object with at least
  {"system": "<name>", "provision_s": [seconds, ...], "recovery_s": [seconds, ...]}
(written by bench/slurm/bench.py and by the MCJS recovery_bench example).
The system names come from the "system" field. Ratios are slurm/other when one of
the two is "slurm", otherwise first/second; a ratio above 1 means the other
system is that many times faster. Median: statistics.median (the mean of the two
middle values for an even n). p99: nearest rank, ceil(0.99 n)-th smallest sample,
which is the maximum for n <= 100. Python 3 standard library only.
"""
import json
import math
import statistics
import sys

METRICS = (("provision_s", "submit -> running"),
           ("recovery_s", "node killed -> running again elsewhere"))


def p99(v):
    v = sorted(v)
    return v[max(1, math.ceil(0.99 * len(v))) - 1]


def stat(values, which):
    v = [float(x) for x in values if x is not None]
    if not v:
        return None
    return {"n": len(v), "median": statistics.median(v), "p99": p99(v)}[which]


def num(x, nd=3):
    if x is None:
        return "n/a"
    return str(x) if isinstance(x, int) else f"{x:.{nd}f}"


def ratio(a, b):
    if a is None or b is None or isinstance(a, int) or b == 0:
        return ""
    return f"{a / b:.1f}x" if a / b >= 10 else f"{a / b:.2f}x"


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    runs = []
    for path in argv[1:]:
        with open(path) as f:
            r = json.load(f)
        if "system" not in r:
            sys.exit(f"{path}: no 'system' field")
        runs.append(r)
    if runs[1]["system"] == "slurm" and runs[0]["system"] != "slurm":
        runs.reverse()
    a, b = runs
    na, nb = a["system"], b["system"]
    if na == nb:
        na, nb = f"{na} ({argv[1]})", f"{nb} ({argv[2]})"

    print(f"| metric | | {na} (s) | {nb} (s) | {na}/{nb} |")
    print("|---|---|---|---|---|")
    for key, name in METRICS:
        for which in ("n", "median", "p99"):
            va, vb = stat(a.get(key, []), which), stat(b.get(key, []), which)
            print(f"| {name if which == 'n' else ''} | {which} | {num(va)} | {num(vb)} | {ratio(va, vb)} |")
    extra = []
    for r in (a, b):
        if "resumed_from_checkpoint" in r:
            extra.append(f"{r['system']}: {r['resumed_from_checkpoint']} recoveries resumed from the checkpoint, "
                         f"{r.get('restarted_from_scratch', '?')} restarted from scratch")
        if r.get("machine"):
            m = r["machine"]
            extra.append(f"{r['system']}: measured on {m.get('host', '?')}, {m.get('nproc', '?')} CPUs, "
                         f"{m.get('mem_gib', '?')} GiB, {r.get('started', '?')}, load average "
                         f"{r.get('loadavg_start', '?')} -> {r.get('loadavg_end', '?')}")
    if extra:
        print()
        for line in extra:
            print(f"- {line}")


if __name__ == "__main__":
    main(sys.argv)
