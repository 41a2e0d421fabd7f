"""``ccda clean RUN_DIR``: remove what a finished run no longer needs, and say how much it frees.

What goes is the *resume state* and the *per-item stores and caches* of finished steps
(:data:`context_cda.layout.RESUME_STATE`, :data:`~context_cda.layout.CACHES`): fine-tuning's full training states
(``checkpoints/``, when a run kept them with ``train.keep_resume_state``; the finished model is in ``final/``), the
augment parts' result shards and generation caches, the sample parts' result shards and drawn samples, each
target's entropy shards (a finished step keeps those so that a rerun with a larger limit or other settings redoes
only what changed). Their tables, manifests, final models, metrics and per-item predictions stay, so the report, the registry and every up-to-date
check are unchanged (the runner's checks leave the resume state out), and a later ``ccda run`` skips what was
done. A step whose folder is locked (a process works in it) or that has not finished (no ``manifest.json``) is
left alone: its resume state is what lets it continue.

Nothing outside the run folder is touched: the MLflow registry and its artifacts (the registered models) and the
model and data caches stay (docs/architecture.md lists where each lives).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .. import layout as L
from ..errors import LockHeld
from ..io import MANIFEST
from ..steps import lock


@dataclass
class Cleaned:
    removed: list[tuple[Path, int]] = field(default_factory=list)  # (folder, bytes)
    kept: list[tuple[Path, str]] = field(default_factory=list)  # (folder, why)

    @property
    def freed(self) -> int:
        return sum(n for _, n in self.removed)


def size_of(path: Path) -> int:
    """Bytes of the files below ``path`` (a file: its size)."""
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def resume_folders(run_dir: Path) -> list[tuple[str, Path, Path]]:
    """(step, step folder, resume-state or cache folder) for every one in the run, in layout order."""
    out = []
    for step in dict.fromkeys([*L.RESUME_STATE, *L.CACHES]):
        names = (*L.RESUME_STATE.get(step, ()), *L.CACHES.get(step, ()))
        for _, folder in L.discover(L.fanin_dir(run_dir, step, {}), step):
            out += [(step, folder, folder / n) for n in names if (folder / n).exists()]
    return out


def clean(run_dir: Path | str, dry_run: bool = False) -> Cleaned:
    """Remove the resume state of every finished step of ``run_dir`` (``dry_run``: only say what would go)."""
    run = Path(run_dir)
    L.RunLayout(run).existing("ccda clean").check(create=False)  # a run of this layout, its record readable
    done = Cleaned()
    for step, folder, target in resume_folders(run):
        if not (folder / MANIFEST).is_file():
            done.kept.append((target, f"{step} has not finished (no {MANIFEST}): a resume needs it"))
            continue
        try:
            with lock(folder, f"clean {folder.name}"):  # the step's own lock: not while a door works in it
                n = size_of(target)
                if not dry_run:
                    shutil.rmtree(target) if target.is_dir() else target.unlink()
                done.removed.append((target, n))
        except LockHeld as e:
            done.kept.append((target, f"in use: {e}"))
    return done


def human(n: int) -> str:
    """``1.6 GB``, ``340 MB``, ``12 kB``."""
    for size, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"
