"""The MCJS job contract (docs/job-contract.md) for Python jobs.

Standard library only. A training script follows the contract with three
calls::

    import mcjs_job

    job = mcjs_job.Job.from_env()          # the directories, the interval, the signals
    state = job.restore(load)              # None on a fresh start
    ...
    for step in ...:
        train_one_step()
        if job.checkpoint_due(step):
            job.checkpoint(epoch, step, save)   # atomic, manifest last
        if job.should_stop:
            return mcjs_job.EXIT_PREEMPTED  # after the checkpoint SIGTERM asked for

``save(directory)`` writes the checkpoint's files into ``directory``;
``load(directory, manifest)`` reads them back. Everything else (the fresh
directory, fsync, the manifest written last and renamed into place, the
fixed-step grid of a verified job, SIGUSR1 and SIGTERM) is done here.

``mcjs_job.torch`` saves and restores a PyTorch run's whole state on top of
this (model, optimizer, scheduler, scaler, every RNG, the data position).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

__all__ = [
    "ContractError",
    "EXIT_BAD_INPUT",
    "EXIT_OK",
    "EXIT_PREEMPTED",
    "Job",
    "MANIFEST",
    "MANIFEST_FORMAT",
    "Restored",
    "checkpoint_hash",
]

#: Finished, output complete: MCJS collects the output and completes the job.
EXIT_OK = 0
#: Bad input or configuration (data, arguments, an unusable restore).
EXIT_BAD_INPUT = 2
#: Stopped after checkpointing on SIGTERM: resumed later from that checkpoint.
EXIT_PREEMPTED = 75

#: Written last: a checkpoint directory is complete once it is in place.
MANIFEST = "mcjs-manifest.json"
MANIFEST_FORMAT = "mcjs-checkpoint/1"
#: The manifest's largest size the agent accepts.
MAX_MANIFEST_BYTES = 64 * 1024

_NAME_CHARS = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-"
)


class ContractError(ValueError):
    """The environment or a call does not follow the job contract; the
    message says what to change. A job that meets one at start should exit
    ``EXIT_BAD_INPUT``."""


@dataclass(frozen=True)
class Restored:
    """The checkpoint a resumed run starts from (``MCJS_RESTORE_DIR``)."""

    path: str
    epoch: int
    step: int
    manifest: Mapping[str, Any]


def _env_dir(environ: Mapping[str, str], name: str, required: bool) -> Optional[str]:
    value = environ.get(name, "")
    if value:
        return value
    if required:
        raise ContractError(
            f"{name} is not set: run under MCJS, or set it to a directory to try the job by hand"
        )
    return None


def _positive_int(environ: Mapping[str, str], name: str, default: Optional[int]) -> Optional[int]:
    value = environ.get(name, "")
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number <= 0:
        raise ContractError(f"{name}={value!r} is not a positive whole number")
    return number


def _fsync(path: str, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _regular_files(root: str) -> list:
    """Every file under ``root`` as a '/'-separated relative path, sorted
    bytewise; refuses what the contract forbids (symlinks, other kinds of
    files, a newline in a path)."""
    found = []
    for here, dirs, files in os.walk(root, followlinks=False):
        for name in dirs:
            if os.path.islink(os.path.join(here, name)):
                raise ContractError(f"{os.path.join(here, name)} is a symlink: a checkpoint holds regular files only")
        for name in files:
            path = os.path.join(here, name)
            if os.path.islink(path) or not os.path.isfile(path):
                raise ContractError(f"{path} is not a regular file: a checkpoint holds regular files only")
            relative = os.path.relpath(path, root).replace(os.sep, "/")
            if "\n" in relative:
                raise ContractError(f"{path!r} has a newline in its path")
            found.append(relative)
    return sorted(found, key=lambda p: p.encode("utf-8"))


def checkpoint_hash(directory: str) -> str:
    """The checkpoint hash the chain attests, as lowercase hex: over every
    regular file of ``directory``, the manifest included (docs/job-contract.md,
    "The checkpoint hash")."""
    lines = []
    for relative in _regular_files(directory):
        digest = hashlib.sha256()
        size = 0
        with open(os.path.join(directory, *relative.split("/")), "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
                size += len(block)
        lines.append(f"{digest.hexdigest()} {size} {relative}\n")
    return hashlib.sha256(("mcjs-checkpoint-hash/1\n" + "".join(lines)).encode("utf-8")).hexdigest()


class Job:
    """One run of an MCJS job, as its container sees it.

    Build it with :meth:`from_env`; ``clock`` (seconds, monotonic) is for
    tests."""

    def __init__(
        self,
        *,
        checkpoint_dir: str,
        output_dir: str,
        data_dir: Optional[str] = None,
        restore_dir: Optional[str] = None,
        interval_secs: int = 900,
        every_steps: Optional[int] = None,
        metrics_file: Optional[str] = None,
        job_id: Optional[str] = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.checkpoint_dir = checkpoint_dir
        self.output_dir = output_dir
        self.data_dir = data_dir
        self.restore_dir = restore_dir
        self.interval_secs = interval_secs
        self.every_steps = every_steps
        self.metrics_file = metrics_file
        self.job_id = job_id
        self._clock = clock
        self._last_checkpoint = clock()
        self._checkpoint_requested = False
        self._stop_requested = False

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None, **kwargs: Any) -> "Job":
        """The run MCJS set up: its directories and variables
        (docs/job-contract.md, "Directories and environment"). Raises
        :class:`ContractError` with what to fix."""
        env = os.environ if environ is None else environ
        return cls(
            checkpoint_dir=_env_dir(env, "MCJS_CHECKPOINT_DIR", True),
            output_dir=_env_dir(env, "MCJS_OUTPUT_DIR", True),
            data_dir=_env_dir(env, "MCJS_DATA_DIR", False),
            restore_dir=_env_dir(env, "MCJS_RESTORE_DIR", False),
            interval_secs=_positive_int(env, "MCJS_CHECKPOINT_INTERVAL_SECS", 900),
            every_steps=_positive_int(env, "MCJS_CHECKPOINT_EVERY_STEPS", None),
            metrics_file=_env_dir(env, "MCJS_METRICS_FILE", False),
            job_id=env.get("MCJS_JOB_ID") or None,
            **kwargs,
        )

    # ----- signals -----

    def install_signal_handlers(self) -> "Job":
        """SIGUSR1 asks for a checkpoint at the next step boundary; SIGTERM
        for a checkpoint and then an exit with ``EXIT_PREEMPTED``. Only from
        the main thread (Python's rule for signal handlers)."""
        signal.signal(signal.SIGUSR1, lambda *_: self.request_checkpoint())
        signal.signal(signal.SIGTERM, lambda *_: self.request_stop())
        return self

    def request_checkpoint(self) -> None:
        self._checkpoint_requested = True

    def request_stop(self) -> None:
        self._stop_requested = True

    @property
    def should_stop(self) -> bool:
        """SIGTERM came: checkpoint (``checkpoint_due`` says so, but on a
        fixed-step grid) and exit ``EXIT_PREEMPTED``."""
        return self._stop_requested

    # ----- when -----

    def checkpoint_due(self, step: int) -> bool:
        """Whether to checkpoint now, at the boundary after ``step`` steps.

        With ``MCJS_CHECKPOINT_EVERY_STEPS`` (a verified job): at each
        multiple of it and nowhere else, whatever the clock or a signal says,
        so that a run restored anywhere checkpoints where the first did.
        Otherwise: on SIGUSR1, on SIGTERM, or once the interval has passed
        since the last checkpoint (or the start)."""
        if self.every_steps is not None:
            return step > 0 and step % self.every_steps == 0
        return (
            self._checkpoint_requested
            or self._stop_requested
            or self._clock() - self._last_checkpoint >= self.interval_secs
        )

    # ----- writing -----

    def checkpoint(
        self,
        epoch: int,
        step: int,
        save: Callable[[str], Any],
        *,
        name: Optional[str] = None,
        extra: Optional[Mapping[str, Any]] = None,
    ) -> str:
        """Writes a checkpoint: a fresh directory under the checkpoint
        directory, ``save(directory)`` fills it, every file is fsync'd, and
        the manifest (``epoch``, ``step``, the files, ``extra`` keys) is
        written last and renamed into place. Returns the directory.

        A directory of that name left incomplete by a killed run is cleared
        first; one already complete belongs to the agent and is left as it
        is. Once this returns, the checkpoint is the agent's: do not change
        it (it may already be stored and gone)."""
        if not isinstance(epoch, int) or not isinstance(step, int) or epoch < 0 or step < 0:
            raise ContractError(f"epoch {epoch!r} and step {step!r} must be non-negative whole numbers")
        name = name or f"step-{step:012d}"
        if not name or name.startswith(".") or not set(name) <= _NAME_CHARS:
            raise ContractError(f"checkpoint name {name!r}: use [A-Za-z0-9._-], not starting with '.'")
        directory = os.path.join(self.checkpoint_dir, name)
        if os.path.exists(os.path.join(directory, MANIFEST)):
            self._checkpointed()
            return directory
        if os.path.exists(directory):
            shutil.rmtree(directory)
        os.makedirs(directory)
        save(directory)
        files = [f for f in _regular_files(directory) if f not in (MANIFEST, MANIFEST + ".tmp")]
        for relative in files:
            _fsync(os.path.join(directory, *relative.split("/")))
        manifest = dict(extra or {})
        manifest.update(format=MANIFEST_FORMAT, epoch=epoch, step=step, files=files)
        body = json.dumps(manifest, sort_keys=True).encode("utf-8")
        if len(body) > MAX_MANIFEST_BYTES:
            raise ContractError(
                f"the manifest would be {len(body)} bytes (at most {MAX_MANIFEST_BYTES}): "
                "write fewer files, or pack them into one"
            )
        tmp = os.path.join(directory, MANIFEST + ".tmp")
        with open(tmp, "wb") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, os.path.join(directory, MANIFEST))
        try:
            _fsync(directory, directory=True)
        except FileNotFoundError:
            pass  # the agent has stored and removed it already: it is its now
        self._checkpointed()
        return directory

    def _checkpointed(self) -> None:
        self._checkpoint_requested = False
        self._last_checkpoint = self._clock()

    # ----- resuming -----

    def restored(self) -> Optional[Restored]:
        """The checkpoint to resume from, or ``None`` on a fresh start.
        Raises :class:`ContractError` if ``MCJS_RESTORE_DIR`` is set but holds
        no readable manifest, or a file its manifest names is missing (exit
        ``EXIT_BAD_INPUT``)."""
        if not self.restore_dir:
            return None
        path = os.path.join(self.restore_dir, MANIFEST)
        try:
            with open(path, "rb") as f:
                manifest = json.loads(f.read(MAX_MANIFEST_BYTES + 1))
        except (OSError, ValueError) as e:
            raise ContractError(f"cannot resume: {path}: {e}") from e
        if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
            raise ContractError(f"cannot resume: {path} is not a {MANIFEST_FORMAT} manifest")
        epoch, step = manifest.get("epoch"), manifest.get("step")
        if not isinstance(epoch, int) or not isinstance(step, int):
            raise ContractError(f"cannot resume: {path} has no whole epoch and step")
        files = manifest.get("files", [])
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            raise ContractError(f"cannot resume: {path}: \"files\" is not a list of paths")
        root = os.path.realpath(self.restore_dir)
        for name in files:
            file = os.path.realpath(os.path.join(root, name))
            if os.path.commonpath([root, file]) != root or not os.path.isfile(file):
                raise ContractError(
                    f"cannot resume: {path} names {name!r}, which is not a file of the checkpoint"
                )
        return Restored(path=self.restore_dir, epoch=epoch, step=step, manifest=manifest)

    def restore(self, load: Callable[[str, Restored], Any]) -> Any:
        """``load(directory, restored)`` on a resumed run, returning what it
        returns; ``None`` on a fresh start."""
        restored = self.restored()
        if restored is None:
            return None
        return load(restored.path, restored)

    # ----- reporting and output -----

    def report(self, **metrics: Any) -> None:
        """Appends one line of progress to ``MCJS_METRICS_FILE`` (when set):
        its owner sees it in ``mcjs job watch`` and ``mcjs job metrics``.
        Progress is a report, not the work: a failed write is said on stderr
        and ignored."""
        if not self.metrics_file:
            return
        try:
            line = json.dumps(metrics, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError) as e:
            print(f"mcjs_job: metrics not reported ({e})", file=sys.stderr)
            return
        try:
            with open(self.metrics_file, "a", encoding="utf-8") as f:
                f.write(line + "\n")
        except OSError as e:
            print(f"mcjs_job: cannot append to {self.metrics_file}: {e}", file=sys.stderr)

    def write_output(self, name: str, save: Callable[[str], Any]) -> str:
        """Writes one output file atomically: ``save(path)`` writes a
        temporary file, renamed to ``name`` under the output directory."""
        final = os.path.join(self.output_dir, name)
        os.makedirs(os.path.dirname(final) or self.output_dir, exist_ok=True)
        tmp = final + ".tmp"
        save(tmp)
        _fsync(tmp)
        os.rename(tmp, final)
        return final
