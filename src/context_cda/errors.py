"""Errors a user can act on. The CLI prints them as one message (never a traceback) and exits non-zero.

Exit codes: 2 for everything the user must fix (a config key, an input file, a model reference, a server that
answers with an error), 75 (``EX_TEMPFAIL`` of sysexits.h: "try again later") for :class:`RetryLater` — items
that failed for a transient reason, or a run folder another process is working in. Rerunning the same command
later is the fix for those; nothing that finished is redone. 143 (128 + SIGTERM): the command was stopped by
SIGTERM (:mod:`context_cda.runtime.signals`): finished work is kept, rerunning resumes; 130: stopped by Ctrl-C.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path


class CCDAError(Exception):
    """Base class: the message says what went wrong, where (file, line, row, key) and how to fix it."""

    exit_code = 2


class ConfigError(CCDAError):
    """A config file or flag has an unknown key or a bad value."""


class InputError(CCDAError):
    """An input file is missing, empty, undecodable or has the wrong shape."""


class ModelError(CCDAError):
    """A model reference cannot be resolved or loaded."""


class ServiceError(CCDAError):
    """A server (generation, tracking) is unreachable or answers with an error we cannot retry."""


class RetryLater(CCDAError):
    """Nothing is wrong with the input or the config: rerun the same command later."""

    exit_code = 75


class ItemErrors(RetryLater):
    """A stage ended with items that failed for a transient reason (connection, HTTP 5xx/429, timeout).

    They are recorded as errors, not as results: the stage's outputs hold every other item, the step is not
    marked up to date, and the next run retries exactly these items. ``count`` is how many, ``step`` where."""

    def __init__(self, message: str, count: int = 0, step: str = "") -> None:
        super().__init__(message)
        self.count = count
        self.step = step


class LockHeld(RetryLater):
    """Another process holds the lock of a run folder's step (its pid, host, start time and command are named)."""


def error_kinds(reasons: Iterable[object]) -> dict[str, int]:
    """How many error items name each failure: ``"generation-error: HTTP 500 (after 6 attempts)"`` -> ``HTTP 500``."""
    counts: dict[str, int] = {}
    for r in reasons:
        if isinstance(r, str) and r:
            text = r.split(": ", 1)[1] if r.startswith(("generation-error: ", "generator: ")) else r
            kind = text.split(" (after", 1)[0].strip()[:60]
            counts[kind] = counts.get(kind, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def check_item_errors(step: str, n: int, items: int, kinds: Mapping[str, int], listing: Path | str,
                      allow: bool) -> None:
    """A stage that ends with ``n`` error items raises :class:`ItemErrors` (exit code 75), or with ``allow``
    (``run.allow_errors``) logs a loud warning; either way the next run retries exactly those items."""
    if not n:
        return
    why = ", ".join(f"{k} x{v}" for k, v in list(kinds.items())[:3]) or "see the listing"
    msg = (f"{step}: {n} of {items} items failed for a transient reason ({why}); they are listed in {listing} and "
           "are not results. Every other item is saved: rerun to retry exactly these (nothing else is redone)")
    if allow:
        logging.getLogger("context_cda").warning("WARNING %s; going on without them (run.allow_errors).", msg)
        return
    raise ItemErrors(msg + ", or pass --allow-errors (run.allow_errors) to go on without them.", n, step)


#: what an allocation failure says (torch's CPU and CUDA allocators; Python's MemoryError has no message)
_NO_MEMORY = ("out of memory", "can't allocate memory", "defaultcpuallocator", "alloc_cpu")


def out_of_memory(err: BaseException) -> bool:
    """Whether ``err`` is an allocation failure (``MemoryError``, ``torch.OutOfMemoryError``, a CPU allocator's
    RuntimeError): not transient, since the same work needs the same memory again."""
    return isinstance(err, MemoryError) or type(err).__name__ == "OutOfMemoryError" or any(
        m in str(err).lower() for m in _NO_MEMORY)


def no_memory_message(err: BaseException) -> str:
    """The one line for an allocation failure no step turned into a :class:`CCDAError`: its cause, that a rerun
    fails the same way, and the settings that lower the memory a step needs."""
    cause = (str(err).strip().splitlines() or [type(err).__name__])[0][:160]
    return (f"out of memory ({cause}). This is not transient: a rerun fails the same way (finished shards and epochs "
            "are kept). Lower the batch size of the step that ran out (augment.batch_size, entropy.batch_size, "
            "train.batch_size, evaluate.batch_size), its lengths (max_tokens, train.max_seq_len) or "
            "entropy.n_samples, or run where there is more memory.")
