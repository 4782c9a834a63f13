"""The job contract's Python package against docs/job-contract.md.

    python3 -m unittest discover -s sdk/python/tests -t sdk/python

(the package from sdk/python/src, or installed with pip install ./sdk/python).
orchestrator/runtime/tests/python_sdk.rs checks the same checkpoints with
the agent's own reader and hash.
"""

import hashlib
import json
import os
import signal
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

import mcjs_job  # noqa: E402
from mcjs_job import ContractError, Job  # noqa: E402


def write(directory, name, data):
    with open(os.path.join(directory, name), "w") as f:
        f.write(data)


def read(directory, name):
    with open(os.path.join(directory, name)) as f:
        return f.read()


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def env(root, **extra):
    base = {
        "MCJS_CHECKPOINT_DIR": os.path.join(root, "checkpoints"),
        "MCJS_OUTPUT_DIR": os.path.join(root, "output"),
        "MCJS_DATA_DIR": os.path.join(root, "data"),
        "MCJS_CHECKPOINT_INTERVAL_SECS": "60",
    }
    base.update(extra)
    for key in ("MCJS_CHECKPOINT_DIR", "MCJS_OUTPUT_DIR", "MCJS_DATA_DIR"):
        os.makedirs(base[key], exist_ok=True)
    return base


class Environment(unittest.TestCase):
    def test_the_run_mcjs_set_up_is_read_from_the_environment(self):
        with tempfile.TemporaryDirectory() as root:
            e = env(root, MCJS_CHECKPOINT_EVERY_STEPS="16", MCJS_JOB_ID="7", MCJS_METRICS_FILE="/m")
            job = Job.from_env(e)
            self.assertEqual(job.checkpoint_dir, e["MCJS_CHECKPOINT_DIR"])
            self.assertEqual(job.output_dir, e["MCJS_OUTPUT_DIR"])
            self.assertEqual(job.data_dir, e["MCJS_DATA_DIR"])
            self.assertEqual((job.interval_secs, job.every_steps), (60, 16))
            self.assertEqual((job.job_id, job.metrics_file), ("7", "/m"))
            self.assertIsNone(job.restore_dir)
            self.assertIsNone(job.restored())

    def test_a_missing_directory_or_a_bad_number_says_what_to_fix(self):
        with tempfile.TemporaryDirectory() as root:
            e = env(root)
            del e["MCJS_CHECKPOINT_DIR"]
            with self.assertRaisesRegex(ContractError, "MCJS_CHECKPOINT_DIR is not set"):
                Job.from_env(e)
            for name, value in [
                ("MCJS_CHECKPOINT_INTERVAL_SECS", "0"),
                ("MCJS_CHECKPOINT_INTERVAL_SECS", "ten"),
                ("MCJS_CHECKPOINT_EVERY_STEPS", "-3"),
            ]:
                with self.assertRaisesRegex(ContractError, name):
                    Job.from_env(env(root, **{name: value}))


class WhenToCheckpoint(unittest.TestCase):
    def job(self, root, **extra):
        clock = FakeClock()
        return Job.from_env(env(root, **extra), clock=clock), clock

    def test_the_interval_since_the_last_checkpoint_makes_one_due(self):
        with tempfile.TemporaryDirectory() as root:
            job, clock = self.job(root)
            self.assertFalse(job.checkpoint_due(1))
            clock.now += 59
            self.assertFalse(job.checkpoint_due(2))
            clock.now += 1
            self.assertTrue(job.checkpoint_due(3))
            job.checkpoint(0, 3, lambda d: None)
            self.assertFalse(job.checkpoint_due(4), "the clock starts again")

    def test_sigusr1_asks_for_one_and_sigterm_for_one_and_a_stop(self):
        with tempfile.TemporaryDirectory() as root:
            job, _ = self.job(root)
            previous = (signal.getsignal(signal.SIGUSR1), signal.getsignal(signal.SIGTERM))
            try:
                job.install_signal_handlers()
                os.kill(os.getpid(), signal.SIGUSR1)
                self.assertTrue(job.checkpoint_due(1))
                self.assertFalse(job.should_stop)
                job.checkpoint(0, 1, lambda d: None)
                self.assertFalse(job.checkpoint_due(2), "the request is answered")
                os.kill(os.getpid(), signal.SIGTERM)
                self.assertTrue(job.should_stop)
                self.assertTrue(job.checkpoint_due(3))
            finally:
                signal.signal(signal.SIGUSR1, previous[0])
                signal.signal(signal.SIGTERM, previous[1])

    def test_with_fixed_steps_only_the_grid_counts_not_the_clock_or_a_signal(self):
        with tempfile.TemporaryDirectory() as root:
            job, clock = self.job(root, MCJS_CHECKPOINT_EVERY_STEPS="16")
            clock.now += 10_000
            job.request_checkpoint()
            job.request_stop()
            self.assertEqual(
                [s for s in range(0, 50) if job.checkpoint_due(s)], [16, 32, 48]
            )
            self.assertTrue(job.should_stop)


