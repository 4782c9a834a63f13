#!/usr/bin/env python3
"""A PyTorch training job that follows the MCJS job contract (docs/job-contract.md).

Build it into an image with PyTorch and run it as an MCJS job; MCJS mounts the
directories and sets the MCJS_* variables. Locally:

    MCJS_DATA_DIR=./data MCJS_CHECKPOINT_DIR=./ckpt MCJS_OUTPUT_DIR=./out \
    MCJS_CHECKPOINT_INTERVAL_SECS=600 python train.py --epochs 10

It reads `train.pt` (a dict with tensors "x" and "y") from MCJS_DATA_DIR,
checkpoints every MCJS_CHECKPOINT_INTERVAL_SECS and on SIGUSR1, checkpoints
and exits 75 on SIGTERM, resumes from MCJS_RESTORE_DIR when it is set, and
writes model.pt and metrics.json to MCJS_OUTPUT_DIR, and appends each
epoch's step, epoch and loss to MCJS_METRICS_FILE when it is set. With
MCJS_CHECKPOINT_EVERY_STEPS set (a spec that fixes its checkpoint steps, as
every verified job does) it checkpoints at every multiple of that step count
and nowhere else: not on the interval, SIGUSR1 or SIGTERM.
"""

import argparse
import json
import os
import random
import signal
import sys
import time

import numpy as np
import torch

EXIT_BAD_INPUT = 2
EXIT_PREEMPTED = 75
MANIFEST = "mcjs-manifest.json"

checkpoint_requested = False
stop_requested = False


def on_sigusr1(signum, frame):
    global checkpoint_requested
    checkpoint_requested = True


def on_sigterm(signum, frame):
    global stop_requested
    stop_requested = True


def fsync_path(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_checkpoint(root, state, epoch, step):
    """A fresh directory, its files fsync'd, the manifest written last."""
    directory = os.path.join(root, f"step-{step:012d}")
    if os.path.exists(os.path.join(directory, MANIFEST)):
        return directory  # complete already: it belongs to the agent now
    os.makedirs(directory, exist_ok=True)
    state_path = os.path.join(directory, "state.pt")
    with open(state_path, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    manifest = {
        "format": "mcjs-checkpoint/1",
        "epoch": epoch,
        "step": step,
        "files": ["state.pt"],
    }
    tmp = os.path.join(directory, MANIFEST + ".tmp")
    with open(tmp, "w") as f:
        json.dump(manifest, f)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, os.path.join(directory, MANIFEST))
    try:
        fsync_path(directory)
    except FileNotFoundError:
        pass  # the agent has already stored and removed it: it is its now
    return directory


def report(metrics):
    """Appends one line of progress to MCJS_METRICS_FILE, when set: the
    node ships it to the job's owner (mcjs job metrics, mcjs job watch).
    Progress is a report, not the work: a failed write is said and ignored."""
    path = os.environ.get("MCJS_METRICS_FILE")
    if not path:
        return
    try:
        with open(path, "a") as f:
            f.write(json.dumps(metrics) + "\n")
    except OSError as e:
        print(f"train.py: cannot append to {path}: {e}", file=sys.stderr)


def rng_state():
    state = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state):
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="train.pt")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    data_dir = os.environ.get("MCJS_DATA_DIR", ".")
    ckpt_dir = os.environ["MCJS_CHECKPOINT_DIR"]
    out_dir = os.environ["MCJS_OUTPUT_DIR"]
    restore_dir = os.environ.get("MCJS_RESTORE_DIR")
    interval = int(os.environ.get("MCJS_CHECKPOINT_INTERVAL_SECS", "900"))
    fixed = os.environ.get("MCJS_CHECKPOINT_EVERY_STEPS")
    try:
        fixed = int(fixed) if fixed else None
        if fixed is not None and fixed <= 0:
            raise ValueError
    except ValueError:
        print(f"train.py: error: MCJS_CHECKPOINT_EVERY_STEPS={fixed!r} is not a positive step count", file=sys.stderr)
        return EXIT_BAD_INPUT

    signal.signal(signal.SIGUSR1, on_sigusr1)
    signal.signal(signal.SIGTERM, on_sigterm)

    # Determinism: same seed, deterministic kernels, no benchmark autotuning.
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"

    try:
        data = torch.load(os.path.join(data_dir, args.data))
        x, y = data["x"].to(device), data["y"].to(device)
    except (OSError, KeyError) as e:
        print(f"train.py: error: cannot read the training data: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT

    model = torch.nn.Sequential(
        torch.nn.Linear(x.shape[1], 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)
    ).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    steps_per_epoch = (len(x) + args.batch_size - 1) // args.batch_size

    epoch, step_in_epoch, step = 0, 0, 0
    order = torch.randperm(len(x), device="cpu")
    if restore_dir:
        try:
            state = torch.load(os.path.join(restore_dir, "state.pt"), weights_only=False)
        except OSError as e:
            print(f"train.py: error: cannot restore: {e}", file=sys.stderr)
            return EXIT_BAD_INPUT
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        set_rng_state(state["rng"])
        epoch, step_in_epoch, step = state["epoch"], state["step_in_epoch"], state["step"]
        order = state["order"]
        print(f"train.py: resumed at epoch {epoch} step {step}", file=sys.stderr)

    def save():
        global checkpoint_requested
        checkpoint_requested = False
        state = {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "rng": rng_state(),
            "epoch": epoch,
            "step_in_epoch": step_in_epoch,
            "step": step,
            "order": order,  # this epoch's sample order
        }
        path = write_checkpoint(ckpt_dir, state, epoch, step)
        print(f"train.py: checkpoint {path}", file=sys.stderr)

    last = time.monotonic()
    while epoch < args.epochs:
        idx = order[step_in_epoch * args.batch_size : (step_in_epoch + 1) * args.batch_size]
        optimizer.zero_grad()
        loss = loss_fn(model(x[idx]).squeeze(1), y[idx].float())
        loss.backward()
        optimizer.step()
        step += 1
        step_in_epoch += 1
        if step_in_epoch == steps_per_epoch:
            epoch, step_in_epoch = epoch + 1, 0
            order = torch.randperm(len(x), device="cpu")
            report({"step": step, "epoch": epoch, "loss": loss.item()})

        if fixed is not None:
            # The spec's steps and no others: a run restored anywhere
            # checkpoints where the first run did.
            due = step % fixed == 0
        else:
            due = checkpoint_requested or stop_requested or time.monotonic() - last >= interval
        if due:
            save()
            last = time.monotonic()
        if stop_requested:
            return EXIT_PREEMPTED

    os.makedirs(out_dir, exist_ok=True)
    tmp = os.path.join(out_dir, "model.pt.tmp")
    torch.save(model.state_dict(), tmp)
    os.rename(tmp, os.path.join(out_dir, "model.pt"))
    with open(os.path.join(out_dir, "metrics.json.tmp"), "w") as f:
        json.dump({"epochs": epoch, "steps": step, "final_loss": loss.item()}, f)
    os.rename(os.path.join(out_dir, "metrics.json.tmp"), os.path.join(out_dir, "metrics.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
