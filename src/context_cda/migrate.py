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

from . import layout as L
from .errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from .config import Config

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
    from .augment.stage import settings_for
    from .io import json_hash

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

    from .io import write_table
    from .items import DONE, STATUS

    for f in files:
        df = pd.read_parquet(f)
        if STATUS in df.columns:
            df[STATUS] = df[STATUS].replace({"accepted": DONE})
        write_table(df, dest / f.name)
        f.unlink()


# ------------------------------------------------------------------------------------------------ older markers


#: each row's config keys as the step keys of markers without a ``key_rule`` (written before the keys said what a
#: step depends on) hashed them: the row's sections less the lists its target and seed iterate
LEGACY_SECTIONS: dict[str, tuple[str, ...]] = {
    "ingest": ("run.seed", "run.attribute", "lexicon", "ingest", "cda.mapping", "cda.ambiguous", "decontaminate",
               "evaluate.stereoset_path", "evaluate.crows_path"),
    "cda": ("run.seed", "run.attribute", "lexicon", "cda", "decontaminate", "evaluate.stereoset_path",
            "evaluate.crows_path"),
    "validate-cda": ("run.seed", "run.attribute", "lexicon", "validate", "cda"),
    "augment-part": ("run.seed", "run.device", "run.attribute", "lexicon", "augment", "entropy.judge",
                     "entropy.judge_model", "pipeline.generation_shards"),
    "augment": ("run.attribute", "lexicon", "augment", "pipeline.generation_shards", "decontaminate",
                "evaluate.stereoset_path", "evaluate.crows_path"),
    "validate-augment": ("run.attribute", "lexicon", "validate", "augment"),
    "neutral": ("run.seed", "run.device", "run.attribute", "lexicon", "augment", "neutral", "entropy.judge",
                "entropy.judge_model"),
    "validate-neutral": ("run.attribute", "lexicon", "validate", "augment", "neutral"),
    "sample-part": ("run.seed", "run.device", "run.attribute", "augment", "entropy.n_samples", "entropy.temperature",
                    "entropy.top_p", "entropy.max_tokens", "entropy.generator_backend", "entropy.generator_model",
                    "entropy.judge", "entropy.judge_model", "entropy.rule", "entropy.embedding_threshold",
                    "entropy.condition_on_x", "entropy.clustering", "entropy.min_samples", "entropy.batch_size",
                    "entropy.shard_size", "entropy.limit", "pipeline.generation_shards"),
    "sample": ("entropy.limit", "pipeline.generation_shards"),
    "entropy": ("run.device", "run.targets.{target}", "entropy.estimator", "entropy.length_normalised",
                "entropy.batch_size", "entropy.shard_size"),
    "validate-entropy": ("validate",),
    "filter": ("filter",),
    "debias": ("run.device", "run.targets.{target}", "lexicon", "cda.mode", "baselines", "evaluate.bias_type"),
    "finetune": ("run.seed", "run.device", "run.targets.{target}", "cda.mode", "lexicon", "train", "evaluate",
                 "baselines.dropout"),
    "evaluate-vanilla": ("run.seed", "run.device", "run.targets.{target}", "evaluate"),
    "evaluate": ("run.seed", "run.device", "evaluate"),
    "evaluate-posthoc": ("run.seed", "run.device", "run.targets.{target}", "evaluate", "baselines"),
    "register": ("run.targets.{target}", "train.arms", "train.seeds", "train.k", "baselines", "tracking",
                 "evaluate.bootstrap", "evaluate.bias_type"),
    "report": ("report", "tracking.enabled", "train.arms", "train.seeds", "baselines", "evaluate.bootstrap"),
}


def legacy_key(config: Config, step: Any) -> str | None:
    """The step key an older marker holds when the step is up to date under ``config`` (None: a row those markers
    did not know)."""
    from . import stages as T
    from .io import json_hash

    sections = LEGACY_SECTIONS.get(step.row.step)
    if sections is None:
        return None
    drop = [{"seed": "train.seeds", "target": "run.targets"}[k] for k in step.row.fanout if k in ("seed", "target")]
    out: dict[str, Any] = {}
    for section in (s.format(**step.keys) for s in sections):
        if section in drop:
            continue
        value = T.config_value(config, section)
        for key in drop:
            parent, _, leaf = key.rpartition(".")
            if section == parent and isinstance(value, dict):
                value = {k: v for k, v in value.items() if k != leaf}
        out[section] = value
    return json_hash({"step": step.row.step, "options": step.options, "sections": out})
