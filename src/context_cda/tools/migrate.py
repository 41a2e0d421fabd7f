"""``ccda migrate``: bring a run folder of an older layout up to this one, in place, keeping every output.

Layout 2 -> 3 (the samples are drawn once for every target): layout 2 drew and clustered the M samples inside
each target's entropy parts (``entropy-parts/<target>/part-<i>/``); layout 3 has one sample step for all targets
(``sample-parts/``, ``sample/``) and entropy steps that only score. The migration

* removes ``entropy-parts/`` (per-target copies of the samples and scores; the sample step draws them once);
* moves each augment part's checkpoint shards into the item engine's folder for the current augment settings
  (``augment-parts/part-<i>/shards/<fingerprint>/``), so an unfinished augment part resumes instead of starting over;
* records layout 3. Everything else stays: the next ``ccda run`` skips the steps that are up to date, runs the
  sample step and each target's entropy, and the steps after them rerun only where their inputs changed.

Run it with the config the run used (``--profile``/``--set``): the augment fingerprint depends on it.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import layout as L
from ..errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from ..config import Config

log = logging.getLogger(__name__)


def migrate_run(config: Config, dry_run: bool = False) -> dict[str, Any]:
    """Migrate ``config``'s run folder to :data:`~context_cda.layout.LAYOUT_VERSION`; returns what was done
    (``dry_run``: what would be done, nothing changed)."""
    layout = L.RunLayout.of(config).existing("ccda migrate")
    found = layout.version()
    if found == L.LAYOUT_VERSION:
        return {"run_dir": str(layout.root), "from": found, "to": L.LAYOUT_VERSION, "actions": []}
    if found != 2:
        raise ConfigError(f"{layout.root}: run layout {found} cannot be migrated. {L.upgrade_hint(layout.root, found)}")
    actions = _plan_2_to_3(config, layout.root)
    if not dry_run:
        for what, apply in actions:
            log.info("migrate %s: %s", layout.root, what)
            apply()
        L.write_marker(layout.root)
    return {"run_dir": str(layout.root), "from": found, "to": L.LAYOUT_VERSION, "dry_run": dry_run,
            "actions": [what for what, _ in actions]}


def _plan_2_to_3(config: Config, root: Path) -> list[tuple[str, Any]]:
    from ..augment.stage import settings_for
    from ..io import json_hash

    actions: list[tuple[str, Any]] = []
    old = root / "entropy-parts"
    if old.exists():
        actions.append((f"remove {old} (per-target samples and scores: the sample step draws them once now)",
                        lambda: shutil.rmtree(old)))
    fp = json_hash(settings_for(config))
    for part in sorted((root / "augment-parts").glob("part-*")):
        flat = sorted((part / "shards").glob("shard-*.parquet"))
        if flat:
            dest = part / "shards" / fp
            actions.append((f"move {len(flat)} checkpoint shard(s) of {part.name} into {dest}",
                            lambda flat=flat, dest=dest: _move_shards(flat, dest)))
    return actions


def _move_shards(files: list[Path], dest: Path) -> None:
    """Layout 2's augment shards into the item engine's folder; their ``accepted`` rows are the engine's ``done``."""
    import pandas as pd

    from ..io import write_table
    from ..items import DONE, STATUS

    for f in files:
        df = pd.read_parquet(f)
        if STATUS in df.columns:
            df[STATUS] = df[STATUS].replace({"accepted": DONE})
        write_table(df, dest / f.name)
        f.unlink()
