"""The Hugging Face example (examples/huggingface/train.py, a Trainer with
mcjs_job.hf.MCJSCallback) under the contract: stopped by SIGTERM and resumed
from its checkpoint it ends with the same model bytes as a run never
stopped; on a fixed-step grid it checkpoints at those steps only, and
restored from checkpoint k writes checkpoint k+1 with the same hash.

Runs with an interpreter that has transformers: $MCJS_HF_PYTHON, else this
one. Skipped when neither has it, unless MCJS_REQUIRE_HF=1 (scripts/test.sh
sets it, with the environment scripts/setup.sh prepares), which makes that a
failure.
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

TRAIN = os.path.join(EXAMPLES, "huggingface", "train.py")
PYTHON = python_with("transformers, torch", [os.environ.get("MCJS_HF_PYTHON"), sys.executable])
REQUIRED = os.environ.get("MCJS_REQUIRE_HF") == "1"
needs_transformers = needs(PYTHON, REQUIRED, "transformers (set MCJS_HF_PYTHON)")


class Run(ExampleRun):
    """The Hugging Face example, `epochs` of 16 steps, `sleep_ms` after each."""

    def __init__(self, root, name, epochs, restore=None, every_steps=None, sleep_ms=0):
        if PYTHON is None:
            raise AssertionError("MCJS_REQUIRE_HF=1 and no interpreter has transformers")
        command = [PYTHON, TRAIN, "--epochs", str(epochs), "--step-sleep-ms", str(sleep_ms)]
        super().__init__(
            root, name, command, restore=restore, every_steps=every_steps, env={"HF_HUB_OFFLINE": "1"}
        )

    def model(self):
        return self.output_file("model.safetensors")


@needs_transformers
class HuggingFaceTrainer(unittest.TestCase):
    def test_stopped_by_sigterm_and_resumed_it_ends_with_the_uninterrupted_models_bytes(self):
        epochs = 4  # 16 steps an epoch
        with tempfile.TemporaryDirectory() as root:
            whole = Run(root, "whole", epochs)
            self.assertEqual(whole.wait(), 0, whole.stderr)
            self.assertEqual(whole.complete_checkpoints(), [], "no checkpoint due in an hour's interval")

            first = Run(root, "first", epochs, sleep_ms=40)
            while len(first.metrics_lines()) < 20 and first.process.poll() is None:
                time.sleep(0.01)
            first.process.send_signal(signal.SIGTERM)
            self.assertEqual(first.wait(), mcjs_job.EXIT_PREEMPTED, first.stderr)
            self.assertFalse(os.path.exists(os.path.join(first.output, "model.safetensors")))
            checkpoints = first.complete_checkpoints()
            self.assertEqual(len(checkpoints), 1, "one checkpoint, on SIGTERM")
            with open(os.path.join(checkpoints[0], mcjs_job.MANIFEST)) as f:
                manifest = json.load(f)
            at = manifest["step"]
            self.assertTrue(16 < at < epochs * 16, f"stopped part-way, past the first epoch: {at}")
            self.assertEqual(manifest["epoch"], at // 16)
            self.assertIn("trainer_state.json", manifest["files"])
            self.assertIn("rng_state.pth", manifest["files"])

            # Restored from a copy, as the agent mounts one.
            restore = os.path.join(root, "restore")
            shutil.copytree(checkpoints[0], restore)
            second = Run(root, "second", epochs, restore=restore)
            self.assertEqual(second.wait(), 0, second.stderr)
            self.assertIn(f"resuming from {restore}", second.stderr)
            self.assertEqual(second.model(), whole.model(), "byte-identical to the run never stopped")
            self.assertEqual(second.metrics_lines()[0]["step"], at + 1, "went on from the checkpoint")
            self.assertEqual(
                [m for m in second.metrics_lines() if "loss" in m][-1],
                [m for m in whole.metrics_lines() if "loss" in m][-1],
                "the same last step's loss",
            )

    def test_restored_from_checkpoint_k_a_fixed_step_run_writes_checkpoint_k_plus_1_again(self):
        with tempfile.TemporaryDirectory() as root:
            first = Run(root, "first", 3, every_steps=12)
            self.assertEqual(first.wait(), 0, first.stderr)
            checkpoints = first.complete_checkpoints()
            self.assertEqual(
                [os.path.basename(c) for c in checkpoints],
                ["step-000000000012", "step-000000000024", "step-000000000036", "step-000000000048"],
                "at the fixed steps and no other",
            )
            with open(os.path.join(checkpoints[0], mcjs_job.MANIFEST)) as f:
                files = json.load(f)["files"]
            self.assertIn("model.safetensors", files)
            self.assertNotIn("training_args.bin", files, "the run-to-run arguments are left out")
            hashes = [mcjs_job.checkpoint_hash(c) for c in checkpoints]
            check = Run(root, "check", 3, restore=checkpoints[1], every_steps=12)
            self.assertEqual(check.wait(), 0, check.stderr)
            again = check.complete_checkpoints()
            self.assertEqual([os.path.basename(c) for c in again], ["step-000000000036", "step-000000000048"])
            self.assertEqual([mcjs_job.checkpoint_hash(c) for c in again], hashes[2:])
            self.assertEqual(check.model(), first.model())

    def test_an_unreadable_restore_is_bad_input(self):
        with tempfile.TemporaryDirectory() as root:
            run = Run(root, "bad", 1, restore=root)
            self.assertEqual(run.wait(), mcjs_job.EXIT_BAD_INPUT, run.stderr)
            self.assertIn("cannot resume", run.stderr)


if __name__ == "__main__":
    unittest.main()
