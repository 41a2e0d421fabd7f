"""Where an export goes: a new folder, or an empty one, written whole or not at all."""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError


def fresh_destination(to: Path | str, what: str) -> Path:
    """``to`` when it does not exist or is an empty folder; one InputError otherwise (an export never mixes its
    files with a folder's own, nor replaces them). The caller writes through :func:`context_cda.io.atomic_dir`, so
    a failed export leaves nothing behind."""
    dest = Path(to).expanduser()
    if dest.exists() and not dest.is_dir():
        raise InputError(f"{dest}: exists and is not a folder; name a new or empty folder for the {what} (--to).")
    if dest.is_dir() and any(dest.iterdir()):
        raise InputError(f"{dest}: the folder exists and is not empty; name a new or empty folder for the {what} "
                         "(--to), or remove this one first.")
    return dest


def usual_mode(folder: Path) -> None:
    """Give a folder written through a private temporary one the permissions a new folder gets here (umask)."""
    import os

    mask = os.umask(0)
    os.umask(mask)
    os.chmod(folder, 0o777 & ~mask)
