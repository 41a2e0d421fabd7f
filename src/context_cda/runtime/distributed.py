"""Several processes, one job: torchrun's environment, the process group and the few collectives the stages use.

``ccda finetune`` runs unchanged as one process or as N under ``torchrun --nproc-per-node N [--nnodes M]`` (a
Kubeflow Trainer ``TrainJob`` on the ``torch-distributed`` runtime starts it that way on each node). torchrun sets
``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK``; :func:`current` reads them and :func:`init` opens the process group
once (gloo on CPU, NCCL for CUDA tensors with gloo beside it for the small Python objects the stages exchange),
with ``train.dist_timeout_s`` as the timeout of every collective, so a rank that waits for a peer that died or hangs
gives up instead of waiting forever (torchrun's elastic agent also stops the whole job when one rank exits).

What the processes share, and who does what:

* every rank runs the fine-tuning step's body (:mod:`context_cda.train.loop`: each its share of every optimizer
  step's micro-batches, gradients averaged) and scores its contiguous share of every per-epoch benchmark
  (:func:`World.part`), gathered in item order on rank 0 (:func:`World.gather`), which aggregates;
* rank 0 alone holds the step's lock and writes the manifest, the marker, the final weights, ``metrics.csv``, the
  per-epoch predictions and the MLflow records; the other ranks wait at a barrier;
* the other steps of a command (the token budget) run on rank 0 only, and the decision "up to date, skipped" is
  rank 0's (:func:`World.agree`), so the ranks never take different paths through a command.

A collective that fails because a peer is gone (gloo: "Connection closed by peer"; a timeout) is turned into one
:class:`ProcessLost` line by :func:`collective_errors`, or into :class:`~context_cda.runtime.signals.Terminated` when a
SIGTERM is what stopped the job; finished epochs are on disk, and the same command resumes from them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ..errors import RetryLater

T = TypeVar("T")

#: the collective timeout when the config does not say (torch's own default for gloo)
DEFAULT_TIMEOUT_S = 1800


class ProcessLost(RetryLater):
    """A process of a distributed job stopped (killed, out of memory, a node lost) or stopped answering: the
    others stop too; rerunning the same command resumes from the last finished epoch."""


class RankZeroFailed(RetryLater):
    """A step rank 0 runs alone (the token budget) failed there: the other ranks stop without a line of their own
    (``quiet``), with rank 0's exit code."""

    quiet = True

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class World:
    """This process's place in the job: ``rank`` of ``size`` processes, ``local_rank`` on its node."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1

    def bounds(self, n: int) -> tuple[int, int]:
        """``[lo, hi)`` of this rank's contiguous share of ``n`` items (shares differ by at most one item; a rank
        may have none when ``n`` is smaller than the world)."""
        return self.rank * n // self.size, (self.rank + 1) * n // self.size

    def part(self, items: Sequence[T]) -> Sequence[T]:
        """This rank's contiguous share of ``items``; the shares of ranks 0..size-1, concatenated, are ``items``."""
        lo, hi = self.bounds(len(items))
        return items[lo:hi]

    def gather(self, obj: T) -> list[T] | None:
        """Every rank's ``obj`` on rank 0, in rank order (None on the other ranks); a collective."""
        if not self.distributed:
            return [obj]
        import torch.distributed as dist

        out: list[Any] | None = [None] * self.size if self.main else None
        dist.gather_object(obj, out, dst=0)
        return out

    def agree(self, obj: T) -> T:
        """Rank 0's ``obj`` on every rank (a collective): e.g. its decision that a step is up to date."""
        if not self.distributed:
            return obj
        import torch.distributed as dist

        box = [obj if self.main else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def barrier(self) -> None:
        if self.distributed:
            import torch.distributed as dist

            dist.barrier()


def current() -> World:
    """The world torchrun (or ``accelerate launch``, or a Kubeflow TrainJob) describes in the environment."""
    def number(name: str, default: int) -> int:
        try:
            return int(os.environ.get(name, default))
        except ValueError:
            return default

    size = max(number("WORLD_SIZE", 1), 1)
    return World(rank=min(max(number("RANK", 0), 0), size - 1), size=size, local_rank=number("LOCAL_RANK", 0))


def backend(device: str = "auto") -> str:
    """The process group's backend: gloo on CPU; on CUDA machines NCCL for CUDA tensors and gloo for the CPU
    objects :meth:`World.gather` and :meth:`World.agree` exchange."""
    import torch

    if device != "cpu" and torch.cuda.is_available():
        return "cpu:gloo,cuda:nccl"
    return "gloo"


def init(timeout_s: float = DEFAULT_TIMEOUT_S, device: str = "auto") -> World:
    """Open the process group of a distributed job once (nothing for a single process); every collective then
    gives up after ``timeout_s`` seconds. Returns :func:`current`."""
    w = current()
    if not w.distributed:
        return w
    import datetime

    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        kind = backend(device)
        if "nccl" in kind:
            torch.cuda.set_device(w.local_rank % max(torch.cuda.device_count(), 1))
        dist.init_process_group(kind, timeout=datetime.timedelta(seconds=float(timeout_s)))
    return w


def _lost(exc: BaseException) -> bool:
    """Whether ``exc`` is a collective that failed because a peer is gone or silent (not a bug of the code)."""
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover - no torch, no collectives
        return False
    if isinstance(exc, getattr(dist, "DistError", ())):  # DistBackendError, DistNetworkError, DistStoreError
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and any(s in text for s in (
        "Connection closed by peer", "Connection reset by peer", "Broken pipe", "remote worker crashing",
        "Timed out", "timed out", "NCCL communicator was aborted", "ProcessGroup", "Socket Timeout"))


@contextlib.contextmanager
def collective_errors(what: str, where: str) -> Iterator[None]:
    """For the block: a collective that failed because another process of the job is gone raises one
    :class:`ProcessLost` line naming ``what`` (the step) and ``where`` (what is kept), or
    :class:`~context_cda.runtime.signals.Terminated` when a SIGTERM (the launcher stopping the job) came first."""
    w = current()
    try:
        yield
    except Exception as e:
        if not w.distributed or not _lost(e):
            raise
        from . import signals

        signum = signals.stopping()
        if signum is not None:
            raise signals.Terminated(signum) from None
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ProcessLost(f"{what}: process {w.rank} of {w.size} lost the others ({first[:200]}): the job stops. "
                          f"Every finished epoch is kept in {where}; run the same command again to resume "
                          "(torchrun's report names the process that stopped first).") from None
