"""Hold a run-folder lock in another process, for the concurrency tests.

``python tests/helpers/lock_holder.py FOLDER WHAT`` takes :func:`context_cda.io.file_lock` on FOLDER's lock file, prints
``held`` and keeps the lock until its stdin closes. :func:`other_process_holds` wraps that in a context manager.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def other_process_holds(folder: Path | str, what: str = "finetune[t/a/seed-1]") -> Iterator[subprocess.Popen]:
    proc = subprocess.Popen([sys.executable, __file__, str(folder), what], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        yield proc
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def main() -> None:
    from context_cda.io import file_lock
    from context_cda.layout import LOCK_FILE

    with file_lock(Path(sys.argv[1]) / LOCK_FILE, sys.argv[2]):
        print("held", flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
