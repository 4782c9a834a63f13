#!/usr/bin/env python3
"""The report at the end of scripts/test.sh: each step's wall time and the
crates it compiled, the tests counted per run, and the ten slowest tests.

    scripts/test-report.py REPORT_DIR NEXTEST_DIR

REPORT_DIR holds steps.tsv (name, seconds, crates compiled, exit status, one
step a line) and each step's log; NEXTEST_DIR is nextest's store
($CARGO_TARGET_DIR/nextest), whose <profile>/junit.xml files give every
test's time. Standard library only: it runs before anything is installed.
"""

import os
import sys
import xml.etree.ElementTree as ET


def minutes(seconds):
    return f"{seconds // 60}:{seconds % 60:02d}"


def steps(report_dir):
    rows = []
    path = os.path.join(report_dir, "steps.tsv")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                name, secs, compiled, rc = line.rstrip("\n").split("\t")
                rows.append((name, int(secs), int(compiled or 0), int(rc)))
    return rows


def junit_runs(nextest_dir):
    """(profile, tests) for each JUnit file, tests as (name, seconds, outcome)."""
    runs = []
    if not os.path.isdir(nextest_dir):
        return runs
    for profile in sorted(os.listdir(nextest_dir)):
        path = os.path.join(nextest_dir, profile, "junit.xml")
        if not os.path.exists(path):
            continue
        tests = []
        for case in ET.parse(path).getroot().iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                outcome = "failed"
            elif case.find("skipped") is not None:
                outcome = "skipped"
            else:
                outcome = "passed"
            # A test that needed a retry is a failure here (retries are 0 in
            # .config/nextest.toml; this holds if someone raises them).
            if case.find("flakyFailure") is not None or case.find("rerunFailure") is not None:
                outcome = "failed"
            name = f"{case.get('classname')} {case.get('name')}"
            tests.append((name, float(case.get("time") or 0), outcome))
        runs.append((profile, tests))
    return runs


def main():
    report_dir, nextest_dir = sys.argv[1], sys.argv[2]
    rows = steps(report_dir)
    out = ["", "mcjs-test report", "", f"{'step':<22}{'wall':>8}{'compiled':>10}{'exit':>6}"]
    for name, secs, compiled, rc in rows:
        out.append(f"{name:<22}{minutes(secs):>8}{compiled:>10}{rc:>6}")
    # The SBF build runs beside the workspace's build: not added to the total.
    total = sum(secs for name, secs, _, _ in rows if "beside" not in name)
    out.append(f"{'total':<22}{minutes(total):>8}")
    out.append("")
    slow = []
    for profile, tests in junit_runs(nextest_dir):
        counts = {k: sum(1 for t in tests if t[2] == k) for k in ("passed", "failed", "skipped")}
        out.append(
            f"tests ({profile}): {len(tests)} run, {counts['passed']} passed, "
            f"{counts['failed']} failed"
        )
        for name, secs, outcome in tests:
            if outcome == "failed":
                out.append(f"  FAILED {name}")
        slow.extend((secs, profile, name) for name, secs, _ in tests)
    if slow:
        out.append("")
        out.append("slowest ten tests:")
        for secs, profile, name in sorted(slow, reverse=True)[:10]:
            out.append(f"  {secs:8.1f} s  {name}" + ("" if profile == "default" else f" [{profile}]"))
    print("\n".join(out), file=sys.stderr)


if __name__ == "__main__":
    main()
