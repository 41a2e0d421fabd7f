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
    # the other ranks of a distributed job (torchrun) log warnings only: rank 0 speaks for the job
    log.setLevel(os.environ.get("CCDA_LOG_LEVEL", "INFO") if os.environ.get("RANK", "0") == "0" else "WARNING")
    log.propagate = False
    _for_a_log()


def _for_a_log() -> None:
    """Output that reads well in a log file or a pod's log: stdout written line by line (the step banners and
    summaries arrive in order with the stderr progress lines), library progress bars off off a terminal (ours
    write lines instead: :mod:`context_cda.runtime.progress`), and the third-party warnings that mean nothing to a user
    filtered (said once, by name)."""
    import os

    from .runtime.progress import on_terminal, quiet_library_noise

    if not sys.stdout.isatty() and hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)
    if not on_terminal():
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # transformers' "Loading weights" bars
    quiet_library_noise()


_ENVIRONMENT_ERRNOS = ("EROFS", "EACCES", "EPERM", "ENOSPC", "EDQUOT", "ENOTDIR", "EISDIR", "EEXIST", "ENAMETOOLONG",
                       "ELOOP")


def _owner_hint(e: OSError) -> str:
    """:func:`context_cda.io.owner_hint` for a permission error's path (else nothing)."""
    import errno

    from .io import owner_hint

    return owner_hint(e.filename) if e.errno in (errno.EACCES, errno.EPERM) and e.filename else ""


def _tracking_refusal(e: Exception) -> str | None:
    """One line for an MLflow server that refused a request for want of credentials (401) or permission (403),
    naming the user it came from; None for any other error."""
    import os

    text = str(e)
    status = getattr(getattr(e, "response", None), "status_code", None)  # requests' HTTPError (artifact uploads)
    if type(e).__name__ != "MlflowException" and not (status in (401, 403) and "/api/2.0/mlflow" in text):
        return None
    code = str(getattr(e, "error_code", ""))
    if "PERMISSION_DENIED" in code or "error code 403" in text or status == 403:
        user = os.environ.get("MLFLOW_TRACKING_USERNAME") or "(no MLFLOW_TRACKING_USERNAME)"
        return (f"the MLflow server refused this as user {user} (403 permission denied: {text.splitlines()[0]}). "
                "Registering and moving the candidate/champion aliases needs the pipeline's MLflow user (the "
                "owner of the registered models, or MANAGE permission on them): set MLFLOW_TRACKING_USERNAME and "
                "MLFLOW_TRACKING_PASSWORD (Secret ccda-mlflow-auth on the cluster).")
    if "UNAUTHENTICATED" in code or "error code 401" in text or status == 401:
        return ("the MLflow server asks for credentials (401): set MLFLOW_TRACKING_USERNAME and "
                "MLFLOW_TRACKING_PASSWORD (Secret ccda-mlflow-auth on the cluster).")
    return None


def _rank() -> str:
    """``rank N of M: `` before an error line of a process other than rank 0 of a distributed job (torchrun)."""
    import os

    rank, size = os.environ.get("RANK", "0"), os.environ.get("WORLD_SIZE", "1")
    return f"rank {rank} of {size}: " if rank != "0" else ""


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI; user errors print one message and exit 2 (75: retry later; see
    :mod:`context_cda.errors`), never a traceback; a SIGTERM stops the command cleanly with exit code 143 and
    says how to resume (:mod:`context_cda.runtime.signals`)."""
    import errno

    from .runtime.signals import Terminated, resume_hint, sigterm_raises

    _setup_logging()
    try:
        with sigterm_raises():
            app(args=argv, standalone_mode=False)
    except Terminated as e:
        if not _rank():  # a distributed job is stopped as a whole: rank 0's line speaks for every rank
            typer.echo(f"error: {resume_hint(argv)}", err=True)
        return e.exit_code
    except CCDAError as e:
        if not getattr(e, "quiet", False):  # a rank that stops because rank 0 failed: rank 0's line says why
            typer.echo(f"error: {_rank()}{e}", err=True)
        return e.exit_code
    except OSError as e:  # the machine's, not the code's: a read-only or full disk, a file where a folder goes
        refused = _tracking_refusal(e)  # requests' HTTPError is an OSError too (MLflow's artifact uploads)
        if refused:
            typer.echo(f"error: {refused}", err=True)
            return 2
        if errno.errorcode.get(e.errno or -1) not in _ENVIRONMENT_ERRNOS:
            raise
        typer.echo(f"error: {e.filename or ''}: cannot write or read here ({e.strerror}{_owner_hint(e)}). Check "
                   "that the folder exists, is a folder and is writable (--run-dir, --out), and that the disk has "
                   "space.", err=True)
        return 2
    except (MemoryError, RuntimeError) as e:  # an allocation failure is final: one line, not a traceback or a retry
        from .errors import no_memory_message, out_of_memory

        if not out_of_memory(e):
            raise
        typer.echo(f"error: {no_memory_message(e)}", err=True)
        return 2
    except KeyboardInterrupt:
        print("interrupted: finished shards and epochs are kept; run the same command again to resume",
              file=sys.stderr)
        return 130
    except typer.Exit as e:
        return e.exit_code
    except Exception as e:  # usage errors (click, or the click bundled in typer) arrive here
        refused = _tracking_refusal(e)
        if refused:
            typer.echo(f"error: {refused}", err=True)
            return 2
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
