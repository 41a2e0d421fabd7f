"""Progress of long work, one way for every stage: a bar on a terminal, a log line every N seconds elsewhere.

Every long loop of the pipeline (ingest's lines, augment's items, entropy's items, fine-tuning steps, benchmark
scoring, the extrinsic heads) reports through :class:`Progress`::

    with Progress(total=len(items), desc="augment", unit="item") as p:
        for ...:
            p.update(1)
            p.set_postfix(accepted=a, rejected=r)

* On a terminal (stderr is a TTY) and with ``bar=True``, it is a tqdm bar.
* Otherwise (a log file, a Kubernetes pod, a CI job, or ``bar=False``: ``--no-progress``) it writes one line to the
  ``context_cda.runtime.progress`` logger every ``$CCDA_PROGRESS_INTERVAL`` seconds (default 30; 0 turns the lines off)
  with what the bar shows: done / total, the share, the rate, the ETA and the postfix, e.g.
  ``augment[part-0] · augment: 32/96 items (33%), 0.41 item/s, ETA 2m36s, accepted=20 rejected=12``.
  A line comes even when nothing finished since the last one (it says so), so a log is never silent for longer
  than the interval while a stage works. Work that ends before its first line writes nothing; work that wrote
  lines ends with one that says how long it took.
* Nested work (a benchmark's scoring inside the evaluate stage, a head's fine-tuning inside a benchmark) shares
  its outer work's line: ``evaluate: 3/7 benchmark glue › glue: fine-tune 40/96 step, ...``, one line per
  outermost loop and interval, never one per level.
* :func:`step` names the pipeline step around a block, and :func:`activity` is work with nothing to count (a
  model loading, a validation suite): the local runner opens one per step, so every step writes a line at least
  every interval, whatever it does (``validate-cda: 1m00s so far``), and the step's counted work joins that line
  (``augment-part[part-0]: 12m30s so far › augment: 32/96 item (33%), ...``).

:func:`quiet_library_noise` filters the third-party warnings that mean nothing to a user of the pipeline
(:data:`FILTERED_WARNINGS`, each with the reason; the CLI does it for every command); :func:`filtered_note` is the
one line ``ccda run`` writes at its start to say which.

This module imports nothing from the rest of the package (every stage may use it).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import re
import sys
import threading
import time
import warnings
from collections.abc import Iterable, Iterator
from typing import Any

log = logging.getLogger("context_cda.runtime.progress")

INTERVAL_ENV = "CCDA_PROGRESS_INTERVAL"
DEFAULT_INTERVAL_S = 30.0
SHOW_WARNINGS_ENV = "CCDA_SHOW_WARNINGS"

_STEP: contextvars.ContextVar[str] = contextvars.ContextVar("ccda_progress_step", default="")
_LOCK = threading.Lock()
_ACTIVE: list[Progress] = []  # open progress objects that write lines, oldest first (the ticker reads it)
_BARS: list[Progress] = []  # open progress objects drawn as bars
_TICKER: threading.Thread | None = None
_TICK_S = 1.0


def interval() -> float:
    """Seconds between two log lines of one piece of work (``$CCDA_PROGRESS_INTERVAL``; 0: no lines)."""
    try:
        return max(0.0, float(os.environ.get(INTERVAL_ENV, DEFAULT_INTERVAL_S)))
    except ValueError:
        return DEFAULT_INTERVAL_S


def on_terminal() -> bool:
    """Whether progress bars can be drawn: stderr (where bars and logs go) is a terminal."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stream
        return False


@contextlib.contextmanager
def step(name: str) -> Iterator[None]:
    """Name the pipeline step the work inside the block belongs to (the first word of every progress line)."""
    token = _STEP.set(name)
    try:
        yield
    finally:
        _STEP.reset(token)


