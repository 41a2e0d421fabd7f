"""The per-item evidence the promotion gate decides on: where a model's per-item scores are, pooled over seeds.

A model's evidence is its per-item StereoSet and CrowS-Pairs decisions (:func:`context_cda.evaluate.stereoset.
item_scores`, :func:`context_cda.evaluate.crows.item_scores`), read from a folder holding
``<benchmark>/predictions.parquet``:

* the evaluate step of the model (``evaluate/<target>/<arm>/seed-<s>``, ``evaluate/<target>/vanilla``), the
  full benchmarks on the saved weights; else
* the per-epoch evaluation of its finetune step: ``predictions/epoch-<last>`` for the fine-tuned model and
  ``predictions/epoch-0`` for the vanilla model (written by the first finetune step of a target; the others
  reuse its epoch-0 metrics).

An arm trained with several seeds is judged by its seeds' *pooled* evidence: the items every seed was scored on,
each seed's decisions kept (:func:`context_cda.evaluate.stats.pooled`). Every metric, the distances |SS-50| and |CS-50|
and ICAT included, is the mean over seeds of that seed's metric (two seeds at SS 30 and 70 are 20 points from
50, not 0), and the paired bootstrap against vanilla or the champion draws the same items for every seed: the
interval covers the sampling of benchmark items for the arm's average run; the spread between seeds is reported
beside it (mean ± std in the report).

:func:`to_table` / :func:`from_table` store evidence as one Parquet table (``evidence.parquet``: benchmark, run,
id, group and the per-item columns; one block of rows per seed), logged with every registered version so a
later candidate can be compared with the champion item by item.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import layout as L

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..evaluate.stats import Difference, Items

BENCHMARKS = ("stereoset", "crows")
#: benchmarks read beside the gate's when a caller asks for them (the report): their per-item decisions have the
#: shape of the benchmark named (StereoSet intersentence: SS and LMS per cluster, as intrasentence)
REPORTED = {"stereoset-inter": "stereoset"}
#: the per-item columns of each benchmark's evidence
COLUMNS = {"stereoset": ("ss", "lms"), "crows": ("win", "stereo", "win_stereo", "anti", "win_anti"),
           "stereoset-inter": ("ss", "lms")}


@dataclass
class Evidence:
    """Per-item scores of one model (or one arm pooled over its seeds), per benchmark, and where they came from."""

    items: dict[str, Items] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)

    def has(self, benchmark: str) -> bool:
        return benchmark in self.items and len(self.items[benchmark]) > 0


def scorer(benchmark: str) -> Any:
    """The benchmark's module (:mod:`context_cda.evaluate.stereoset` for both StereoSet tasks, or ``.crows``): its
    ``item_scores``, ``metrics`` (of per-item scores) and ``IDEALS`` (the values the distances are measured from)."""
    from ..evaluate import crows, stereoset

    return stereoset if REPORTED.get(benchmark, benchmark) == "stereoset" else crows


def _item_scores(benchmark: str, rows: list[dict[str, Any]]) -> Items:
    return scorer(benchmark).item_scores(rows)


def read_predictions(folder: Path | str, benchmarks: Sequence[str] = BENCHMARKS) -> dict[str, Items]:
    """The per-item scores of every gate benchmark (or of ``benchmarks``) whose ``<benchmark>/predictions.parquet``
    is in ``folder``."""
    import pandas as pd

    out = {}
    for b in benchmarks:
        p = Path(folder) / b / L.PREDICTIONS_FILE
        if p.is_file():
            df = pd.read_parquet(p)
            if not df.empty:
                out[b] = _item_scores(b, df.to_dict("records"))
    return out


def bias_types(folder: Path | str) -> dict[str, set[str]]:
    """The bias types each gate benchmark's predictions in ``folder`` were scored on (their ``bias_type``
    column; a benchmark without one is left out)."""
    import pyarrow.parquet as pq

    out = {}
    for b in BENCHMARKS:
        p = Path(folder) / b / L.PREDICTIONS_FILE
        if p.is_file() and "bias_type" in pq.ParquetFile(p).schema_arrow.names:
            out[b] = {str(t) for t in pq.read_table(p, columns=["bias_type"]).column("bias_type").to_pylist()}
    return out


def check_bias_types(folders: Mapping[str, Path | str], bias_type: str, where: str) -> None:
    """Refuse evidence scored on another bias type than the one the run is judged on (``evaluate.bias_type``,
    from ``run.attribute``; ``all``: any): a race run's gate must not decide on gender items. ``folders``: input
    name -> predictions folder."""
    from ..errors import InputError
    from ..evaluate.data import CROWS_ALIASES

    if bias_type == "all":
        return
    want = {"stereoset": bias_type, "crows": CROWS_ALIASES.get(bias_type, bias_type)}
    for key, folder in folders.items():
        for b, types in bias_types(folder).items():
            if other := sorted(types - {want[b]}):
                raise InputError(
                    f"{where}: {Path(folder) / b / L.PREDICTIONS_FILE} (input {key}) was scored on bias type "
                    f"{', '.join(other)}, but this run is judged on {want[b]} (evaluate.bias_type {bias_type}, "
                    "which follows run.attribute). Re-run that evaluation (ccda run --only evaluate --force), "
                    "or set evaluate.bias_type to what it was scored on.")


def has_predictions(folder: Path | str) -> bool:
    return any((Path(folder) / b / L.PREDICTIONS_FILE).is_file() for b in BENCHMARKS)


def last_epoch_dir(finetune_dir: Path | str) -> Path | None:
    """The per-epoch predictions of the last evaluated epoch (> 0) of a finetune step, if any."""
    best: tuple[int, Path] | None = None
    for d in L.epoch_predictions_dirs(finetune_dir):
        epoch = L.epoch_of(d)
        if epoch and has_predictions(d) and (best is None or epoch > best[0]):
            best = (epoch, d)
    return best[1] if best else None


def model_items_dir(evaluations: Path | str | None, finetune: Path | str, target: str, arm: str,
                    seed: int) -> Path | None:
    """Where the per-item scores of (target, arm, seed) are: its evaluate step, else its last epoch's."""
    fixed = {"target": target}
    if evaluations:
        ev = L.within(evaluations, "evaluate", fixed, arm=arm, seed=seed)
        if has_predictions(ev):
            return ev
    return last_epoch_dir(L.within(finetune, "finetune", fixed, arm=arm, seed=seed))


