"""The report written from the run as a short paper: setup, findings, tables, figures.
May import: the run contract, augment, data, evaluate, models, tracking.

In Markdown (``report.md``) and HTML (``report.html``, the same
text rendered for a browser, with its figures).

``run_report(config, inputs, RUN_DIR/report)`` (inputs: the stage table's, :mod:`context_cda.stages`) writes:

1. **Setup** (:mod:`.setup`): the models with their exact source and precision, the corpus and the rows at each
   stage, the training budget, the benchmarks' sizes, the seeds and what was sampled;
2. **Findings** (:mod:`.findings`): what the paired evidence shows and does not show, in words and numbers;
3. **Table 1** (``table1.csv``): per target, the vanilla model (epoch 0) and each arm after its last epoch (the
   evaluate stage's full-benchmark metrics where it ran), cells with their bootstrap intervals and ▲ / ▼: on SS,
   CS and LMS the promotion gate's own judgement against vanilla (:func:`context_cda.tracking.gate.judge`), on
   ICAT a significant paired difference; several seeds: one row per seed and the mean ± std (:mod:`.evidence`);
4. **Paired comparisons** (``comparisons.csv``): every arm against vanilla and every other arm, with the gate's
   statistic (the shift toward 50) and marks;
5. **Table 2** (``table2.csv``): extrinsic bias, GLUE and next-token balance with their deviation marks
   (:mod:`.extrinsic`), when the evaluate stage ran;
6. **Verdicts and power**, **Dose response** (:mod:`.dose`, ``verdicts.csv``): each arm's verdict against vanilla
   from the gate's own decision (:func:`context_cda.tracking.promotion.decide`) with the numbers it decided on and
   the smallest shift it could have shown; an arm fine-tuned on growing token budgets against the tokens seen;
7. **Registry decisions** (:mod:`.registry`): each version's decision and aliases, in the registry's words;
8. **Figures**: per (target, metric) curves against the epoch with interval bands on honest axes (:mod:`.plots`),
   next-token histograms;
9. **Generated data** (:mod:`.generated`): acceptance by reason, randomly drawn accepted and rejected examples,
   the semantic-entropy histograms.

The tables and curves are driven by the arms, seeds and benchmarks found in the run, never by a fixed list. With
tracking on, the report, every image it shows and every table go to the pipeline's MLflow run (``report/``).
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import layout as L
from ..errors import InputError
from ..io import read_json, write_json, write_text
from . import (
    baselines,
    choice,
    dose,
    evidence,
    extrinsic,
    findings,
    generated,
    neutral,
    plots,
    registry,
    setup,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..config import Config

logger = logging.getLogger(__name__)

# metric key -> (column title, ideal value or None, "lower-is-better" hint for the table note)
METRICS: dict[str, tuple[str, float | None]] = {
    "stereoset_ss": ("SS", 50.0),
    "stereoset_lms": ("LMS", None),
    "stereoset_icat": ("ICAT", None),
    "crows_cs": ("CS", 50.0),
}
# Table 2 (the evaluate stage's aggregates): its columns, chance baselines and deviation marks: report.extrinsic
EXTRINSIC = extrinsic.EXTRINSIC
ARM_LABELS = {"vanilla": "Vanilla", "cda": "CDA", "context-cda": "Context-CDA",
              "context-cda-nofilter": "Context-CDA (no filter)", "dropout": "Dropout", "inlp": "INLP",
              "sentence-debias": "SentenceDebias", "self-debias": "Self-Debias", "cda-neutral": "Neutral (lexicon)",
              "context-neutral": "Context-neutral"}


def arm_label(arm: str) -> str:
    from ..arms import label

    return ARM_LABELS.get(arm) or label(arm)


def collect_metrics(finetune_dir: Path | str) -> pd.DataFrame:
    """Every fine-tuning step's ``metrics.csv`` rows (the run's ``finetune`` folder), one DataFrame with
    ``target``, ``arm`` and ``seed`` columns."""
    import pandas as pd

    frames = []
    for keys, folder in L.discover(finetune_dir, "finetune"):
        p = folder / L.METRICS_FILE
        df = read_metrics(p) if p.is_file() else pd.DataFrame()
        if df.empty:
            continue
        for k in ("target", "arm"):
            df[k] = df[k] if k in df.columns else keys[k]
        df["seed"] = int(keys["seed"])
        frames.append(df)
    if not frames:
        raise InputError(f"{finetune_dir}: no fine-tuning step with a {L.METRICS_FILE} (folders "
                         f"{L.FOLDERS['finetune']}); run `ccda finetune` first.")
    return pd.concat(frames, ignore_index=True)


def read_metrics(path: Path) -> pd.DataFrame:
    """One fine-tuning step's ``metrics.csv``: an epoch column and numbers (arm and target aside); a file of
    another shape (edited by hand, cut short) is an :class:`InputError` naming it, not a traceback in the report."""
    import pandas as pd

    try:
        df = pd.read_csv(path)
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise InputError(f"{path}: not a metrics table ({str(e).splitlines()[0][:120]}); the fine-tuning step writes "
                         "it: restore the file or rerun that step (ccda run --only finetune --force).") from None
    text = [c for c in df.columns if c not in ("arm", "target") and not pd.api.types.is_numeric_dtype(df[c])]
    if not df.empty and ("epoch" not in df.columns or text):
        what = f"column(s) {', '.join(map(str, text[:3]))} hold values that are not numbers" if text else "no epoch column"
        raise InputError(f"{path}: {what}; the fine-tuning step writes an epoch and numbers: restore the file or "
                         "rerun that step (ccda run --only finetune --force).")
    return df


def first_seed(df: pd.DataFrame, seeds: list[int] | None = None) -> pd.DataFrame:
    """The rows of one training seed per (target, arm): the first of ``seeds`` present, else the smallest."""
    import pandas as pd

    if df.empty or "seed" not in df.columns:
        return df
    keep = []
    for _, g in df.groupby(["target", "arm"], sort=False):
        present = sorted(set(g["seed"]))
        pick = next((s for s in (seeds or []) if s in present), present[0])
        keep.append(g[g["seed"] == pick])
    return pd.concat(keep, ignore_index=True)


def table1(df: pd.DataFrame, final: Mapping[tuple[str, str], Mapping[str, float]] | None = None,
           posthoc: Mapping[tuple[str, str], str | None] | None = None) -> pd.DataFrame:
    """Rows (target, model): vanilla (epoch 0) then each arm's last epoch; columns SS, LMS, ICAT, CS.

    ``final[(target, model)]`` (the evaluate stage's full-benchmark metrics) replaces the per-epoch values of
    that row when given; the ``source`` column says which was used.
    """
    import pandas as pd

    final = final or {}
    rows = []

    def add(target: str, model: str, epoch: int, row) -> None:
        vals, source = _metric_values(row), "metrics.csv"
        if (target, model) in final:
            got = final[(target, model)]
            # a metric the evaluate step measured comes with its own interval (or none), never the epoch's
            vals = {k: got.get(k) if k.split("_ci_")[0] in got else vals[k] for k in vals}
            source = "evaluate"
        rows.append({"target": target, "model": model, "epoch": epoch, **vals, "source": source})

    for target, tdf in df.groupby("target", sort=True):
        van = tdf[tdf["epoch"] == 0]
        if not van.empty:
            add(str(target), "vanilla", 0, van.iloc[0])
        for arm in _arm_order(tdf["arm"].unique()):
            adf = tdf[(tdf["arm"] == arm) & (tdf["epoch"] > 0)].sort_values("epoch")
            if adf.empty:
                continue
            last = adf.iloc[-1]
            add(str(target), arm, int(last["epoch"]), last)
    for (target, arm), why in sorted((posthoc or {}).items(), key=lambda kv: (kv[0][0], _model_rank(kv[0][1]))):
        got = final.get((target, arm), {})  # a post-hoc arm or a published checkpoint: no epochs
        rows.append({"target": target, "model": arm, "epoch": None, **{m: got.get(m) for m in [*METRICS, *_CI_COLUMNS]},
                     "source": "evaluate", "note": f"could not be loaded: {why}" if why else None})
    cols = ["target", "model", "epoch", *(m for m in METRICS), "source", *_CI_COLUMNS, "note"]
    return pd.DataFrame(rows, columns=cols)


_CI_COLUMNS = [f"{m}_ci_{side}" for m in METRICS for side in ("low", "high")]


def evaluation_dirs(evaluate_dir: Path | str | None, seeds: list[int] | None = None) -> dict[tuple[str, str], Path]:
    """``{(target, model): folder}`` of the run's evaluate steps (model: ``vanilla`` or an arm; one training seed
    per arm, as :func:`first_seed`)."""
    if evaluate_dir is None or not Path(evaluate_dir).is_dir():
        return {}
    out = {(k["target"], L.VANILLA): d for k, d in L.discover(evaluate_dir, "evaluate", "evaluate-vanilla")}
    out.update(baselines.posthoc_dirs(evaluate_dir))
    by_arm: dict[tuple[str, str], dict[int, Path]] = {}
    for k, d in L.discover(evaluate_dir, "evaluate"):
        by_arm.setdefault((k["target"], k["arm"]), {})[int(k["seed"])] = d
    for key, per_seed in by_arm.items():
        out[key] = per_seed[next((s for s in (seeds or []) if s in per_seed), min(per_seed))]
    return out


def evaluate_metrics(evaluate_dir: Path | str | None, seeds: list[int] | None = None
                     ) -> dict[tuple[str, str], dict[str, float]]:
    """The evaluate steps' flat metrics (``aggregate.json``) per (target, model: an arm or ``vanilla``)."""
    out = {}
    for key, folder in evaluation_dirs(evaluate_dir, seeds).items():
        try:
            data = read_json(folder / L.AGGREGATE_FILE)
        except InputError:
            continue
        metrics = data.get("metrics") if isinstance(data, dict) else None
        if isinstance(metrics, dict):
            out[key] = {k: float(v) for k, v in metrics.items() if isinstance(v, int | float)}
    return out


