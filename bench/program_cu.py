#!/usr/bin/env python3
"""Summarises MCJS_CU_LOG files (instruction, compute units, ok|failed; see
tests/program/cu_log.rs) into a table: per instruction, how many executed
successfully, and the median and largest compute units they consumed.

  bench/program_cu.py LOG [LOG...]     one column group per file
"""
import statistics
import sys
from collections import defaultdict


def load(path):
    units = defaultdict(list)
    with open(path) as f:
        for line in f:
            name, cu, outcome = line.rstrip("\n").split("\t")
            if outcome == "ok":
                units[name].append(int(cu))
    return units


def main():
    tables = [load(p) for p in sys.argv[1:]]
    names = sorted(set().union(*tables))
    print("instruction".ljust(22) + "".join(f"{'count':>7}{'median':>9}{'max':>9}" for _ in tables))
    for name in names:
        row = name.ljust(22)
        for table in tables:
            cu = table.get(name, [])
            median = int(statistics.median(cu)) if cu else 0
            row += f"{len(cu):>7}{median:>9}{max(cu, default=0):>9}"
        print(row)


if __name__ == "__main__":
    main()