class Checkpoints(unittest.TestCase):
    def test_a_checkpoint_is_its_files_then_the_manifest_naming_them(self):
        with tempfile.TemporaryDirectory() as root:
            job = Job.from_env(env(root))

            def save(d):
                with open(os.path.join(d, "state.bin"), "wb") as f:
                    f.write(b"weights")
                os.makedirs(os.path.join(d, "optim"))
                with open(os.path.join(d, "optim", "adam.bin"), "wb") as f:
                    f.write(b"moments")
                # The manifest is not there while the files are written.
                self.assertFalse(os.path.exists(os.path.join(d, mcjs_job.MANIFEST)))

            path = job.checkpoint(3, 1200, save, extra={"loss": 0.5})
            self.assertEqual(os.path.basename(path), "step-000000001200")
            with open(os.path.join(path, mcjs_job.MANIFEST)) as f:
                manifest = json.load(f)
            self.assertEqual(
                manifest,
                {
                    "format": "mcjs-checkpoint/1",
                    "epoch": 3,
                    "step": 1200,
                    "files": ["optim/adam.bin", "state.bin"],
                    "loss": 0.5,
                },
            )
            self.assertFalse(os.path.exists(os.path.join(path, mcjs_job.MANIFEST + ".tmp")))

    def test_a_killed_runs_incomplete_directory_is_cleared_and_a_complete_one_kept(self):
        with tempfile.TemporaryDirectory() as root:
            job = Job.from_env(env(root))
            half = os.path.join(job.checkpoint_dir, "step-000000000010")
            os.makedirs(half)
            with open(os.path.join(half, "stale.bin"), "wb") as f:
                f.write(b"half written")
            job.checkpoint(0, 10, lambda d: write(d, "new.bin", ""))
            self.assertEqual(sorted(os.listdir(half)), [mcjs_job.MANIFEST, "new.bin"])
            before = mcjs_job.checkpoint_hash(half)
            job.checkpoint(0, 10, lambda d: self.fail("a complete checkpoint is the agent's"))
            self.assertEqual(mcjs_job.checkpoint_hash(half), before)

    def test_bad_labels_names_and_symlinks_are_refused(self):
        with tempfile.TemporaryDirectory() as root:
            job = Job.from_env(env(root))
            for epoch, step in [(-1, 0), (0, -1), (0, 1.5)]:
                with self.assertRaises(ContractError):
                    job.checkpoint(epoch, step, lambda d: None)
            for name in [".hidden", "a/b", "sp ace"]:
                with self.assertRaises(ContractError):
                    job.checkpoint(0, 1, lambda d: None, name=name)
            with self.assertRaisesRegex(ContractError, "regular files only"):
                job.checkpoint(0, 2, lambda d: os.symlink("/etc/passwd", os.path.join(d, "x")))
            self.assertFalse(
                os.path.exists(os.path.join(job.checkpoint_dir, "step-000000000002", mcjs_job.MANIFEST)),
                "no manifest: the agent never takes it",
            )

    def test_the_checkpoint_hash_is_the_contracts_formula(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "b.bin"), "wb") as f:
                f.write(b"bb")
            os.makedirs(os.path.join(d, "a"))
            with open(os.path.join(d, "a", "z.bin"), "wb") as f:
                f.write(b"")
            lines = "".join(
                f"{hashlib.sha256(data).hexdigest()} {len(data)} {path}\n"
                for path, data in [("a/z.bin", b""), ("b.bin", b"bb")]
            )
            expected = hashlib.sha256(("mcjs-checkpoint-hash/1\n" + lines).encode()).hexdigest()
            self.assertEqual(mcjs_job.checkpoint_hash(d), expected)


