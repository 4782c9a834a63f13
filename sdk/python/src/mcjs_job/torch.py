"""A PyTorch run's whole state in one checkpoint file, so that a resumed run
is bit-identical to one never interrupted (on the same hardware and
software): the model, the optimizer, the LR scheduler, the gradient scaler,
every RNG (Python, NumPy, torch CPU and CUDA) and the data position (the
epoch's sample order and how far into it the run is, or whatever the
caller's loader needs).

Use it with :class:`mcjs_job.Job`::

    from mcjs_job import torch as mcjs_torch

    mcjs_torch.deterministic(seed)
    resumed = job.restore(lambda d, r: mcjs_torch.load(d, model=model, optimizer=opt))
    ...
    job.checkpoint(epoch, step, lambda d: mcjs_torch.save(
        d, model=model, optimizer=opt, epoch=epoch, step=step, position=position))

Needs ``torch`` (and ``numpy`` where it is installed: its RNG is saved
too); nothing else.
"""

from __future__ import annotations

import os
import random
from typing import Any, Mapping, Optional

import torch

try:  # NumPy's RNG is part of the state where NumPy is there.
    import numpy
except ImportError:  # pragma: no cover - numpy ships with torch almost always
    numpy = None

#: The file `save` writes into the checkpoint directory.
STATE_FILE = "state.pt"


def deterministic(seed: int) -> None:
    """Seeds every RNG and asks torch for deterministic kernels (no cuDNN
    autotuning), as a checked job must be: bitwise determinism on one
    hardware class is what a check compares."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    random.seed(seed)
    if numpy is not None:
        numpy.random.seed(seed)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False


def rng_state() -> dict:
    """Every RNG's state: Python's, NumPy's, torch's CPU one and each CUDA
    device's."""
    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if numpy is not None:
        state["numpy"] = numpy.random.get_state()
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Mapping[str, Any]) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if numpy is not None and "numpy" in state:
        numpy.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save(
    directory: str,
    *,
    model: torch.nn.Module,
    epoch: int,
    step: int,
    optimizer: Optional[torch.optim.Optimizer] = None,
    scheduler: Any = None,
    scaler: Any = None,
    position: Any = None,
    extra: Optional[Mapping[str, Any]] = None,
) -> str:
    """Writes the run's state into ``directory`` (the one
    :meth:`mcjs_job.Job.checkpoint` hands its ``save``) as one file; returns
    its path. ``position`` is whatever says where the run is in its data
    (picklable); ``extra`` anything else to keep."""
    state = {
        "epoch": epoch,
        "step": step,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "scaler": scaler.state_dict() if scaler is not None else None,
        "rng": rng_state(),
        "position": position,
        "extra": dict(extra or {}),
    }
    path = os.path.join(directory, STATE_FILE)
    with open(path, "wb") as f:
        torch.save(state, f)
    return path


def load(
    directory: str,
    *,
    model: torch.nn.Module,
    optimizer: Optional[torch.optim.Optimizer] = None,
    scheduler: Any = None,
    scaler: Any = None,
    map_location: Any = None,
) -> dict:
    """Restores what :func:`save` wrote into the objects given, and every
    RNG; returns ``{"epoch", "step", "position", "extra"}``. The checkpoint
    is one the agent verified against its attested hash, written by this
    job's own image: it is unpickled as such."""
    path = os.path.join(directory, STATE_FILE)
    try:
        state = torch.load(path, map_location=map_location, weights_only=False)
    except TypeError:  # torch before 1.13 has no weights_only
        state = torch.load(path, map_location=map_location)
    model.load_state_dict(state["model"])
    for target, key in ((optimizer, "optimizer"), (scheduler, "scheduler"), (scaler, "scaler")):
        if target is not None and state.get(key) is not None:
            target.load_state_dict(state[key])
    set_rng_state(state["rng"])
    return {
        "epoch": state["epoch"],
        "step": state["step"],
        "position": state.get("position"),
        "extra": state.get("extra", {}),
    }
