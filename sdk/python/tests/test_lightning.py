"""mcjs_job.lightning.MCJSCheckpoint with a real Lightning Trainer: on a
fixed-step grid at epoch boundaries it checkpoints there and nowhere else,
and a run resumed from one ends with the uninterrupted run's weights; a stop
request ends the fit after that checkpoint.

Skipped where Lightning does not import (Debian 12's torch 1.13 under Python
3.11 cannot import it), unless MCJS_REQUIRE_LIGHTNING=1.
"""

import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))

import mcjs_job  # noqa: E402

try:
    import torch
    from mcjs_job.lightning import CKPT_FILE, MCJSCheckpoint, ckpt_path

    try:
        import lightning.pytorch as pl
    except ImportError:
        import pytorch_lightning as pl
    WHY_NOT = None
except Exception as e:  # noqa: BLE001 - an import that fails inside torch is no ImportError
    WHY_NOT = f"Lightning does not import here: {type(e).__name__}: {e}"

STEPS_PER_EPOCH = 8  # 64 rows, batches of 8


def needs_lightning(test):
    if WHY_NOT is not None and os.environ.get("MCJS_REQUIRE_LIGHTNING") != "1":
        return unittest.skip(WHY_NOT)(test)
    return test


def fit(root, name, epochs, restore=None, every_steps=None, stop_at=None):
    """One run in its own directories; returns (job, model)."""
    checkpoints, output = os.path.join(root, name, "ckpt"), os.path.join(root, name, "out")
    os.makedirs(checkpoints)
    os.makedirs(output)
    job = mcjs_job.Job(
        checkpoint_dir=checkpoints, output_dir=output, restore_dir=restore, interval_secs=3600, every_steps=every_steps
    )

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            if stop_at is not None and self.global_step == stop_at:
                job.request_stop()  # what SIGTERM's handler does
            x, y = batch
            return torch.nn.functional.mse_loss(self.net(x).squeeze(1), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    pl.seed_everything(3)
    model = Module()
    x = torch.randn(64, 4, generator=torch.Generator().manual_seed(1))
    data = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x, x.sum(1)), batch_size=8, shuffle=True,
        generator=torch.Generator().manual_seed(2),
    )
    trainer = pl.Trainer(
        max_epochs=epochs, accelerator="cpu", callbacks=[MCJSCheckpoint(job)], enable_checkpointing=False,
        logger=False, enable_progress_bar=False, enable_model_summary=False, deterministic=True,
        default_root_dir=os.path.join(root, name),
    )
    trainer.fit(model, data, ckpt_path=ckpt_path(job))
    return job, model


def manifests(job):
    found = []
    for name in sorted(os.listdir(job.checkpoint_dir)):
        with open(os.path.join(job.checkpoint_dir, name, mcjs_job.MANIFEST)) as f:
            found.append(json.load(f))
    return found


@needs_lightning
class LightningCallback(unittest.TestCase):
    def test_on_an_epoch_grid_a_resumed_run_ends_with_the_uninterrupted_weights(self):
        with tempfile.TemporaryDirectory() as root:
            _, whole = fit(root, "whole", 3)
            job, _ = fit(root, "grid", 3, every_steps=STEPS_PER_EPOCH)
            found = manifests(job)
            self.assertEqual([m["step"] for m in found], [8, 16, 24], "at the fixed steps only")
            self.assertTrue(all(m["files"] == [CKPT_FILE] for m in found))
            restore = os.path.join(job.checkpoint_dir, "step-000000000016")
            _, resumed = fit(root, "resumed", 3, restore=restore, every_steps=STEPS_PER_EPOCH)
            for a, b in zip(whole.state_dict().values(), resumed.state_dict().values()):
                self.assertTrue(torch.equal(a, b))

    def test_a_stop_ends_the_fit_after_its_checkpoint(self):
        with tempfile.TemporaryDirectory() as root:
            job, _ = fit(root, "stopped", 3, stop_at=10)
            self.assertTrue(job.should_stop)
            self.assertEqual([m["step"] for m in manifests(job)], [11], "one checkpoint, then the stop")

    def test_a_restore_without_lightnings_file_is_bad_input(self):
        with tempfile.TemporaryDirectory() as root:
            job = mcjs_job.Job(checkpoint_dir=root, output_dir=root, restore_dir=root)
            job.checkpoint(0, 1, lambda d: open(os.path.join(d, "other.bin"), "wb").close())
            job.restore_dir = os.path.join(root, "step-000000000001")
            with self.assertRaises(mcjs_job.ContractError):
                ckpt_path(job)


if __name__ == "__main__":
    unittest.main()
