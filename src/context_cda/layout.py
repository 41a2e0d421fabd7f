"""The run layout: the one place where a run folder's paths are spelled.

A run folder holds one folder per *step* (a stage applied to one target, arm, seed, ...), each with the step's
tables, a ``manifest.json`` and nothing else. Stages, stage commands, the local runner, DVC (``dvc.yaml`` is
generated from :mod:`context_cda.stages`, which reads paths from here), the Kubeflow components and the report ask
this module for paths; none of them joins a file name of its own::

    <run>/layout.json                               {"layout_version": 3}
    <run>/ingest/sentences.parquet
    <run>/cda/counterfactuals.parquet
    <run>/validate/<boundary>[/<target>]/           valid.parquet, quarantine.parquet, results.json
    <run>/augment-parts/part-<i>/                   one generation part each (pipeline.generation_shards)
    <run>/augment/augmented.parquet                 the parts merged (+ rejected.parquet, errors.parquet)
    <run>/sample-parts/part-<i>/                    one generation part each: the M samples and their clusters
    <run>/sample/samples.parquet                    the parts merged, once for every target (+ rejected, errors)
    <run>/entropy/<target>/scores.parquet           the samples scored by the target (+ audit.parquet, rejected)
    <run>/filter/<target>/k<k>/corpus.parquet       one folder per k (+ se_hist.png)
    <run>/budget/<target>/<arm>/budget.json         the arm's token budget (the smallest corpus of its budget group)
    <run>/finetune/<target>/<arm>/seed-<seed>/      final/, metrics.csv, train_rows.parquet, checkpoints/ (unfinished),
                                                    predictions/epoch-<N>/<benchmark>/predictions.parquet
                                                    (per-epoch intrinsic scores: epoch 0 and the last epoch)
    <run>/evaluate/<target>/vanilla/                aggregate.json, <benchmark>/{predictions.parquet,aggregate.json}
    <run>/evaluate/<target>/<arm>/seed-<seed>/      (the same, for a fine-tuned model)
    <run>/debias/<target>/<arm>/                    a projection arm's matrix (projection.safetensors or
                                                    bias_direction.safetensors), debias_rows.parquet, lines.txt
    <run>/evaluate/<target>/<arm>/posthoc/          (the same as evaluate, for an arm applied to the vanilla
                                                    model: a projection, self-debias, a published checkpoint)
    <run>/register/<target>/<arm>/                  promotion.json, evidence.parquet, card/ (the version's model
                                                    card: README.md, .eval_results/*.yaml, card.json: its facts)
    <run>/report/                                   report.md, report.html, table1.csv, ...

Names that become path parts (targets, arms) must match :data:`NAME_PATTERN`; :func:`safe_name` refuses
anything else (separators, ``..``, empty names), so no name can write outside the run folder.

A run folder records its layout version in ``layout.json``. A folder written by an older version is refused with
a message naming its version and what to do, never silently mixed with the new layout: layout 1 (no
``layout.json``, no ``seed-<n>`` level, validated tables not used for training) is rerun in a new folder; layout 2
(samples drawn per target in ``entropy-parts/<target>/``) is migrated in place by ``ccda migrate``
(:mod:`context_cda.tools.migrate`), which keeps every output and lets the next run draw the samples once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError, InputError

LAYOUT_VERSION = 3
LAYOUT_FILE = "layout.json"

# ---- files inside step folders
SENTENCES_FILE = "sentences.parquet"
COUNTERFACTUALS_FILE = "counterfactuals.parquet"
VALID_FILE = "valid.parquet"
QUARANTINE_FILE = "quarantine.parquet"
RESULTS_FILE = "results.json"
AUGMENTED_FILE = "augmented.parquet"
SCORES_FILE = "scores.parquet"
AUDIT_FILE = "audit.parquet"
SAMPLES_FILE = "samples.parquet"
FILTERED_FILE = "corpus.parquet"
SE_HIST_FILE = "se_hist.png"
METRICS_FILE = "metrics.csv"
FINAL_DIR = "final"
ADAPTER_DIR = "adapter"
CHECKPOINTS_DIR = "checkpoints"
TRAIN_ROWS_FILE = "train_rows.parquet"
BUDGET_FILE = "budget.json"  # an arm's resolved token budget (its budget group's), read by its fine-tunings
CORPUS_STATS_FILE = "corpus_stats.json"
AGGREGATE_FILE = "aggregate.json"
PREDICTIONS_FILE = "predictions.parquet"
#: a benchmark an evaluation did not run (an arm it does not apply to, evaluate.arm_benchmarks): its folder says why
NOT_APPLICABLE_FILE = "not_applicable.json"
PROMOTION_FILE = "promotion.json"
EVIDENCE_FILE = "evidence.parquet"
#: a registered version's Hugging Face model card: the folder, its README.md, the Hub's evaluation-results folder
#: and the facts it is written from (context_cda.publish)
CARD_DIR = "card"
CARD_FILE = "README.md"
EVAL_RESULTS_DIR = ".eval_results"
CARD_FACTS_FILE = "card.json"
EPOCH_PREDICTIONS_DIR = "predictions"
#: beside an epoch's predictions of a benchmark: its aggregate and fingerprint, which the evaluate step reuses
EPOCH_RESULT_FILE = "result.json"
REPORT_FILE = "report.md"
ERRORS_FILE = "errors.parquet"  # items that failed for a transient reason (retried by the next run)
LOCK_FILE = ".ccda-lock"  # held while a process works in a step folder (context_cda.io.file_lock)
PROJECTION_FILE = "projection.safetensors"  # the inlp arm's projection matrix (debias step)
BIAS_DIRECTION_FILE = "bias_direction.safetensors"  # the sentence-debias arm's bias subspace (debias step)
DEBIAS_ROWS_FILE = "debias_rows.parquet"  # the sentences / pairs a projection was learnt from, with their class
DEBIAS_LINES_FILE = "lines.txt"  # the corpus lines handed to the learner, one per line (bias-bench's input file)
#: step -> the folders inside its step folder that only a resume of that unfinished step needs: fine-tuning's full
#: training states, which a finished fine-tuning deletes (final/ holds the model; train.keep_resume_state keeps them)
RESUME_STATE: dict[str, tuple[str, ...]] = {"finetune": (CHECKPOINTS_DIR,)}
#: step -> its per-item stores and caches (context_cda.items checkpoints): the augment parts' result shards and
#: generation cache, the sample parts' result shards and drawn samples, each target's entropy shards. A finished
#: step keeps them (small), so a rerun with a larger limit or other settings redoes only what changed; `ccda clean`
#: removes them (and any resume state left). The merges read the parts' tables, never these.
CACHES: dict[str, tuple[str, ...]] = {"augment-part": ("shards", "cache"), "sample-part": ("shards", "draws"),
                                      "entropy": ("shards",)}
#: what the runner's up-to-date checks leave out of a folder input (removing it changes no step's inputs)
RESUME_DIRS: tuple[str, ...] = tuple(dict.fromkeys(d for t in (RESUME_STATE, CACHES) for ds in t.values() for d in ds))

#: step folder templates, relative to the run folder (keys in braces are filled per step)
FOLDERS: dict[str, str] = {
    "ingest": "ingest",
    "cda": "cda",
    "validate-cda": "validate/cda",
    "augment-part": "augment-parts/part-{shard}",
    "augment": "augment",
    "validate-augment": "validate/augment",
    "neutral": "neutral",
    "validate-neutral": "validate/neutral",
    "sample-part": "sample-parts/part-{shard}",
    "sample": "sample",
    "entropy": "entropy/{target}",
    "validate-entropy": "validate/entropy/{target}",
    "filter": "filter/{target}",
    "debias": "debias/{target}/{arm}",
    "budget": "budget/{target}/{arm}",
    "finetune": "finetune/{target}/{arm}/seed-{seed}",
    "evaluate-vanilla": "evaluate/{target}/vanilla",
    "evaluate": "evaluate/{target}/{arm}/seed-{seed}",
    "evaluate-posthoc": "evaluate/{target}/{arm}/posthoc",
    "register": "register/{target}",
    "report": "report",
}

#: validation boundary -> its step
BOUNDARY_STEPS = {"cda": "validate-cda", "augment": "validate-augment", "neutral": "validate-neutral",
                  "entropy": "validate-entropy"}

_KEYS = ("target", "arm", "seed", "shard")
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}$")
VANILLA = "vanilla"


def safe_name(value: str, what: str) -> str:
    """``value`` unchanged when it can be one path part, else a ConfigError naming ``what`` and the rule."""
    text = str(value)
    if not NAME_PATTERN.match(text) or set(text) <= {"."}:
        raise ConfigError(
            f"{what} {text!r}: names become folder names, so they must start with a letter or digit and hold "
            "only letters, digits and . _ + - (no / or \\, at most 128 characters), e.g. 'gpt2-small'."
        )
    return text


def folder(step: str, names: Mapping[str, str], fanin: bool = False) -> str:
    """The folder template of ``step`` filled with ``names`` (not checked: see :meth:`RunLayout.step_dir`), as a
    relative path; ``fanin``: only the leading parts that ``names`` fix (the parent of all matching steps)."""
    try:
        template = FOLDERS[step]
    except KeyError:
        raise ConfigError(f"unknown step {step!r}; steps: {', '.join(FOLDERS)}.") from None
    parts = []
    for part in template.split("/"):
        if fanin and any(f"{{{k}}}" in part for k in _KEYS if k not in names):
            break
        try:
            parts.append(part.format(**names))
        except KeyError as e:
            raise ConfigError(f"step {step}: needs {e.args[0]!r} (folder {template}).") from None
    return "/".join(parts)


def _checked(keys: Mapping[str, object]) -> dict[str, str]:
    return {k: safe_name(str(v), k) for k, v in keys.items()}


def fanin_dir(root: Path, step: str, keys: Mapping[str, object]) -> Path:
    """The folder holding every ``step`` folder that shares ``keys`` (e.g. ``finetune/<target>``)."""
    return root / folder(step, _checked(keys), fanin=True)


def within(parent: Path | str, fanin_step: str, fixed: Mapping[str, object], step: str | None = None,
           **keys: object) -> Path:
    """The folder of ``step`` (default: ``fanin_step``) for ``fixed`` + ``keys`` inside ``parent``, which is
    ``fanin_step``'s fan-in folder for ``fixed`` (:func:`fanin_dir`), wherever that folder lies (a run folder, a
    Kubeflow artifact). ``within(<finetune/t>, "finetune", {"target": t}, arm=a, seed=s)`` -> ``.../a/seed-s``;
    ``within(<evaluate/t>, "evaluate", {"target": t}, "evaluate-vanilla")`` -> ``.../vanilla``."""
    base = fanin_dir(Path("/"), fanin_step, fixed)
    full = RunLayout(Path("/")).step_dir(step or fanin_step, **fixed, **keys)
    try:
        return Path(parent) / full.relative_to(base)
    except ValueError:
        raise ConfigError(f"step {step}: its folder {full} is not inside {fanin_step}'s {base}.") from None


def discover(parent: Path | str, fanin_step: str, step: str | None = None,
             fixed: Mapping[str, object] | None = None) -> list[tuple[dict[str, str], Path]]:
    """Every ``step`` folder (default: ``fanin_step``) that exists inside ``parent``, ``fanin_step``'s fan-in folder
    for ``fixed`` keys, with the keys its path spells: e.g. ``discover(<run>/finetune, "finetune")`` ->
    ``[({"target": "gpt2", "arm": "cda", "seed": "13"}, <run>/finetune/gpt2/cda/seed-13), ...]``."""
    fixed = dict(fixed or {})
    base = folder(fanin_step, _checked(fixed), fanin=True).split("/")
    rest = FOLDERS[step or fanin_step].split("/")[len(base):]
    pattern = re.compile("/".join(re.sub(r"\\{(\w+)\\}", r"(?P<\1>[^/]+)", re.escape(p)) for p in rest) + "$")
    glob = "/".join(re.sub(r"\{\w+\}", "*", p) for p in rest)
    out = []
    for path in sorted(Path(parent).glob(glob)) if rest else []:
        m = pattern.match(path.relative_to(parent).as_posix())
        if m and path.is_dir() and all(NAME_PATTERN.match(v) for v in m.groupdict().values()):
            out.append(({**{k: str(v) for k, v in fixed.items()}, **m.groupdict()}, path))
    return out


def epoch_predictions_dir(finetune_dir: Path | str, epoch: int) -> Path:
    """The per-epoch intrinsic predictions of one epoch inside a finetune step's folder (holding
    ``<benchmark>/predictions.parquet``): ``predictions/epoch-<epoch>``."""
    return Path(finetune_dir) / EPOCH_PREDICTIONS_DIR / f"epoch-{int(epoch)}"


def epoch_predictions_dirs(finetune_dir: Path | str) -> list[Path]:
    """Every ``predictions/epoch-<N>`` folder of a finetune step, in epoch order."""
    found = [d for d in (Path(finetune_dir) / EPOCH_PREDICTIONS_DIR).glob("epoch-*") if epoch_of(d) is not None]
    return sorted(found, key=lambda d: epoch_of(d) or 0)


def epoch_of(folder: Path | str) -> int | None:
    """``.../epoch-3`` -> 3; None for another name."""
    m = re.fullmatch(r"epoch-(\d+)", Path(folder).name)
    return int(m.group(1)) if m else None


def k_dirname(k: float) -> str:
    """Folder of one filtered corpus: 30.0 -> ``k30``, 12.5 -> ``k12.5``."""
    return f"k{float(k):g}"


def filtered_in(filter_dir: Path | str, k: float) -> Path:
    """The filtered corpus for ``k`` inside a filter step's folder (also a KFP ``filtered`` artifact)."""
    return Path(filter_dir) / k_dirname(k) / FILTERED_FILE


