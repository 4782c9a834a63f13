"""The job contract for a Lightning ``Trainer``: one callback.

Lightning's ``trainer.save_checkpoint`` already writes a run's whole state
(model, optimizers, schedulers, precision scaler, the loops' progress);
:class:`MCJSCheckpoint` decides *when* (:meth:`mcjs_job.Job.checkpoint_due`
after each training batch: the interval, SIGUSR1, SIGTERM, or a verified
job's fixed steps), writes one MCJS checkpoint holding that file, and after
the checkpoint SIGTERM asked for sets ``trainer.should_stop``; the script
then exits ``EXIT_PREEMPTED``::

    import sys
    import lightning.pytorch as pl
    import mcjs_job
    from mcjs_job.lightning import MCJSCheckpoint, ckpt_path

    job = mcjs_job.Job.from_env().install_signal_handlers()
    trainer = pl.Trainer(max_epochs=..., callbacks=[MCJSCheckpoint(job)], enable_checkpointing=False)
    trainer.fit(model, datamodule, ckpt_path=ckpt_path(job))   # None on a fresh start
    if job.should_stop:
        sys.exit(mcjs_job.EXIT_PREEMPTED)

Lightning resumes a checkpoint taken part-way through an epoch by its own
rules: the counters go on from the checkpoint, but a data loader that keeps
no state starts its epoch again, so a resumed run is bit-identical to an
uninterrupted one only where checkpoints fall on epoch boundaries (a
verified job's fixed steps a multiple of the steps in an epoch) or the
loader is stateful. Works with ``lightning`` (``lightning.pytorch``) or
``pytorch_lightning`` 2.x.

Not run on the machines that test MCJS today: Debian 12's PyTorch 1.13
cannot import Lightning under Python 3.11 (``torch.distributed._shard``
fails at import); ``sdk/python/tests/test_lightning.py`` runs wherever it
imports.
"""

from __future__ import annotations

import os
from typing import Any, Optional

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # the older package name
    from pytorch_lightning.callbacks import Callback

from . import Job

#: The file each MCJS checkpoint holds: Lightning's own checkpoint.
CKPT_FILE = "lightning.ckpt"


def ckpt_path(job: Job) -> Optional[str]:
    """What to pass as ``trainer.fit(..., ckpt_path=...)``: Lightning's file
    in the checkpoint MCJS restored (verified against its attested hash), or
    ``None`` on a fresh start. Raises :class:`mcjs_job.ContractError` for a
    restore directory without a valid manifest or without that file."""
    restored = job.restored()
    if restored is None:
        return None
    path = os.path.join(restored.path, CKPT_FILE)
    if CKPT_FILE not in restored.manifest.get("files", []):
        from . import ContractError

        raise ContractError(f"cannot resume: the restored checkpoint holds no {CKPT_FILE}")
    return path


class MCJSCheckpoint(Callback):
    """Checkpoints a Lightning run on MCJS's schedule and stops it on SIGTERM
    once that checkpoint is written (see the module's documentation)."""

    def __init__(self, job: Job) -> None:
        super().__init__()
        self.job = job

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        step = trainer.global_step
        if not self.job.checkpoint_due(step):
            return
        self.job.checkpoint(
            trainer.current_epoch,
            step,
            lambda d: trainer.save_checkpoint(os.path.join(d, CKPT_FILE)),
        )
        if self.job.should_stop:
            trainer.should_stop = True