def duration(seconds: float) -> str:
    """``45s``, ``2m36s``, ``1h04m``."""
    s = int(round(max(0.0, seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


class Progress:
    """One piece of long work: ``total`` units (None: unknown) called ``unit``, described by ``desc``.

    ``bar``: draw a tqdm bar when on a terminal (else, and when False, log lines). ``every``: seconds between
    log lines (default :func:`interval`). The tqdm-like methods (``update``, ``set_postfix``,
    ``set_postfix_str``, ``close``, the context manager) are what the stages call."""

    def __init__(self, total: int | None, desc: str, unit: str = "item", *, bar: bool = True,
                 every: float | None = None, unit_scale: bool = False, activity: bool = False) -> None:
        self.total, self.desc, self.unit = (None if total is None else int(total)), desc, unit
        self.unit_scale, self.activity = unit_scale, activity
        self.n = 0
        self.postfix = ""
        self.every = interval() if every is None else float(every)
        self.step = _STEP.get()
        self.started = self.last_line = self._last_change = time.monotonic()
        self._n_at_line = 0
        self.lines = 0
        self.closed = False
        self._thread: int | None = None
        self._bar = self._make_bar() if bar and not activity and on_terminal() and total != 0 else None
        self.parent = _innermost() if self._bar is None else None
        # lines only when no bar is on screen (a bar is the display there) and there is work to report
        if self._bar is None and self.every > 0 and total != 0 and not _BARS:
            _register(self)
        elif self._bar is not None:
            _BARS.append(self)

    def _make_bar(self) -> Any:
        from tqdm.auto import tqdm

        return tqdm(total=self.total, desc=self.desc, unit=self.unit, dynamic_ncols=True, mininterval=0.5,
                    smoothing=0.1, leave=False, unit_scale=self.unit_scale)

    # ------------------------------------------------------------------------------------------ tqdm-like

    def update(self, n: int = 1) -> None:
        if n:
            self.n += int(n)
            self._last_change = time.monotonic()
        if self._bar is not None:
            self._bar.update(n)

    def set_postfix(self, ordered_dict: dict[str, Any] | None = None, refresh: bool = True, **values: Any) -> None:
        items = {**(ordered_dict or {}), **values}
        self.postfix = " ".join(f"{k}={_short(v)}" for k, v in items.items())
        if self._bar is not None:
            self._bar.set_postfix(items, refresh=refresh)

    def set_postfix_str(self, text: str = "", refresh: bool = True) -> None:
        self.postfix = str(text)
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=refresh)

    def set_description(self, desc: str) -> None:
        self.desc = desc
        if self._bar is not None:
            self._bar.set_description(desc)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._bar is not None:
            self._bar.close()
            with contextlib.suppress(ValueError):
                _BARS.remove(self)
        _unregister(self)
        if self.lines and self.parent is None and not self.activity:
            log.info("%s%s: %s %s in %s (%s)", self._where(), self.desc, self._num(self.n), self.unit,
                     duration(self.elapsed), self._rate())

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------ the line

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def _rate(self) -> str:
        secs = self.elapsed
        if self.n == 0 or secs <= 0:
            return f"– {self.unit}/s"
        r = self.n / secs
        if self.unit_scale:
            return f"{self._num(r)}{self.unit}/s"
        return f"{r:.2f} {self.unit}/s" if r >= 0.1 else f"{secs / self.n:.1f} s/{self.unit}"

    def _num(self, v: float) -> str:
        """A count as the bar shows it: ``1.23M`` with ``unit_scale``, else the integer."""
        if not self.unit_scale:
            return str(int(v))
        for size, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
            if abs(v) >= size:
                return f"{v / size:.2f}{prefix}"
        return f"{v:.0f}"

    def _where(self) -> str:
        return f"{self.step} · " if self.step and not self.desc.startswith(self.step) else ""

    def text(self) -> str:
        """This work's part of a line: ``desc: n/total unit (p%), rate, ETA, postfix`` (an activity: how long it
        has run)."""
        if self.activity:
            return f"{self.desc}: {duration(self.elapsed)} so far" + (f", {self.postfix}" if self.postfix else "")
        if self.total:
            share = f" ({100 * self.n / self.total:.0f}%)"
            left = self.total - self.n
            eta = (f", ETA {duration(left * self.elapsed / self.n)}" if self.n and left > 0 else "")
            head = f"{self.desc}: {self._num(self.n)}/{self._num(self.total)} {self.unit}{share}, {self._rate()}{eta}"
        else:
            head = f"{self.desc}: {self._num(self.n)} {self.unit}, {self._rate()}"
        return head + (f", {self.postfix}" if self.postfix else "")

    def line(self, chain: list[Progress]) -> str:
        """One log line for this (outermost) work and its innermost open sub-work ``chain``."""
        parts = [self.text(), *(p.text() for p in chain)]
        counted = [p for p in [self, *chain] if not p.activity]
        stalled = time.monotonic() - max((p._last_change for p in counted), default=time.monotonic())
        quiet = f" (nothing finished in the last {duration(stalled)})" if counted and stalled >= self.every else ""
        return self._where() + " › ".join(parts) + quiet


def _short(v: Any) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def activity(desc: str) -> Progress:
    """Work with no units to count (loading a model, a validation suite, a whole pipeline step): its lines say how
    long it has run, and the work inside it that counts units shares them. Use it as a context manager."""
    return Progress(None, desc, "", bar=False, activity=True)


def iterate(iterable: Iterable[Any], desc: str, unit: str = "item", total: int | None = None,
            bar: bool = True) -> Iterator[Any]:
    """``iterable`` with a :class:`Progress` that counts its items."""
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)  # type: ignore[arg-type]
    with Progress(total, desc, unit, bar=bar) as p:
        for x in iterable:
            yield x
            p.update(1)


# ------------------------------------------------------------------------------------------------ the ticker


def _innermost() -> Progress | None:
    """The most recently opened log-line progress of this thread (the parent of new work)."""
    me = threading.get_ident()
    with _LOCK:
        for p in reversed(_ACTIVE):
            if p._thread == me:
                return p
    return None


def _register(p: Progress) -> None:
    global _TICKER
    p._thread = threading.get_ident()
    with _LOCK:
        _ACTIVE.append(p)
        if _TICKER is None or not _TICKER.is_alive():
            _TICKER = threading.Thread(target=_tick_forever, name="ccda-progress", daemon=True)
            _TICKER.start()


def _unregister(p: Progress) -> None:
    with _LOCK:
        if p in _ACTIVE:
            _ACTIVE.remove(p)


def _chain(root: Progress, active: list[Progress]) -> list[Progress]:
    """The open sub-work below ``root``, outermost first, following the newest child at each level."""
    chain, node = [], root
    while True:
        children = [p for p in active if p.parent is node]
        if not children:
            return chain
        node = children[-1]
        chain.append(node)


def tick(now: float | None = None) -> list[str]:
    """Write the lines that are due (one per outermost open work whose interval has passed); returns them."""
    now = time.monotonic() if now is None else now
    with _LOCK:
        active = list(_ACTIVE)
    out = []
    for root in (p for p in active if p.parent is None or p.parent not in active):
        if now - root.last_line < root.every:
            continue
        chain = _chain(root, active)
        text = root.line(chain)
        root.last_line = now
        for p in [root, *chain]:
            p.lines += 1
        out.append(text)
        log.info("%s", text)
    return out


def _tick_forever() -> None:
    while True:
        time.sleep(_TICK_S)
        try:
            tick()
        except Exception:  # noqa: BLE001 - progress must never break the work it reports on
            pass
        with _LOCK:
            if not _ACTIVE:
                globals()["_TICKER"] = None
                return


# ------------------------------------------------------------------------------------------------ warnings

#: third-party messages that say nothing a user of the pipeline can act on, each with why it is dropped: warnings
#: (the ``warnings`` module: module regex, message regex) and log records (logger name, message regex)
FILTERED_WARNINGS: tuple[tuple[str, str, str], ...] = ()
FILTERED_LOGS: tuple[tuple[str, str, str], ...] = (
    ("accelerate.utils.other", r"Removed shared tensor .* while saving",
     "accelerate's note on tied weights when a checkpoint is saved (GPT-2 and Llama tie lm_head to the embeddings; "
     "they are tied again on load)"),
    ("transformers.modeling_utils", r"`loss_type=None` was set in the config but it is unrecognized",
     "transformers' note that a model config names no loss type (the causal-LM loss is the right one)"),
    ("mlflow.transformers", r"model card could not be retrieved from the hub|Unable to find license information",
     "MLflow looking up a hub model card and license for a local fine-tuned folder (there is none to find)"),
    ("mlflow.store.db.utils", r"Creating initial MLflow database tables|Updating database tables",
     "MLflow creating its local sqlite tables"),
)


class _Drop(logging.Filter):
    def __init__(self, pattern: str) -> None:
        super().__init__()
        self.pattern = re.compile(pattern)

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.pattern.search(record.getMessage())


def _reasons(warns: tuple, logs: tuple) -> list[str]:
    return [why for _, _, why in (*warns, *logs)]


def quiet_library_noise(filters: tuple[tuple[str, str, str], ...] | None = None,
                        logs: tuple[tuple[str, str, str], ...] | None = None) -> list[str]:
    """Drop the ``filters`` warnings and ``logs`` records (defaults: :data:`FILTERED_WARNINGS`,
    :data:`FILTERED_LOGS`) unless ``$CCDA_SHOW_WARNINGS`` is set; returns why each is dropped (:func:`filtered_note`
    says it in one line)."""
    warns = FILTERED_WARNINGS if filters is None else filters
    records = FILTERED_LOGS if logs is None else logs
    if os.environ.get(SHOW_WARNINGS_ENV):
        return []
    for module, message, _ in warns:
        warnings.filterwarnings("ignore", message=message, module=module)
    for name, message, _ in records:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _Drop) and f.pattern.pattern == message for f in logger.filters):
            logger.addFilter(_Drop(message))
    return _reasons(warns, records)


def filtered_note() -> str:
    """One line naming the filtered messages (for the start of a run's log); "" when none are."""
    reasons = _reasons(FILTERED_WARNINGS, FILTERED_LOGS)
    if os.environ.get(SHOW_WARNINGS_ENV) or not reasons:
        return ""
    return f"third-party messages filtered ({SHOW_WARNINGS_ENV}=1 shows them): " + "; ".join(reasons)