@dataclass(frozen=True)
class RunLayout:
    """Paths of one run folder. Built with :meth:`of` (a config) or directly from a root folder."""

    root: Path

    @classmethod
    def of(cls, config) -> RunLayout:
        return cls(config.run_dir())

    # ---------------------------------------------------------------------------------------- step folders

    def step_dir(self, step: str, **keys: object) -> Path:
        """The folder of ``step`` for ``keys`` (target, arm, seed), each checked with :func:`safe_name`."""
        return self.root / folder(step, _checked(keys))

    def validate_dir(self, boundary: str, target: str | None = None) -> Path:
        step = BOUNDARY_STEPS.get(boundary)
        if step is None:
            raise ConfigError(f"validate: unknown boundary {boundary!r}; known: {', '.join(BOUNDARY_STEPS)}.")
        return self.step_dir(step, **({"target": target} if target is not None else {}))

    # ---------------------------------------------------------------------------------------- named files

    @property
    def sentences(self) -> Path:
        return self.step_dir("ingest") / SENTENCES_FILE

    @property
    def counterfactuals(self) -> Path:
        return self.step_dir("cda") / COUNTERFACTUALS_FILE

    @property
    def augmented(self) -> Path:
        return self.step_dir("augment") / AUGMENTED_FILE

    @property
    def samples(self) -> Path:
        return self.step_dir("sample") / SAMPLES_FILE

    def validated(self, boundary: str, target: str | None = None) -> Path:
        return self.validate_dir(boundary, target) / VALID_FILE

    def scores(self, target: str) -> Path:
        return self.step_dir("entropy", target=target) / SCORES_FILE

    def filtered(self, target: str, k: float) -> Path:
        return filtered_in(self.step_dir("filter", target=target), k)

    def final_model(self, target: str, arm: str, seed: int) -> Path:
        return self.step_dir("finetune", target=target, arm=arm, seed=seed) / FINAL_DIR

    def metrics(self, target: str, arm: str, seed: int) -> Path:
        return self.step_dir("finetune", target=target, arm=arm, seed=seed) / METRICS_FILE

    def evaluation_dir(self, target: str, arm: str = VANILLA, seed: int | None = None) -> Path:
        """vanilla's, a fine-tuned arm's (with its seed) or a post-hoc arm's (``seed=None``) evaluation folder."""
        if arm == VANILLA:
            return self.step_dir("evaluate-vanilla", target=target)
        if seed is None:
            return self.step_dir("evaluate-posthoc", target=target, arm=arm)
        return self.step_dir("evaluate", target=target, arm=arm, seed=seed)

    def debias_dir(self, target: str, arm: str) -> Path:
        return self.step_dir("debias", target=target, arm=arm)

    def register_dir(self, target: str, arm: str | None = None) -> Path:
        d = self.step_dir("register", target=target)
        return d / safe_name(arm, "arm") if arm is not None else d

    @property
    def report_dir(self) -> Path:
        return self.step_dir("report")

    # ---------------------------------------------------------------------------------------- version

    def version(self) -> int | None:
        """The folder's layout version: from layout.json; 1 for an older folder with stage outputs; None when
        the folder is new (nothing of a run in it yet)."""
        marker = self.root / LAYOUT_FILE
        if marker.is_file():
            try:
                return int(json.loads(marker.read_text())["layout_version"])
            except (OSError, ValueError, KeyError, TypeError) as e:
                raise ConfigError(f"{marker}: unreadable layout record ({e}); delete it only if the run "
                                  "folder is new.") from None
        if any((self.root / top).exists() for top in ("ingest", "cda", "augment", "finetune", "filter")):
            return 1
        return None

    def check(self, create: bool = True) -> RunLayout:
        """Refuse a run folder that cannot be resolved (a symbolic link loop) or of another layout version;
        record the version in a new one (``create``)."""
        _resolvable(self.root)
        found = self.version()
        if found is None:
            if create:
                write_marker(self.root)
            return self
        if found != LAYOUT_VERSION:
            raise ConfigError(f"{self.root}: this run folder uses run layout {found}, and this context-cda reads "
                              f"layout {LAYOUT_VERSION}. {upgrade_hint(self.root, found)}")
        return self


    def existing(self, command: str) -> RunLayout:
        """The run folder a state command (``ccda clean``, ``ccda migrate``) works on: refused when it is missing,
        not a folder, holds no run (no layout record and no stage outputs) or has an unreadable layout record."""
        _resolvable(self.root)
        if not self.root.is_dir():
            what = "no such folder" if not self.root.exists() else "a file, not a folder"
            raise InputError(f"{self.root}: {what}; {command} works on a run folder: pass the folder `ccda run` wrote "
                             "(--run-dir / run.run_dir, e.g. runs/demo).")
        if self.version() is None:
            raise InputError(f"{self.root}: not a run folder (no {LAYOUT_FILE} and no stage outputs); {command} works "
                             "on a run folder: pass the folder `ccda run` wrote (--run-dir / run.run_dir, e.g. "
                             "runs/demo).")
        return self