def vanilla_items_dir(evaluations: Path | str | None, finetune: Path | str | None, target: str) -> Path | None:
    """Where the vanilla model's per-item scores are: the vanilla evaluate step, else a finetune step's epoch 0."""
    if evaluations:
        ev = L.within(evaluations, "evaluate", {"target": target}, "evaluate-vanilla")
        if has_predictions(ev):
            return ev
    if not finetune or not Path(finetune).is_dir():
        return None
    for _, d in L.discover(finetune, "finetune", fixed={"target": target}):
        e0 = L.epoch_predictions_dir(d, 0)
        if has_predictions(e0):
            return e0
    return None


def load(folders: Mapping[int, Path | str] | Sequence[Path | str], benchmarks: Sequence[str] = BENCHMARKS
         ) -> Evidence:
    """Evidence of one model from one folder, or of an arm from one folder per seed (pooled); ``benchmarks``: the
    gate's, or more of them (:data:`REPORTED`: the gate reads only its own)."""
    from ..evaluate.stats import pooled

    pairs = list(folders.items()) if isinstance(folders, Mapping) else list(enumerate(folders))
    per_seed = [(s, read_predictions(f, benchmarks), str(f)) for s, f in pairs]
    ev = Evidence(sources=[src for _, _, src in per_seed],
                  seeds=[int(s) for s, _, _ in per_seed] if isinstance(folders, Mapping) else [])
    for b in benchmarks:
        parts = [items[b] for _, items, _ in per_seed if b in items]
        if parts and len(parts) == len(per_seed):  # every seed must have been scored on the benchmark
            ev.items[b] = pooled(parts)
    return ev


def paired_differences(a: Evidence, b: Evidence, settings: Any = None) -> dict[str, Difference]:
    """``metric(a) - metric(b)`` of every metric of every benchmark both were scored on (``ss``, ``lms``, ``icat``,
    ``cs``, ``stereo``, ``antistereo``), paired on their shared items (:func:`context_cda.evaluate.stats.paired`;
    ``settings``: the bootstrap's). The report's paired table and the model cards read these."""
    from ..evaluate.stats import Settings, paired

    out: dict[str, Difference] = {}
    for bench in BENCHMARKS:
        if a.has(bench) and b.has(bench):
            out.update(paired(a.items[bench], b.items[bench], scorer(bench).metrics, Settings.of(settings)))
    return out


def to_table(evidence: Evidence) -> pd.DataFrame:
    import pandas as pd

    frames = []
    for b, items in evidence.items.items():
        for run, columns in enumerate(items.runs or (items.columns,)):
            df = pd.DataFrame({"benchmark": b, "run": run, "id": items.ids.astype(str),
                               "group": items.groups.astype(str)})
            for c in COLUMNS[b]:
                df[c] = columns[c]
            frames.append(df)
    cols = ["benchmark", "run", "id", "group", *dict.fromkeys(c for b in BENCHMARKS for c in COLUMNS[b])]
    return pd.concat(frames, ignore_index=True).reindex(columns=cols) if frames else pd.DataFrame(columns=cols)


def from_table(df: pd.DataFrame, source: str = "") -> Evidence:
    from ..evaluate.stats import Items, pooled

    ev = Evidence(sources=[source] if source else [])
    for b in BENCHMARKS:
        sub = df[df["benchmark"] == b]
        if sub.empty or not all(c in sub.columns for c in COLUMNS[b]):
            continue
        runs = [g for _, g in sub.groupby("run", sort=True)] if "run" in sub.columns else [sub]  # older tables
        parts = [Items.build(g["id"], g["group"], **{c: g[c].astype(float) for c in COLUMNS[b]}) for g in runs]
        ev.items[b] = parts[0] if len(parts) == 1 else pooled(parts)
    return ev
