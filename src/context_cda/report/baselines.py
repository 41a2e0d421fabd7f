"""The report's parts for the paper's Table 1 comparison rows: the post-hoc arms' and published checkpoints'
evaluations, the paper's published values beside the measured ones, and the decontamination counts.

* Post-hoc arms (INLP, SentenceDebias, Self-Debias) and published checkpoints have no epochs: their Table 1 row is
  their ``evaluate-posthoc`` step's aggregate (epoch "–"); a published checkpoint that could not be loaded keeps its
  row, saying why.
* Published values (``report.published``; default ``context_cda/resources/published_table1.yaml``) come as a row
  under the measured one, labelled "published (paper)": another scorer on other items, context and never evidence.
* Decontamination: per step that makes training text (ingest, cda, augment, the neutral step, the cda-neutral
  arm's finetune), how many texts were dropped for overlapping a benchmark item (:mod:`context_cda.evaluate.decontam`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import layout as L
from ..errors import InputError
from ..io import read_json

if TYPE_CHECKING:  # pragma: no cover
    from ..config import Config

DECONTAM_STAGES = (("ingest", "sentences"), ("cda", "counterfactual pairs"), ("augment", "rephrasings"),
                   ("neutral", "neutral rewrites (context-neutral)"))
#: the finetune step that makes its own training texts: the cda-neutral arm's lexicon rewrites
DECONTAM_ARM = ("cda-neutral", "lexicon neutral rewrites (cda-neutral)")


def posthoc_dirs(evaluate_dir: Path | str | None) -> dict[tuple[str, str], Path]:
    """``{(target, arm): folder}`` of the run's evaluate-posthoc steps."""
    if evaluate_dir is None or not Path(evaluate_dir).is_dir():
        return {}
    return {(k["target"], k["arm"]): d for k, d in L.discover(evaluate_dir, "evaluate", "evaluate-posthoc")}


def unavailable(evaluate_dir: Path | str | None) -> dict[tuple[str, str], str]:
    """``{(target, arm): why}`` of the published checkpoints that could not be loaded."""
    from ..evaluate.posthoc import unavailable as why

    out = {}
    for key, folder in posthoc_dirs(evaluate_dir).items():
        reason = why(folder / L.AGGREGATE_FILE)
        if reason:
            out[key] = reason
    return out


def projection_warnings(evaluate_dir: Path | str | None) -> list[str]:
    """The post-hoc evaluations' warnings about their projection (one that removes most dimensions of the hidden
    states: :func:`context_cda.evaluate.posthoc.apply`), for the report's caveats."""
    out = []
    for _key, folder in sorted(posthoc_dirs(evaluate_dir).items()):
        try:
            applied = read_json(folder / L.AGGREGATE_FILE).get("applied") or {}
        except (InputError, AttributeError):
            continue
        if isinstance(applied, dict) and applied.get("warning"):
            out.append(str(applied["warning"]))
    return out


def published_values(config: Config) -> dict[str, Any]:
    """``{"source": ..., "models": {model reference: {row: {metric: value}}}}`` from ``report.published``."""
    import yaml

    path = Path(config.report.published) if config.report.published else Path(__file__).parents[1] / "resources" / (
        "published_table1.yaml")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as e:
        raise InputError(f"{path}: unreadable published values ({e}); fix report.published.") from None
    if not isinstance(data, dict) or not isinstance(data.get("models", {}), dict):
        raise InputError(f"{path}: expected {{source: ..., models: {{reference: {{row: {{metric: value}}}}}}}}.")
    return data


def published_rows(config: Config, published: Mapping[str, Any], target: str) -> dict[str, dict[str, float]]:
    """``{row: {metric: value}}`` the paper publishes for the target's model reference (empty: not a paper model)."""
    ref = config.run.targets.get(target)
    rows = (published.get("models", {}).get(ref) or {}) if ref else {}
    return {str(name): {k: float(v) for k, v in row.items()} for name, row in rows.items() if row}


def published_row(config: Config, published: Mapping[str, Any], target: str, model: str) -> dict[str, float] | None:
    """The published values of (target, row) when the paper reports the target's reference."""
    return published_rows(config, published, target).get(model)


def decontamination(folders: Mapping[str, Path]) -> list[dict[str, Any]]:
    """One row per step that made training text and ran: stage, what it checks, texts dropped for an eval overlap,
    per benchmark (the cda-neutral arm's rewrites: from its first finetune step; every target and seed rewrites the
    same validated table with the same lexicon)."""
    rows = []
    for stage, what in DECONTAM_STAGES:
        folder = folders.get(stage) or (folders["augment"].parent / stage if folders.get("augment") else None)
        row = _overlap_row(folder, stage, what)
        rows += [row] if row else []
    arm, what = DECONTAM_ARM
    if folders.get("finetune") and Path(folders["finetune"]).is_dir():
        steps = [d for k, d in L.discover(folders["finetune"], "finetune") if k.get("arm") == arm]
        row = next((r for d in steps if (r := _overlap_row(d, f"finetune ({arm})", what))), None)
        rows += [row] if row else []
    return rows


def _overlap_row(folder: Path | str | None, stage: str, what: str) -> dict[str, Any] | None:
    if folder is None or not (Path(folder) / "manifest.json").is_file():
        return None
    try:
        summary = read_json(Path(folder) / "manifest.json").get("summary", {})
    except InputError:
        return None
    if "eval_overlap" not in summary:
        return None
    return {"stage": stage, "checks": what, "dropped": int(summary["eval_overlap"]),
            "by_benchmark": dict(summary.get("eval_overlap_by_benchmark") or {})}


def decontamination_markdown(rows: list[dict[str, Any]], config: Config) -> list[str]:
    if not rows:
        return []
    d = config.decontaminate
    lines = ["## Decontamination", "",
             f"No text any arm trains on may hold an evaluation item ({', '.join(d.benchmarks)}, every bias type): a "
             f"text sharing more than {d.threshold:.0%} of an item's word {d.ngram}-grams is dropped into its stage's "
             "rejected.parquet (reason eval-overlap).", "",
             "| Stage | Texts checked | Dropped (eval-overlap) | By benchmark |", "|---|---|---:|---|"]
    for r in rows:
        by = ", ".join(f"{b}: {n}" for b, n in sorted(r["by_benchmark"].items())) or "–"
        lines.append(f"| {r['stage']} | {r['checks']} | {r['dropped']} | {by} |")
    return [*lines, ""]
