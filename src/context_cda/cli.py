"""`ccda`: one command per stage, plus `run`, `config`, `report` and `pipeline`.

Commands live in :mod:`context_cda.commands`, one module per stage, each with a ``register(app)`` function; this
module only collects them. Command modules import heavy libraries (torch, transformers, kfp) inside their function
bodies, so ``ccda --help`` stays fast.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import typer

from .errors import CCDAError

app = typer.Typer(
    name="ccda",
    help="Context-CDA: debias language models with context-augmented counterfactual data.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register_commands() -> None:
    from . import commands

    for mod in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if mod.name.startswith("_"):
            continue
        module = importlib.import_module(f"{commands.__name__}.{mod.name}")
        module.register(app)


_register_commands()


def _setup_logging() -> None:
    """Stage progress messages (``context_cda.*`` loggers) go to stderr; other libraries stay at WARNING."""
    import logging
    import os

    class StderrHandler(logging.StreamHandler):  # the stderr of the moment (tests and notebooks replace it)
        def emit(self, record: logging.LogRecord) -> None:
            self.stream = sys.stderr
            super().emit(record)

    handler = StderrHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    log = logging.getLogger("context_cda")
    if not log.handlers:
        log.addHandler(handler)
    log.setLevel(os.environ.get("CCDA_LOG_LEVEL", "INFO"))
    log.propagate = False
    _for_a_log()


def _for_a_log() -> None:
    """Output that reads well in a log file or a pod's log: stdout written line by line (the step banners and
    summaries arrive in order with the stderr progress lines), library progress bars off off a terminal (ours
    write lines instead: :mod:`context_cda.progress`), and the third-party warnings that mean nothing to a user
    filtered (said once, by name)."""
    import os

    from .progress import on_terminal, quiet_library_noise

    if not sys.stdout.isatty() and hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)
    if not on_terminal():
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # transformers' "Loading weights" bars
    quiet_library_noise()


_ENVIRONMENT_ERRNOS = ("EROFS", "EACCES", "EPERM", "ENOSPC", "EDQUOT", "ENOTDIR", "EISDIR", "EEXIST", "ENAMETOOLONG")


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI; user errors print one message and exit 2 (75: retry later; see
    :mod:`context_cda.errors`), never a traceback."""
    import errno

    _setup_logging()
    try:
        app(args=argv, standalone_mode=False)
    except CCDAError as e:
        typer.echo(f"error: {e}", err=True)
        return e.exit_code
    except OSError as e:  # the machine's, not the code's: a read-only or full disk, a file where a folder goes
        if errno.errorcode.get(e.errno or -1) not in _ENVIRONMENT_ERRNOS:
            raise
        typer.echo(f"error: {e.filename or ''}: cannot write or read here ({e.strerror}). Check that the folder "
                   "exists, is a folder and is writable (--run-dir, --out), and that the disk has space.", err=True)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except typer.Exit as e:
        return e.exit_code
    except Exception as e:  # usage errors (click, or the click bundled in typer) arrive here
        show = getattr(e, "show", None)
        if callable(show) and isinstance(getattr(e, "exit_code", None), int):
            show()
            return e.exit_code
        if type(e).__name__ == "Abort":
            return 1
        raise
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
