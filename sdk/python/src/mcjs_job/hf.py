"""The job contract for a Hugging Face ``Trainer``: one callback.

The Trainer already saves and restores a run's whole state (model,
optimizer, scheduler, scaler, every RNG, the position in the data) in its
own ``checkpoint-<step>`` directories; :class:`MCJSCallback` decides *when*
(:meth:`mcjs_job.Job.checkpoint_due` after each step: the interval, SIGUSR1,
SIGTERM, or a verified job's fixed steps), asks the Trainer to save then,
and hands the directory it wrote to MCJS as one checkpoint (moved, not
copied, where both are on one filesystem; all but ``training_args.bin``,
which a resume does not read and which differs from run to run, so that a
re-executed check writes the same bytes). After the checkpoint SIGTERM
asked for, it stops the training loop; the script then exits
``EXIT_PREEMPTED``::

    import sys
    import mcjs_job
    from mcjs_job.hf import MCJSCallback, resume_from

    job = mcjs_job.Job.from_env().install_signal_handlers()
    trainer = Trainer(model, TrainingArguments(output_dir="/tmp/hf", save_strategy="no", ...),
                      train_dataset=..., callbacks=[MCJSCallback(job)])
    trainer.train(resume_from_checkpoint=resume_from(job))   # None on a fresh start
    if job.should_stop:
        sys.exit(mcjs_job.EXIT_PREEMPTED)
    job.write_output("model.safetensors", lambda tmp: ...)

``save_strategy="no"`` leaves the saving to MCJS's schedule; keep the
Trainer's ``output_dir`` off the job's output directory (a scratch directory
is right: the callback moves each checkpoint out of it). Every ``logs`` dict
the Trainer logs is also reported to ``mcjs job watch``.

Needs ``transformers`` (tested with 4.36); imported only by this module.
"""

from __future__ import annotations

import os
import shutil
from typing import Any, Optional

from transformers import TrainerCallback

from . import Job

#: The Trainer's name for its checkpoint directories (``checkpoint-<step>``).
_HF_PREFIX = "checkpoint"
#: What the Trainer writes into a checkpoint that a resume does not read and
#: that differs from run to run: its arguments, pickled with the run's scratch
#: directory and start time. Left out, so that a run restored from checkpoint
#: k writes checkpoint k+1 with the same hash, as a verified job's check needs.
LEFT_OUT = ("training_args.bin",)


def resume_from(job: Job) -> Optional[str]:
    """The directory to pass as ``Trainer.train(resume_from_checkpoint=...)``:
    the checkpoint MCJS restored (verified against its attested hash), or
    ``None`` on a fresh start. Raises :class:`mcjs_job.ContractError` for a
    restore directory without a valid manifest."""
    restored = job.restored()
    return restored.path if restored is not None else None


def move_tree(source: str, target: str, leave_out: tuple = ()) -> None:
    """Moves every entry of ``source`` but those named in ``leave_out`` into
    the existing directory ``target`` (a rename where both are on one
    filesystem, a copy otherwise), then removes ``source``."""
    for name in os.listdir(source):
        if name in leave_out:
            continue
        shutil.move(os.path.join(source, name), os.path.join(target, name))
    shutil.rmtree(source)


class MCJSCallback(TrainerCallback):
    """Checkpoints a Trainer on MCJS's schedule and stops it on SIGTERM once
    that checkpoint is written (see the module's documentation)."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self._due_at: Optional[int] = None

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self.job.checkpoint_due(state.global_step):
            self._due_at = state.global_step
            control.should_save = True
        return control

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self._due_at != state.global_step:
            return control  # a save of the Trainer's own schedule: not MCJS's
        self._due_at = None
        written = os.path.join(args.output_dir, f"{_HF_PREFIX}-{state.global_step}")
        if not os.path.isdir(written):
            raise RuntimeError(
                f"the Trainer saved no {written}: MCJSCallback needs the Trainer's own output_dir "
                "(no hyperparameter search run directories)"
            )
        self.job.checkpoint(int(state.epoch or 0), state.global_step, lambda d: move_tree(written, d, LEFT_OUT))
        if self.job.should_stop:
            control.should_training_stop = True
        return control

    def on_log(self, args: Any, state: Any, control: Any, logs: Optional[dict] = None, **kwargs: Any) -> Any:
        numbers = {k: v for k, v in (logs or {}).items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        if numbers:
            self.job.report(step=state.global_step, **numbers)
        return control
