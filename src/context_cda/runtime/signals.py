"""SIGTERM as a clean stop: what Kubernetes, Docker, systemd and batch schedulers send before they kill.

Without a handler a SIGTERM ends the process on the spot (exit 143, no message, the shard in flight lost). The
CLI (:func:`context_cda.cli.main`) holds :func:`sigterm_raises` for the whole command, so a SIGTERM raises
:class:`Terminated` in the main thread at the next Python instruction, wherever the stage is. The stage then
unwinds like after any error: every finished shard and epoch is already on disk (written atomically), the item or
batch in flight is dropped (its temporary file removed), step locks are released by their context managers,
MLflow runs are marked KILLED, and the command exits with :data:`EXIT_CODE` and one line saying how to resume.
The next run of the same command (``ccda run`` included) resumes from what was kept.

:class:`Terminated` derives from ``BaseException``, like ``KeyboardInterrupt``: an ``except Exception`` that turns
a generator's failure into an error item must not swallow it. Code that must not be cut in half (a training
checkpoint being written or pruned) runs inside :func:`deferred`: a SIGTERM there is held until the block ends.
A second SIGTERM while the first unwinds is ignored, so the clean-up itself is never interrupted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

#: exit code after a SIGTERM (128 + 15, what a shell reports for a process ended by SIGTERM; Kubernetes and
#: Argo read it as "terminated", and retry the task)
EXIT_CODE = 128 + signal.SIGTERM

logger = logging.getLogger(__name__)
T = TypeVar("T")


class Terminated(BaseException):
    """The process received SIGTERM; raised in the main thread at a Python instruction boundary."""

    exit_code = EXIT_CODE

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


class _State:
    def __init__(self) -> None:
        self.depth = 0  # nested deferred() blocks
        self.pending: int | None = None  # a signal that arrived inside one
        self.raised = False  # Terminated was raised once: further signals are ignored
        self.async_run: _AsyncRun | None = None  # an event loop running under run_async
        self.signum: int | None = None  # the signal Terminated was raised for
        self.quiet = False  # stopping for another reason (stopping()): a SIGTERM now is ignored without a word


_state = _State()


def _handler(signum: int, _frame: object) -> None:
    if _state.quiet:
        return
    if _state.raised:
        logger.warning("%s again: already stopping (finished work is kept)", signal.Signals(signum).name)
        return
    if _state.depth:
        _state.pending = signum
        return
    if _state.async_run is not None:  # inside run_async: cancelled in the loop, raised after it
        _state.async_run.stop(signum)
        return
    _state.raised, _state.signum = True, signum
    raise Terminated(signum)


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """For the block, SIGTERM raises :class:`Terminated` (in the main thread; elsewhere a no-op, as Python
    delivers signals to the main thread only). The previous handler is restored afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _handler)
    _state.raised, _state.pending, _state.signum, _state.quiet = False, None, None, False
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """A block a SIGTERM must not cut in half: a signal that arrives inside is raised when the block ends."""
    _state.depth += 1
    try:
        yield
    finally:
        _state.depth -= 1
    if _state.depth == 0 and _state.pending is not None and not _state.raised:
        signum, _state.pending = _state.pending, None
        _state.raised, _state.signum = True, signum
        raise Terminated(signum)


def stopping() -> int | None:
    """The command is stopping for another reason (a process of its distributed job is gone): a SIGTERM from now
    on (the launcher stopping this process too) is ignored without a word, so the reason is the one line said.
    Returns the SIGTERM that came first, if one did (held in a :func:`deferred` block, or raised): then that is
    the reason."""
    signum = _state.pending if _state.pending is not None else (_state.signum if _state.raised else None)
    _state.quiet = True
    return signum


def run_async(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` under :func:`sigterm_raises`: a SIGTERM while it runs (the loop being made or closed
    included) does not raise where it lands - in the loop's constructor, or in anyio's cancel scopes inside httpx,
    which then fail with unrelated errors - but cancels ``main`` inside the loop (its requests are cancelled and
    its client closed as after any cancellation); :class:`Terminated` is raised once the loop is closed."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) is not _handler:
        return asyncio.run(main)
    run = _AsyncRun()
    _state.async_run = run
    try:
        result = asyncio.run(run.guard(main))
    except BaseException:  # the cancellation, or what a cancelled request turned into: the stop is what counts
        if run.signum is None:
            raise
    finally:
        _state.async_run = None
    if run.signum is not None:
        _state.raised = True
        raise Terminated(run.signum)
    return result


class _AsyncRun:
    """An event loop run under the handler: a SIGTERM is noted and cancels its task inside the loop."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.task: asyncio.Task | None = None

    async def guard(self, main: Coroutine[Any, Any, T]) -> T:
        self.loop, self.task = asyncio.get_running_loop(), asyncio.current_task()
        if self.signum is not None:  # it came while the loop was being made
            main.close()
            raise asyncio.CancelledError
        return await main

    def stop(self, signum: int) -> None:
        """From the signal handler (the main thread, between two instructions: as if from another thread)."""
        if self.signum is not None:
            logger.warning("%s again: already stopping (finished work is kept)", signal.Signals(signum).name)
            return
        self.signum = signum
        if self.loop is not None and self.task is not None:
            with contextlib.suppress(RuntimeError):  # the loop is already closed: run_async raises after it
                self.loop.call_soon_threadsafe(self.task.cancel)


def resume_hint(argv: list[str] | None) -> str:
    """The one line the CLI prints after a SIGTERM."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    cmd = " ".join(["ccda", *args])
    cmd = cmd if len(cmd) <= 300 else cmd[:297] + "..."
    return (f"stopped by SIGTERM: every finished shard and epoch is kept and the step's lock is released; run the "
            f"same command again to resume ({cmd}).")
