#!/usr/bin/env python3
"""A Hugging Face Trainer job on MCJS: the Trainer as a researcher writes it,
plus `MCJSCallback` (sdk/python, `mcjs_job.hf`) and two lines around
`trainer.train`. Needs `transformers` (tested with 4.36) and torch.

    MCJS_CHECKPOINT_DIR=./ckpt MCJS_OUTPUT_DIR=./out MCJS_CHECKPOINT_INTERVAL_SECS=600 \
    PYTHONPATH=sdk/python/src python3 examples/huggingface/train.py --epochs 3

The model is a small classifier on data it makes from `--data-seed` (no
download); a real job loads its model and dataset as it always has. It
checkpoints on MCJS's schedule (the interval, SIGUSR1, SIGTERM, or a verified
job's fixed steps), exits 75 after the checkpoint SIGTERM asked for, resumes
from MCJS_RESTORE_DIR, reports the Trainer's logs to `mcjs job watch`, and
writes model.safetensors to MCJS_OUTPUT_DIR. A run resumed any number of
times ends with the same model bytes as one never interrupted.
"""

import argparse
import sys
import tempfile
import time

import torch
from safetensors.torch import save_file
from transformers import Trainer, TrainerCallback, TrainingArguments, set_seed

import mcjs_job
from mcjs_job.hf import MCJSCallback, resume_from


class Classifier(torch.nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(features, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)
        )

    def forward(self, x, labels=None):
        logits = self.net(x).squeeze(1)
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels)
        return out


class Rows(torch.utils.data.Dataset):
    def __init__(self, rows: int, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.x = torch.randn(rows, 8, generator=generator)
        self.y = (self.x[:, 0] + 0.5 * self.x[:, 1] > 0).float()

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i):
        return {"x": self.x[i], "labels": self.y[i]}


class Sleep(TrainerCallback):
    """`--step-sleep-ms`: a short run slow enough to watch it stop and resume."""

    def __init__(self, ms: int) -> None:
        self.ms = ms

    def on_step_end(self, args, state, control, **kwargs):
        time.sleep(self.ms / 1000)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--data-seed", type=int, default=7)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--step-sleep-ms", type=int, default=0)
    args = parser.parse_args()

    try:
        job = mcjs_job.Job.from_env().install_signal_handlers()
        resume = resume_from(job)
    except mcjs_job.ContractError as e:
        print(f"train.py: error: {e}", file=sys.stderr)
        return mcjs_job.EXIT_BAD_INPUT

    set_seed(args.seed)  # before the model is made: its initial weights come from the seed too
    callbacks = [MCJSCallback(job)] + ([Sleep(args.step_sleep_ms)] if args.step_sleep_ms else [])
    with tempfile.TemporaryDirectory(prefix="hf-trainer-") as scratch:
        trainer = Trainer(
            model=Classifier(8),
            args=TrainingArguments(
                output_dir=scratch,
                save_strategy="no",  # MCJS says when
                num_train_epochs=args.epochs,
                per_device_train_batch_size=args.batch_size,
                learning_rate=0.05,
                seed=args.seed,
                logging_steps=1,
                report_to=[],
                use_cpu=True,
                disable_tqdm=True,
            ),
            train_dataset=Rows(args.rows, args.data_seed),
            callbacks=callbacks,
        )
        if resume is not None:
            print(f"train.py: resuming from {resume}", file=sys.stderr)
        trainer.train(resume_from_checkpoint=resume)
    if job.should_stop:
        return mcjs_job.EXIT_PREEMPTED
    state = {k: v.contiguous() for k, v in trainer.model.state_dict().items()}
    job.write_output("model.safetensors", lambda tmp: save_file(state, tmp))
    print(f"train.py: done at step {trainer.state.global_step}", flush=True)
    return mcjs_job.EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