def _resolvable(root: Path) -> None:
    import errno
    import os

    try:
        root.resolve()
        os.stat(root)
    except FileNotFoundError:
        return
    except RuntimeError as e:  # Path.resolve on a symbolic link loop
        raise ConfigError(f"{root}: the run folder cannot be resolved ({e}); point --run-dir (run.run_dir) at a real "
                          "folder, or remove the looping link.") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ConfigError(f"{root}: the run folder cannot be resolved (a symbolic link loop); point --run-dir "
                              "(run.run_dir) at a real folder, or remove the looping link.") from None


def upgrade_hint(root: Path, found: int) -> str:
    """What to do with a run folder of layout ``found``."""
    if found > LAYOUT_VERSION:
        return "It was written by a newer version: upgrade context-cda or use another run folder."
    if found == 2:
        return ("It was written before the samples were drawn once for every target (entropy-parts/<target>/): "
                f"migrate it in place with `ccda migrate --run-dir {root}` (with the same --profile/--set as the "
                "run; it keeps every output, and the next `ccda run` draws the samples once and reuses what stays "
                "the same), or start a new run folder (--run-dir) and rerun.")
    return ("It was written by an older version (no validated training inputs, no seed-<n> folders): start a new "
            "run folder (--run-dir, or run.run_dir) and rerun; the old one stays readable with the version that "
            "wrote it.")


def write_marker(root: Path) -> None:
    """Record this layout version in run folder ``root``."""
    from .io import ensure_dir, write_json

    ensure_dir(root)
    write_json(root / LAYOUT_FILE, {"layout_version": LAYOUT_VERSION})