def table2(final: Mapping[tuple[str, str], Mapping[str, float]]) -> pd.DataFrame:
    """Rows (target, model) from the evaluate stage: the extrinsic, downstream and next-token metrics present."""
    import pandas as pd

    cols = [m for m in EXTRINSIC if any(m in v for v in final.values())]
    rows = []
    for (target, model), vals in sorted(final.items(), key=lambda kv: (kv[0][0], _model_rank(kv[0][1]))):
        if any(m in vals for m in cols):
            rows.append({"target": target, "model": model, **{m: vals.get(m) for m in cols}})
    return pd.DataFrame(rows, columns=["target", "model", *cols])


def _model_rank(model: str) -> tuple[int, str]:
    order = list(ARM_LABELS)
    return (order.index(model), model) if model in order else (len(order), model)


def next_token_aggregates(evaluate_dir: Path | str | None, seeds: list[int] | None = None
                          ) -> dict[str, dict[str, dict[str, Any]]]:
    """``{target: {model: next-token aggregate}}`` from the evaluate steps' ``next-token/aggregate.json``."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for (target, model), folder in evaluation_dirs(evaluate_dir, seeds).items():
        p = folder / "next-token" / L.AGGREGATE_FILE
        try:
            if p.is_file():
                out.setdefault(target, {})[model] = read_json(p)
        except InputError:
            continue
    return {t: dict(sorted(v.items(), key=lambda kv: _model_rank(kv[0]))) for t, v in out.items()}


def plot_next_token(aggs: Mapping[str, Mapping[str, dict[str, Any]]], out_dir: Path) -> list[Path]:
    """One histogram per target: male tokens among the top-k gender tokens per context, one series per model."""
    from ..evaluate.next_token import plot_histograms

    paths = []
    for target, by_model in aggs.items():
        labelled = {arm_label(m): a for m, a in by_model.items()}
        paths.append(plot_histograms(labelled, out_dir / f"{plots.safe(target)}-next-token.png",
                                     f"{target}: male tokens in the top-k gender tokens per context"))
    return paths


def _metric_values(row) -> dict[str, float | None]:
    import pandas as pd

    return {m: (float(row[m]) if m in row and pd.notna(row[m]) else None) for m in [*METRICS, *_CI_COLUMNS]}


def _arm_order(arms) -> list[str]:
    known = [a for a in ARM_LABELS if a in set(arms)]
    return known + sorted(a for a in arms if a not in ARM_LABELS)


def plot_curves(df: pd.DataFrame, out_dir: Path, level: float = 0.95) -> list[Path]:
    """One PNG per (target, metric): the metric against the epoch, one line and interval band per arm
    (:func:`.plots.plot_curves`)."""
    return plots.plot_curves(df, out_dir, METRICS, _arm_order, arm_label, level)


@dataclass
class Report:
    """Everything the report says, computed once; :func:`render_markdown` writes it, :func:`render_html` shows it."""

    run_dir: Path
    t1: pd.DataFrame
    t2: pd.DataFrame
    ev: evidence.Evidence
    decisions: registry.Decisions
    gen: generated.GeneratedData
    setup: list[str]
    n_items: dict[str, int]
    facts: dict[str, Any]
    curves: list[Path] = field(default_factory=list)
    histograms: list[Path] = field(default_factory=list)
    published: tuple | None = None  # (config, the paper's published values: report.published)
    decontamination: list[dict[str, Any]] = field(default_factory=list)  # eval-overlap counts per stage
    judged: str = ""  # which attribute the run debiased and which benchmark subsets judge it
    wino: Any = None  # WinoGender / WinoBias values with intervals (report.choice)
    neutral: list[str] = field(default_factory=list)  # the neutral step's rewrites section (report.neutral)
    study: Any = None  # every arm's decision against vanilla and the dose-response curves (report.dose)

    @property
    def targets(self) -> list[str]:
        return sorted(map(str, self.t1["target"].unique()))


def _intro(r: Report) -> list[str]:
    arms = [a for a in dict.fromkeys(map(str, r.t1["model"])) if a != L.VANILLA]
    return [f"# Context-CDA report: `{r.run_dir.name}`", "",
            f"Targets {', '.join(f'`{t}`' for t in r.targets)}; arms {', '.join(arm_label(a) for a in arms)}, each "
            "compared with the vanilla model (the target before any debiasing) on the same items. Every number "
            "carries its bootstrap interval; differences are paired.", ""]


def _table2_lines(t2: pd.DataFrame) -> list[str]:
    if t2 is None or t2.empty:
        return []
    cols = [c for c in t2.columns if c in EXTRINSIC]
    lines = ["## Table 2: extrinsic bias, downstream quality and next-token balance", "", extrinsic.NOTE, ""]
    for target, tdf in t2.groupby("target", sort=True):
        lines += [f"### {target}", "", "| Model | " + " | ".join(EXTRINSIC[c] for c in cols) + " |",
                  "|---|" + "---:|" * len(cols)]
        for _, row in tdf.iterrows():
            lines.append(f"| {arm_label(row['model'])} | " + " | ".join(extrinsic.cell(t2, row, c) for c in cols) + " |")
        lines += ["", *extrinsic.notes(t2, str(target), label=arm_label)]
    return lines


def _figure_lines(r: Report) -> list[str]:
    if not (r.curves or r.histograms):
        return []
    lines = ["## Figures", ""]
    if r.curves:
        lines += [f"Per-epoch scores (epoch 0 = vanilla), one line per arm with its {r.ev.level:.0%} bootstrap "
                  "interval as a band. The axes are honest: SS and CS on at least "
                  f"{plots.BIAS_SPAN:g} points around the ideal 50 (dashed), LMS and ICAT on at least "
                  f"{plots.QUALITY_SPAN:g} points, so a small step does not look like a jump.", "",
                  *(f"![{p.stem}]({p.name})" for p in r.curves), ""]
    if r.histograms:
        lines += ["Next-token balance: male tokens among the top-k gender tokens per context, one series per model.",
                  "", *(f"![{p.stem}]({p.name})" for p in r.histograms), ""]
    return lines


def render_markdown(r: Report) -> str:
    """The report as Markdown: intro, setup, findings, tables, registry decisions, figures, generated data."""
    lines = [*_intro(r), *([r.judged, ""] if r.judged else []), *r.setup,
             *findings.markdown(r.ev, r.t1, r.targets, arm_label, r.n_items, r.decisions, r.facts, r.t2),
             *(dose.markdown(r.study, r.ev, arm_label) if r.study is not None else []),
             "## Table 1: intrinsic bias after debiasing", "",
             "SS (StereoSet stereotype score) and CS (CrowS-Pairs) are best at 50; LMS (language modelling score) "
             "and ICAT are better higher. Every row is measured here, by the same scorer on the same items: the "
             "vanilla target, the fine-tuned arms (CDA, Context-CDA, dropout) after their last epoch, the post-hoc "
             "arms applied to the vanilla model (INLP, SentenceDebias, Self-Debias: epoch –) and published "
             "checkpoints. Rows labelled *published (paper)* quote the paper's Table 1 (another scorer, other "
             "items): context, not evidence.", "",
             *evidence.table1_markdown(r.t1, r.ev, list(METRICS), arm_label, r.published),
             *evidence.markdown(r.ev, r.targets, arm_label), *_table2_lines(r.t2),
             *(choice.markdown(r.wino, arm_label, _model_rank) if r.wino is not None else []), *r.neutral,
             *(baselines.decontamination_markdown(r.decontamination, r.published[0]) if r.published else []),
             *registry.markdown(r.decisions, arm_label), *_figure_lines(r)]
    return "\n".join(lines) + "\n" + generated.markdown(r.gen)


CSS = """
body{font:15px/1.55 -apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:#1d1d1f;
max-width:1180px;margin:2.5em auto;padding:0 1.5em;background:#fff}
h1{font-size:1.7em;border-bottom:2px solid #1f5fa8;padding-bottom:.3em}h2{font-size:1.3em;margin-top:2em;
border-bottom:1px solid #ddd;padding-bottom:.2em}h3{font-size:1.05em;margin-top:1.4em}
table{border-collapse:collapse;margin:.6em 0 1.4em;font-size:.86em;display:block;overflow-x:auto;max-width:100%}
th,td{border:1px solid #d0d4da;padding:4px 9px;vertical-align:top}th{background:#f0f3f7;text-align:left}
tr:nth-child(even) td{background:#fafbfc}td:has(+td),td{font-variant-numeric:tabular-nums}
code{background:#f3f4f6;padding:1px 4px;border-radius:3px;font-size:.9em}
p img,figure img{max-width:46%;margin:4px 1%;border:1px solid #e5e7eb;border-radius:4px;vertical-align:top}
li{margin:.2em 0}strong{color:#111}
"""


def render_html(markdown_text: str, title: str) -> str:
    """The Markdown report as one HTML page (tables, figures side by side), readable in any browser."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown_text)
    return (f"<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width,initial-scale=1'><title>{html.escape(title)}</title>"
            f"<style>{CSS}</style></head>\n<body>\n{body}</body></html>\n")


def _facts(config: Config, folders: Mapping[str, Path]) -> dict[str, Any]:
    """What the findings' caveats need: quantized targets, the token budget, the per-epoch item cut."""
    from ..models.info import describe

    quantized = [f"`{t}`" for t, ref in config.run.targets.items()
                 if str(describe(ref).details.get("quantization", "F32"))[:1] in ("Q", "I")]
    budgets = {int(s["token_budget"]) for _, d in L.discover(folders["finetune"], "finetune")
               if isinstance((s := setup.summary_of(d)).get("token_budget"), int)}
    ev_dir = folders.get("evaluations") or folders.get("posthoc")
    return {"quantized": quantized, "token_budgets": sorted(budgets),
            "max_items": config.evaluate.max_items, "not_scored": not_scored(folders.get("evaluations")),
            "projections": baselines.projection_warnings(ev_dir)}


def not_scored(evaluate_dir: Path | str | None) -> dict[str, list[tuple[list[str], list[str]]]]:
    """``{reason: [(models, benchmarks)]}``: what the evaluations left out (``not_applicable`` in their aggregate:
    a benchmark an arm cannot take, or one ``evaluate.arm_benchmarks`` leaves out), models with the same benchmarks
    together, for the caveats."""
    found: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for (_target, model), folder in sorted(evaluation_dirs(evaluate_dir).items(), key=lambda kv: _model_rank(kv[0][1])):
        try:
            skipped = read_json(folder / L.AGGREGATE_FILE).get("not_applicable") or {}
        except (InputError, AttributeError):
            continue
        by_reason: dict[str, list[str]] = {}
        for bench, why in skipped.items():
            by_reason.setdefault(str(why), []).append(bench)
        for why, benches in by_reason.items():
            models = found.setdefault((why, tuple(benches)), [])
            if arm_label(model) not in models:  # one entry per model, whatever its targets
                models.append(arm_label(model))
    out: dict[str, list[tuple[list[str], list[str]]]] = {}
    for (why, benches), models in found.items():
        out.setdefault(why, []).append((models, list(benches)))
    return out


def build(config: Config, folders: Mapping[str, Path], out: Path) -> Report:
    """Read the run and compute everything the report shows (its curves and histograms drawn into ``out``)."""
    seeds = list(config.train.seeds)
    every_seed = collect_metrics(folders["finetune"])
    df = first_seed(every_seed, seeds)
    ev_dir = folders.get("evaluations") or folders.get("posthoc")  # the post-hoc arms' evaluations live there too
    final = evaluate_metrics(ev_dir, seeds)
    ev = evidence.collect(config, {**folders, "evaluations": ev_dir} if ev_dir else folders, every_seed)
    missing = baselines.unavailable(ev_dir)  # published checkpoints that could not be loaded, and why
    t1, t2 = table1(df, final, {k: missing.get(k) for k in baselines.posthoc_dirs(ev_dir)}), table2(final)
    t2 = extrinsic.with_marks(t2, extrinsic.read_deviations(evaluation_dirs(folders.get("evaluations"), seeds)))
    out.mkdir(parents=True, exist_ok=True)
    run_dir = folders["finetune"].parent
    n_items = setup.item_counts(folders.get("evaluations"), folders["finetune"])
    r = Report(run_dir, t1, t2, ev, registry.collect(config, folders.get("registrations")),
               generated.collect(folders.get("augment"), folders.get("entropy"), folders.get("filtered"), out,
                                 seed=config.run.seed),
               setup.markdown(config, folders, run_dir, n_items), n_items, _facts(config, folders))
    r.published, r.decontamination = (config, baselines.published_values(config)), baselines.decontamination(folders)
    r.judged, r.neutral = _judged(config), neutral.markdown(neutral.collect(run_dir))
    r.wino = choice.collect(final, evaluation_dirs(folders.get("evaluations"), seeds), config.evaluate.bootstrap)
    r.study = dose.collect(config, ev, folders["finetune"])
    dose.plot(r.study, out, arm_label)
    r.curves = plot_curves(df, out, ev.level)
    r.histograms = plot_next_token(next_token_aggregates(folders.get("evaluations"), seeds), out)
    return r


def _write_tables(r: Report, out: Path) -> dict[str, Path]:
    outputs: dict[str, Path] = {"table1": out / "table1.csv"}
    r.t1.to_csv(outputs["table1"], index=False)
    if r.ev.pairs:
        outputs["comparisons"] = out / "comparisons.csv"
        evidence.comparisons_frame(r.ev).to_csv(outputs["comparisons"], index=False)
    if not r.t2.empty:
        outputs["table2"] = out / "table2.csv"
        r.t2.to_csv(outputs["table2"], index=False)
    if r.study:
        outputs["verdicts"] = out / "verdicts.csv"
        dose.frame(r.study).to_csv(outputs["verdicts"], index=False)
    if r.wino is not None and r.wino.values:
        outputs["winogender_winobias"] = out / "winogender_winobias.csv"
        choice.frame(r.wino).to_csv(outputs["winogender_winobias"], index=False)
    return outputs


def images(markdown_text: str) -> list[str]:
    """The image files a Markdown text shows (``![alt](file)``), in order, each once."""
    return list(dict.fromkeys(re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", markdown_text)))


def run_report(config: Config, inputs: Mapping[str, Path | str], out_dir: Path | str) -> dict[str, Any]:
    """Write the report of a run from the stage table's report inputs: the run's ``finetune`` folder (required),
    its ``evaluations`` and ``registrations`` folders (when those steps ran), ``augment``, ``entropy``, ``filtered``."""
    if "finetune" not in inputs:
        raise InputError("run_report needs inputs={'finetune': <run>/finetune, ...} (the stage table's report inputs).")
    folders = {k: Path(v) for k, v in inputs.items()}
    out = Path(out_dir)
    from ..steps import Counts, recorder

    rec = recorder(out)
    r = build(config, folders, out)
    outputs = _write_tables(r, out)
    text = render_markdown(r)
    shown = [out / name for name in images(text)]
    if "md" in config.report.formats:
        outputs["markdown"] = write_text(out / L.REPORT_FILE, text)
    if "html" in config.report.formats:
        outputs["html"] = write_text(out / "report.html", render_html(text, f"Context-CDA report: {r.run_dir.name}"))
    table = [{k: (None if v != v else v) for k, v in row.items()} for row in r.t1.to_dict("records")]
    summary = {"run_dir": str(r.run_dir), "rows": len(r.t1), "plots": [p.name for p in shown],
               "decontamination": r.decontamination,
               "table1": table, "files": {k: str(v) for k, v in outputs.items()},
               "table2": [{k: (None if v != v else v) for k, v in row.items()} for row in r.t2.to_dict("records")]}
    if config.tracking.enabled:
        summary["mlflow_run_id"] = _log_report(config, [*shown, *outputs.values()])
    outputs["summary"] = write_json(out / "summary.json", summary)
    rec.finish(Counts(items_in=len(r.t1), out=len(r.t1)), outputs=outputs, summary=summary)
    return summary


def _judged(config: Config) -> str:
    """The sentence that says which attribute the run debiased and which benchmark subsets judge it."""
    from ..attributes import get
    from ..evaluate.data import CROWS_ALIASES

    a = get(config.run.attribute)
    bt = config.evaluate.bias_type
    crows = CROWS_ALIASES.get(bt, bt)  # the subset the evaluation read
    return (f"Attribute debiased: **{a.name}** (run.attribute). StereoSet and CrowS-Pairs, and with them the "
            f"promotion gate, judge the `{bt}` subset (CrowS-Pairs: `{crows}`).")


def _log_report(config: Config, files: list[Path]) -> str | None:
    """The report, every image it shows and every table, to the pipeline's MLflow run under ``report/``."""
    from ..tracking import tracker_for

    tracker = tracker_for(config)
    for p in dict.fromkeys(files):
        if Path(p).is_file():
            tracker.log_artifact(p, "report")
    return tracker.run_id


__all__ = [
    "Report", "build", "collect_metrics", "evaluate_metrics", "images", "next_token_aggregates", "plot_curves",
    "plot_next_token", "render_html", "render_markdown", "run_report", "table1", "table2",
]
