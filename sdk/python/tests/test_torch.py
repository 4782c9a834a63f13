"""The PyTorch example (examples/pytorch/train.py, on mcjs_job.torch) under
the contract: stopped by SIGTERM and resumed from its checkpoint it ends with
the same model bytes as a run never stopped; restored from checkpoint k of a
fixed-step run it writes checkpoint k+1 with the same hash (what a check
re-executes).

Runs with an interpreter that has torch: $MCJS_TORCH_PYTHON, else
python3, else /usr/bin/python3 (Debian's python3-torch; scripts/setup.sh
installs it). Skipped when none has it, unless MCJS_REQUIRE_TORCH=1
(scripts/test.sh sets it), which makes that a failure.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "src")
TRAIN = os.path.join(HERE, "..", "..", "..", "examples", "pytorch", "train.py")
sys.path.insert(0, SRC)

import mcjs_job  # noqa: E402


def torch_python():
    candidates = [os.environ.get("MCJS_TORCH_PYTHON"), sys.executable, "python3", "/usr/bin/python3"]
    for python in filter(None, candidates):
        try:
            subprocess.run([python, "-c", "import torch"], check=True, capture_output=True)
            return python
        except (OSError, subprocess.CalledProcessError):
            continue
    return None


PYTHON = torch_python()
REQUIRED = os.environ.get("MCJS_REQUIRE_TORCH") == "1"


def needs_torch(test):
    if PYTHON is None and not REQUIRED:
        return unittest.skip("no interpreter with torch (set MCJS_TORCH_PYTHON)")(test)
    return test


class Run:
    """One run of the example in its own directories, as MCJS sets it up."""

    def __init__(self, root, name, epochs, restore=None, every_steps=None):
        self.dir = os.path.join(root, name)
        self.checkpoints = os.path.join(self.dir, "checkpoints")
        self.output = os.path.join(self.dir, "output")
        self.metrics = os.path.join(self.dir, "metrics.jsonl")
        for d in (self.checkpoints, self.output):
            os.makedirs(d)
        env = dict(os.environ)
        env.update(
            PYTHONPATH=SRC,
            MCJS_CHECKPOINT_DIR=self.checkpoints,
            MCJS_OUTPUT_DIR=self.output,
            MCJS_DATA_DIR=self.dir,
            MCJS_CHECKPOINT_INTERVAL_SECS="3600",
            MCJS_METRICS_FILE=self.metrics,
        )
        env.pop("MCJS_RESTORE_DIR", None)
        env.pop("MCJS_CHECKPOINT_EVERY_STEPS", None)
        if restore:
            env["MCJS_RESTORE_DIR"] = restore
        if every_steps:
            env["MCJS_CHECKPOINT_EVERY_STEPS"] = str(every_steps)
        if PYTHON is None:
            raise AssertionError("MCJS_REQUIRE_TORCH=1 and no interpreter has torch")
        self.process = subprocess.Popen(
            [PYTHON, TRAIN, "--epochs", str(epochs), "--rows", "512"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def wait(self):
        out, err = self.process.communicate(timeout=600)
        self.stderr = err.decode()
        return self.process.returncode

    def metrics_lines(self):
        try:
            with open(self.metrics) as f:
                return [json.loads(line) for line in f if line.endswith("\n")]
        except FileNotFoundError:
            return []

    def model(self):
        with open(os.path.join(self.output, "model.pt"), "rb") as f:
            return f.read()

    def complete_checkpoints(self):
        found = []
        for name in sorted(os.listdir(self.checkpoints)):
            path = os.path.join(self.checkpoints, name)
            if os.path.exists(os.path.join(path, mcjs_job.MANIFEST)):
                found.append(path)
        return found


@needs_torch
class PyTorchExample(unittest.TestCase):
    def test_stopped_by_sigterm_and_resumed_it_ends_with_the_uninterrupted_models_bytes(self):
        epochs = 150
        with tempfile.TemporaryDirectory() as root:
            whole = Run(root, "whole", epochs)
            self.assertEqual(whole.wait(), 0, whole.stderr)

            first = Run(root, "first", epochs)
            while len(first.metrics_lines()) < 5 and first.process.poll() is None:
                time.sleep(0.01)
            first.process.send_signal(signal.SIGTERM)
            self.assertEqual(first.wait(), mcjs_job.EXIT_PREEMPTED, first.stderr)
            checkpoints = first.complete_checkpoints()
            self.assertEqual(len(checkpoints), 1, "one checkpoint, on SIGTERM")
            # Restored from a copy, as the agent mounts one.
            restore = os.path.join(root, "restore")
            shutil.copytree(checkpoints[0], restore)
            with open(os.path.join(restore, mcjs_job.MANIFEST)) as f:
                at = json.load(f)["step"]
            self.assertLess(at, epochs * 8, "stopped part-way")

            second = Run(root, "second", epochs, restore=restore)
            self.assertEqual(second.wait(), 0, second.stderr)
            self.assertIn(f"resumed at epoch {at // 8} step {at}", second.stderr)
            self.assertEqual(second.model(), whole.model(), "byte-identical to the run never stopped")
            self.assertEqual(
                second.metrics_lines()[-1], whole.metrics_lines()[-1], "the same last metrics"
            )

    def test_restored_from_checkpoint_k_a_fixed_step_run_writes_checkpoint_k_plus_1_again(self):
        with tempfile.TemporaryDirectory() as root:
            first = Run(root, "first", 4, every_steps=8)
            self.assertEqual(first.wait(), 0, first.stderr)
            checkpoints = first.complete_checkpoints()
            self.assertEqual(len(checkpoints), 4, "steps 8, 16, 24, 32 and no other")
            hashes = [mcjs_job.checkpoint_hash(c) for c in checkpoints]
            check = Run(root, "check", 4, restore=checkpoints[1], every_steps=8)
            self.assertEqual(check.wait(), 0, check.stderr)
            again = check.complete_checkpoints()
            self.assertEqual([os.path.basename(c) for c in again], ["step-000000000024", "step-000000000032"])
            self.assertEqual([mcjs_job.checkpoint_hash(c) for c in again], hashes[2:])

    def test_an_unreadable_restore_is_bad_input(self):
        with tempfile.TemporaryDirectory() as root:
            run = Run(root, "bad", 2, restore=root)
            self.assertEqual(run.wait(), mcjs_job.EXIT_BAD_INPUT, run.stderr)
            self.assertIn("cannot resume", run.stderr)


if __name__ == "__main__":
    unittest.main()
