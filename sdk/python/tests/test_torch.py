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
import sys
import tempfile
import time
import unittest

from example_runs import EXAMPLES, needs, python_with
from example_runs import Run as ExampleRun

import mcjs_job  # noqa: E402  (example_runs puts the package on the path)

TRAIN = os.path.join(EXAMPLES, "pytorch", "train.py")
PYTHON = python_with(
    "torch", [os.environ.get("MCJS_TORCH_PYTHON"), sys.executable, "python3", "/usr/bin/python3"]
)
REQUIRED = os.environ.get("MCJS_REQUIRE_TORCH") == "1"
needs_torch = needs(PYTHON, REQUIRED, "torch (set MCJS_TORCH_PYTHON)")


class Run(ExampleRun):
    """The PyTorch example, `epochs` over 512 generated rows."""

    def __init__(self, root, name, epochs, restore=None, every_steps=None):
        if PYTHON is None:
            raise AssertionError("MCJS_REQUIRE_TORCH=1 and no interpreter has torch")
        command = [PYTHON, TRAIN, "--epochs", str(epochs), "--rows", "512"]
        super().__init__(root, name, command, restore=restore, every_steps=every_steps)

    def model(self):
        return self.output_file("model.pt")


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
