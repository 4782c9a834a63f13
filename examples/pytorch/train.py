#!/usr/bin/env python3
"""A PyTorch training job on MCJS, written on the job contract's package
(sdk/python, `pip install ./sdk/python`; docs/job-contract.md).

`examples/pytorch/build-image.sh` builds it into an image with Debian's
PyTorch, no registry needed; run it as an MCJS job, and MCJS mounts the
directories and sets the MCJS_* variables. Locally:

    MCJS_DATA_DIR=./data MCJS_CHECKPOINT_DIR=./ckpt MCJS_OUTPUT_DIR=./out \
    MCJS_CHECKPOINT_INTERVAL_SECS=600 PYTHONPATH=sdk/python/src \
    python3 examples/pytorch/train.py --epochs 10

It reads `train.pt` (a dict with tensors "x" and "y") from MCJS_DATA_DIR, or
makes its own data from `--data-seed` when there is none; checkpoints
every MCJS_CHECKPOINT_INTERVAL_SECS and on SIGUSR1, checkpoints and exits 75
on SIGTERM (with MCJS_CHECKPOINT_EVERY_STEPS, as every verified job has, at
those steps only), resumes from MCJS_RESTORE_DIR when it is set, appends each
epoch's step, epoch and loss to MCJS_METRICS_FILE (and prints every tenth
epoch's), and writes model.pt and
metrics.json to MCJS_OUTPUT_DIR. A run resumed any number of times ends with
the same model.pt bytes as one never interrupted.
"""

import argparse
import json
import os
import sys
import time

import torch

import mcjs_job
from mcjs_job import torch as mcjs_torch


def data(job, args):
    path = os.path.join(job.data_dir or ".", args.data)
    if os.path.exists(path):
        loaded = torch.load(path)
        return loaded["x"], loaded["y"]
    generator = torch.Generator().manual_seed(args.data_seed)
    x = torch.randn(args.rows, 8, generator=generator)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    return x, y


def write_json(path, value):
    with open(path, "w") as f:
        json.dump(value, f)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="train.pt")
    parser.add_argument("--data-seed", type=int, default=7)
    parser.add_argument("--rows", type=int, default=1024)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--step-sleep-ms",
        type=int,
        default=0,
        help="sleep this long after each step (to watch a short run recover)",
    )
    args = parser.parse_args()

    try:
        job = mcjs_job.Job.from_env().install_signal_handlers()
        x, y = data(job, args)
    except (mcjs_job.ContractError, OSError, KeyError) as e:
        print(f"train.py: error: {e}", file=sys.stderr)
        return mcjs_job.EXIT_BAD_INPUT

    mcjs_torch.deterministic(args.seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(x.shape[1], 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=5, gamma=0.5)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    steps_per_epoch = (len(x) + args.batch_size - 1) // args.batch_size

    epoch, step_in_epoch, step = 0, 0, 0
    order = torch.randperm(len(x))
    try:
        resumed = job.restore(
            lambda d, _: mcjs_torch.load(d, model=model, optimizer=optimizer, scheduler=scheduler)
        )
    except (mcjs_job.ContractError, OSError, KeyError) as e:
        print(f"train.py: error: cannot resume: {e}", file=sys.stderr)
        return mcjs_job.EXIT_BAD_INPUT
    if resumed is not None:
        epoch, step = resumed["epoch"], resumed["step"]
        order, step_in_epoch = resumed["position"]["order"], resumed["position"]["step_in_epoch"]
        print(f"train.py: resumed at epoch {epoch} step {step}", file=sys.stderr)

    loss = torch.tensor(0.0)
    while epoch < args.epochs:
        idx = order[step_in_epoch * args.batch_size : (step_in_epoch + 1) * args.batch_size]
        optimizer.zero_grad()
        loss = loss_fn(model(x[idx]).squeeze(1), y[idx].float())
        loss.backward()
        optimizer.step()
        step, step_in_epoch = step + 1, step_in_epoch + 1
        if args.step_sleep_ms:
            time.sleep(args.step_sleep_ms / 1000)
        if step_in_epoch == steps_per_epoch:
            epoch, step_in_epoch = epoch + 1, 0
            scheduler.step()
            order = torch.randperm(len(x))
            job.report(step=step, epoch=epoch, loss=loss.item())
            if epoch % 10 == 0 or epoch == args.epochs:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}", flush=True)
        if job.checkpoint_due(step):
            path = job.checkpoint(
                epoch,
                step,
                lambda d: mcjs_torch.save(
                    d,
                    model=model,
                    optimizer=optimizer,
                    scheduler=scheduler,
                    epoch=epoch,
                    step=step,
                    position={"order": order, "step_in_epoch": step_in_epoch},
                ),
            )
            print(f"train.py: checkpoint {path}", file=sys.stderr)
        if job.should_stop:
            return mcjs_job.EXIT_PREEMPTED

    job.write_output("model.pt", lambda tmp: torch.save(model.state_dict(), tmp))
    summary = {"epochs": epoch, "steps": step, "final_loss": loss.item()}
    job.write_output("metrics.json", lambda tmp: write_json(tmp, summary))
    return mcjs_job.EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
