"""What the example tests share: finding an interpreter that has a
library, and one run of an example job in its own directories, with the
environment MCJS gives a job."""

import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "src")
EXAMPLES = os.path.join(HERE, "..", "..", "..", "examples")
sys.path.insert(0, SRC)

import mcjs_job  # noqa: E402


def python_with(modules, candidates):
    """The first of `candidates` (interpreters) that imports `modules`."""
    for python in filter(None, candidates):
        try:
            subprocess.run([python, "-c", f"import {modules}"], check=True, capture_output=True)
            return python
        except (OSError, subprocess.CalledProcessError):
            continue
    return None


def needs(python, required, what):
    """Skips a test class when no interpreter has `what`, unless `required`
    (then the run fails instead)."""

    def mark(test):
        if python is None and not required:
            return unittest.skip(f"no interpreter with {what}")(test)
        return test

    return mark


class Run:
    """One run of an example in its own directories, as MCJS sets it up:
    `command` with the MCJS_* variables (none inherited), checkpoints every
    hour unless a signal or `every_steps` says otherwise."""

    def __init__(self, root, name, command, restore=None, every_steps=None, env=None):
        self.dir = os.path.join(root, name)
        self.checkpoints = os.path.join(self.dir, "checkpoints")
        self.output = os.path.join(self.dir, "output")
        self.metrics = os.path.join(self.dir, "metrics.jsonl")
        for d in (self.checkpoints, self.output):
            os.makedirs(d)
        environ = {k: v for k, v in os.environ.items() if not k.startswith("MCJS_")}
        environ.update(
            PYTHONPATH=SRC,
            MCJS_CHECKPOINT_DIR=self.checkpoints,
            MCJS_OUTPUT_DIR=self.output,
            MCJS_DATA_DIR=self.dir,
            MCJS_CHECKPOINT_INTERVAL_SECS="3600",
            MCJS_METRICS_FILE=self.metrics,
            **(env or {}),
        )
        if restore:
            environ["MCJS_RESTORE_DIR"] = restore
        if every_steps:
            environ["MCJS_CHECKPOINT_EVERY_STEPS"] = str(every_steps)
        self.process = subprocess.Popen(command, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def wait(self):
        out, err = self.process.communicate(timeout=600)
        self.stdout, self.stderr = out.decode(), err.decode()
        return self.process.returncode

    def metrics_lines(self):
        try:
            with open(self.metrics) as f:
                return [json.loads(line) for line in f if line.endswith("\n")]
        except FileNotFoundError:
            return []

    def output_file(self, name):
        with open(os.path.join(self.output, name), "rb") as f:
            return f.read()

    def complete_checkpoints(self):
        return [
            os.path.join(self.checkpoints, name)
            for name in sorted(os.listdir(self.checkpoints))
            if os.path.exists(os.path.join(self.checkpoints, name, mcjs_job.MANIFEST))
        ]