class Resuming(unittest.TestCase):
    def test_a_resumed_run_reads_the_checkpoint_it_was_given(self):
        with tempfile.TemporaryDirectory() as root:
            first = Job.from_env(env(root))
            path = first.checkpoint(2, 64, lambda d: write(d, "s", "64"))
            second = Job.from_env(env(root, MCJS_RESTORE_DIR=path))
            restored = second.restored()
            self.assertEqual((restored.epoch, restored.step, restored.path), (2, 64, path))
            got = second.restore(lambda d, r: read(d, "s"))
            self.assertEqual(got, "64")
            self.assertIsNone(first.restore(lambda d, r: self.fail("a fresh run restores nothing")))

    def test_a_restore_directory_without_a_manifest_is_bad_input(self):
        with tempfile.TemporaryDirectory() as root:
            job = Job.from_env(env(root, MCJS_RESTORE_DIR=root))
            with self.assertRaisesRegex(ContractError, "cannot resume"):
                job.restored()


    def test_a_manifest_naming_a_missing_or_outside_file_is_bad_input(self):
        with tempfile.TemporaryDirectory() as root:
            first = Job.from_env(env(root))
            path = first.checkpoint(1, 8, lambda d: write(d, "weights", "8"))
            resumed = Job.from_env(env(root, MCJS_RESTORE_DIR=path))
            self.assertEqual(resumed.restored().step, 8)
            os.remove(os.path.join(path, "weights"))
            with self.assertRaisesRegex(ContractError, "names 'weights'"):
                resumed.restored()
            manifest = os.path.join(path, mcjs_job.MANIFEST)
            for files in (["../outside"], "weights", [3]):
                with open(manifest, "w") as f:
                    json.dump({"format": mcjs_job.MANIFEST_FORMAT, "epoch": 1, "step": 8, "files": files}, f)
                with self.assertRaisesRegex(ContractError, "cannot resume"):
                    resumed.restored()


class Reporting(unittest.TestCase):
    def test_metrics_are_json_lines_and_a_failure_stops_nothing(self):
        with tempfile.TemporaryDirectory() as root:
            metrics = os.path.join(root, "metrics.jsonl")
            job = Job.from_env(env(root, MCJS_METRICS_FILE=metrics))
            job.report(step=16, epoch=1, loss=0.25)
            job.report(step=32, epoch=2, loss=float("nan"))  # not JSON: skipped
            job.report(step=48, epoch=3, loss=0.125)
            with open(metrics) as f:
                rows = [json.loads(line) for line in f]
            self.assertEqual([r["step"] for r in rows], [16, 48])
            Job.from_env(env(root, MCJS_METRICS_FILE=os.path.join(root, "no", "dir"))).report(step=1)
            Job.from_env(env(root)).report(step=1)

    def test_an_output_file_appears_only_whole(self):
        with tempfile.TemporaryDirectory() as root:
            job = Job.from_env(env(root))

            def save(tmp):
                self.assertFalse(os.path.exists(os.path.join(job.output_dir, "model.bin")))
                with open(tmp, "wb") as f:
                    f.write(b"model")

            path = job.write_output("model.bin", save)
            self.assertEqual(read(job.output_dir, "model.bin"), "model")
            self.assertEqual(os.listdir(job.output_dir), ["model.bin"])


if __name__ == "__main__":
    unittest.main()
