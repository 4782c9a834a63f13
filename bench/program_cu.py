#!/usr/bin/env python3
"""Summarises MCJS_CU_LOG files (instruction, compute units, ok|failed; see
tests/program/cu_log.rs) into a table: per instruction, how many executed
successfully, the median and largest compute units they consumed, and the
largest consumed by one the program refused (an error path: its error is
logged, which costs units too; a client's limit must cover it, or the
refusal reads as an exhausted budget instead of its error).

  bench/program_cu.py LOG [LOG...]     one column group per file
"""
import statistics
import sys
from collections import defaultdict


def load(path):
    units = defaultdict(lambda: ([], []))
    with open(path) as f:
        for line in f:
            name, cu, outcome = line.rstrip("\n").split("\t")
            units[name][0 if outcome == "ok" else 1].append(int(cu))
    return units


def main():
    tables = [load(p) for p in sys.argv[1:]]
    names = sorted(set().union(*tables))
    print("instruction".ljust(22)
          + "".join(f"{'count':>7}{'median':>9}{'max':>9}{'refused':>9}" for _ in tables))
    for name in names:
        row = name.ljust(22)
        for table in tables:
            ok, refused = table.get(name, ([], []))
            median = int(statistics.median(ok)) if ok else 0
            row += f"{len(ok):>7}{median:>9}{max(ok, default=0):>9}{max(refused, default=0):>9}"
        print(row)


if __name__ == "__main__":
    main()
