"""The report: the paper's Table 1 and its per-epoch curves, from the finetune ``metrics.csv`` files of a run, and
Table 2 (extrinsic bias, GLUE, next-token balance) with next-token histograms where the evaluate stage ran.

``run_report(config, inputs, RUN_DIR/report)`` (inputs: the stage table's, :mod:`context_cda.stages`) writes ``report.md``, ``report.html`` (formats from
``report.formats``), ``table1.csv`` and one PNG per (target, metric): SS, CS, LMS and ICAT against the epoch, one
line per arm (epoch 0 = the vanilla model), the ideal 50 marked for SS and CS. With tracking on, the PNGs and the
report are logged to the pipeline's MLflow run.

Table 1 lists, per target, the vanilla model (epoch 0) and each arm after its last evaluated epoch; where the
evaluate steps wrote their ``aggregate.json``, their (full-benchmark) metrics are used. With several training
seeds, the first of ``train.seeds`` gives the row, followed by one row per seed and their mean ± std. Cells carry
their bootstrap intervals and significance marks, and a section of paired comparisons (arm vs vanilla, arm vs
arm) follows (:mod:`.evidence`; ``comparisons.csv``).
"""

from __future__ import annotations

import html
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import layout as L
from ..errors import InputError
from ..io import StageRecorder, read_json, write_json, write_text
from . import baselines, choice, evidence, extrinsic, generated, neutral

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
        df = pd.read_csv(p) if p.is_file() else pd.DataFrame()
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
        paths.append(plot_histograms(labelled, out_dir / f"{_safe(target)}-next-token.png",
                                     f"{target}: male tokens in the top-k gender tokens per context"))
    return paths


def _metric_values(row) -> dict[str, float | None]:
    import pandas as pd

    return {m: (float(row[m]) if m in row and pd.notna(row[m]) else None) for m in [*METRICS, *_CI_COLUMNS]}


def _arm_order(arms) -> list[str]:
    known = [a for a in ARM_LABELS if a in set(arms)]
    return known + sorted(a for a in arms if a not in ARM_LABELS)


def plot_curves(df: pd.DataFrame, out_dir: Path) -> list[Path]:
    """One PNG per (target, metric): metric vs epoch, one line per arm, 50 marked for SS and CS."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    paths = []
    for target, tdf in df.groupby("target", sort=True):
        for metric, (title, ideal) in METRICS.items():
            if metric not in tdf.columns or tdf[metric].isna().all():
                continue
            fig, ax = plt.subplots(figsize=(5, 3.5), dpi=110)
            for arm in _arm_order(tdf["arm"].unique()):
                adf = tdf[(tdf["arm"] == arm)].dropna(subset=[metric]).sort_values("epoch")
                if not adf.empty:
                    ax.plot(adf["epoch"], adf[metric], marker="o", label=arm_label(arm))
            if ideal is not None:
                ax.axhline(ideal, color="grey", linestyle="--", linewidth=1, label=f"ideal ({ideal:g})")
            ax.set_xlabel("epoch (0 = vanilla)")
            ax.set_ylabel(title)
            ax.set_title(f"{target}: {title}")
            ax.xaxis.get_major_locator().set_params(integer=True)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
            fig.tight_layout()
            path = out_dir / f"{_safe(target)}-{title.lower()}.png"
            fig.savefig(path)
            plt.close(fig)
            paths.append(path)
    return paths


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(name))


def _fmt(v: Any) -> str:
    return "–" if v is None or v != v else f"{float(v):.2f}"


def _promotions(register_dir: Path | None) -> list[dict[str, Any]]:
    out = []
    for p in sorted(Path(register_dir).glob(f"*/*/{L.PROMOTION_FILE}")) if register_dir else []:
        try:
            d = read_json(p)
        except InputError:
            continue
        out.append({"target": p.parent.parent.name, "arm": p.parent.name, "version": d.get("version"),
                    "promote": d.get("promote"), "reasons": d.get("reasons", [])})
    return out


def _fmt_metric(v: Any) -> str:
    """Percent-scale values with 2 decimals, fractions with 3."""
    if v is None or v != v:
        return "–"
    return f"{float(v):.2f}" if abs(float(v)) >= 1.5 else f"{float(v):.3f}"


def render_markdown(
    t1: pd.DataFrame, plots: list[Path], promotions: list[dict[str, Any]], run_dir: Path,
    t2: pd.DataFrame | None = None, ev: evidence.Evidence | None = None, published: tuple | None = None,
    decontamination: list[dict[str, Any]] | None = None,
) -> str:
    lines = [f"# Context-CDA report: `{run_dir.name}`", "",
             "## Table 1: intrinsic bias after debiasing", "",
             "SS (StereoSet stereotype score) and CS (CrowS-Pairs) are best at 50; LMS (language modelling score) "
             "and ICAT are better higher. Every row is measured here, by the same scorer on the same items: the "
             "vanilla target, the fine-tuned arms (CDA, Context-CDA, dropout) after their last epoch, the post-hoc "
             "arms applied to the vanilla model (INLP, SentenceDebias, Self-Debias: epoch –) and published "
             "checkpoints. Rows labelled *published (paper)* quote the paper's Table 1 (another scorer, other "
             "items): context, not evidence.", ""]
    lines += evidence.table1_markdown(t1, ev, list(METRICS), arm_label, published)
    lines += evidence.markdown(ev, sorted(map(str, t1["target"].unique())), arm_label) if ev else []
    if t2 is not None and not t2.empty:
        cols = [c for c in t2.columns if c in EXTRINSIC]
        lines += ["## Table 2: extrinsic bias, downstream quality and next-token balance", "",
                  extrinsic.NOTE, ""]
        for target, tdf in t2.groupby("target", sort=True):
            lines += [f"### {target}", "", "| Model | " + " | ".join(EXTRINSIC[c] for c in cols) + " |",
                      "|---|" + "---:|" * len(cols)]
            for _, r in tdf.iterrows():
                lines.append(f"| {arm_label(r['model'])} | " + " | ".join(extrinsic.cell(t2, r, c) for c in cols) + " |")
            lines += ["", *extrinsic.notes(t2, str(target), label=arm_label)]
    if published is not None:
        lines += baselines.decontamination_markdown(decontamination or [], published[0])
    if promotions:
        lines += ["## Registry decisions", "", "| Target | Arm | Version | Decision | Reasons |", "|---|---|---:|---|---|"]
        for p in promotions:
            dec = "champion" if p["promote"] else "candidate only"
            lines.append(f"| {p['target']} | {p['arm']} | {p['version']} | {dec} | {'; '.join(p['reasons']).replace('|', chr(92) + '|')} |")
        lines.append("")
    if plots:
        lines += ["## Figures", "",
                  "Per-epoch curves (epoch 0 = vanilla) and, where the evaluate stage ran, next-token histograms.", ""]
        lines += [f"![{p.stem}]({p.name})" for p in plots]
        lines.append("")
    return "\n".join(lines)


def render_html(
    t1: pd.DataFrame, plots: list[Path], promotions: list[dict[str, Any]], run_dir: Path,
    t2: pd.DataFrame | None = None, ev: evidence.Evidence | None = None,
) -> str:
    e = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>Context-CDA report: {e(run_dir.name)}</title>",
        "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto}table{border-collapse:collapse;"
        "margin-bottom:1.5em}td,th{border:1px solid #ccc;padding:4px 10px}td.n{text-align:right}"
        "img{max-width:48%;margin:4px}</style></head><body>",
        f"<h1>Context-CDA report: <code>{e(run_dir.name)}</code></h1>",
        "<h2>Table 1: intrinsic bias after debiasing</h2>",
        "<p>SS and CS are best at 50; LMS and ICAT are better higher.</p>",
    ]
    parts += evidence.table1_html(t1, ev, list(METRICS), [t for t, _ in METRICS.values()], arm_label)
    parts += evidence.html_section(ev, sorted(map(str, t1["target"].unique())), arm_label) if ev else []
    if t2 is not None and not t2.empty:
        cols = [c for c in t2.columns if c in EXTRINSIC]
        parts.append("<h2>Table 2: extrinsic bias, downstream quality and next-token balance</h2>"
                     f"<p>{e(extrinsic.NOTE)}</p>")
        for target, tdf in t2.groupby("target", sort=True):
            parts.append(f"<h3>{e(str(target))}</h3><table><tr><th>Model</th>"
                         + "".join(f"<th>{e(EXTRINSIC[c])}</th>" for c in cols) + "</tr>")
            for _, r in tdf.iterrows():
                parts.append(f"<tr><td>{e(arm_label(r['model']))}</td>"
                             + "".join(f"<td class='n'>{extrinsic.cell(t2, r, c, 'html')}</td>" for c in cols) + "</tr>")
            parts += ["</table>", *extrinsic.notes(t2, str(target), "html", arm_label)]
    if promotions:
        parts.append("<h2>Registry decisions</h2><table><tr><th>Target</th><th>Arm</th><th>Version</th>"
                     "<th>Decision</th><th>Reasons</th></tr>")
        for p in promotions:
            dec = "champion" if p["promote"] else "candidate only"
            parts.append(f"<tr><td>{e(p['target'])}</td><td>{e(p['arm'])}</td><td>{e(str(p['version']))}</td>"
                         f"<td>{dec}</td><td>{e('; '.join(p['reasons']))}</td></tr>")
        parts.append("</table>")
    if plots:
        parts.append("<h2>Figures</h2><p>Per-epoch curves (epoch 0 = vanilla) and, where the evaluate stage ran, "
                     "next-token histograms.</p><div>")
        parts += [f"<img src='{e(p.name)}' alt='{e(p.stem)}'>" for p in plots]
        parts.append("</div>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def run_report(config: Config, inputs: Mapping[str, Path | str], out_dir: Path | str) -> dict[str, Any]:
    """Write the report of a run from the stage table's report inputs: the run's ``finetune`` folder (required),
    its ``evaluations`` and ``registrations`` folders (when those steps ran), ``augment``, ``entropy``, ``filtered``."""
    if "finetune" not in inputs:
        raise InputError("run_report needs inputs={'finetune': <run>/finetune, ...} (the stage table's report inputs).")
    folders = {k: Path(v) for k, v in inputs.items()}
    run_dir, out, seeds = folders["finetune"].parent, Path(out_dir), list(config.train.seeds)
    rec = StageRecorder("report", out, {"report": config.report.model_dump(mode="json")},
                        {k: v for k, v in folders.items() if v.exists()})
    every_seed = collect_metrics(folders["finetune"])
    df = first_seed(every_seed, seeds)
    ev_dir = folders.get("evaluations") or folders.get("posthoc")
    final = evaluate_metrics(ev_dir, seeds)
    ev = evidence.collect(config, {**folders, "evaluations": ev_dir} if ev_dir else folders, every_seed)
    missing = baselines.unavailable(ev_dir)
    posthoc = {k: missing.get(k) for k in baselines.posthoc_dirs(ev_dir)}
    t1, t2 = table1(df, final, posthoc), table2(final)
    published, decon = baselines.published_values(config), baselines.decontamination(folders)
    t2 = extrinsic.with_marks(t2, extrinsic.read_deviations(evaluation_dirs(folders.get("evaluations"), seeds)))
    out.mkdir(parents=True, exist_ok=True)
    plots = plot_curves(df, out) + plot_next_token(next_token_aggregates(folders.get("evaluations"), seeds), out)
    promotions = _promotions(folders.get("registrations"))
    outputs: dict[str, Path] = {"table1": out / "table1.csv"}
    t1.to_csv(out / "table1.csv", index=False)
    if ev.pairs:
        outputs["comparisons"] = out / "comparisons.csv"
        evidence.comparisons_frame(ev).to_csv(outputs["comparisons"], index=False)
    if not t2.empty:
        outputs["table2"] = out / "table2.csv"
        t2.to_csv(out / "table2.csv", index=False)
    gen = generated.collect(folders.get("augment"), folders.get("entropy"), folders.get("filtered"), out)
    wino = choice.collect(final, evaluation_dirs(folders.get("evaluations"), seeds), config.evaluate.bootstrap)
    if wino.values:
        outputs["winogender_winobias"] = out / "winogender_winobias.csv"
        choice.frame(wino).to_csv(outputs["winogender_winobias"], index=False)
    judged = _judged(config)
    if "md" in config.report.formats:
        text = render_markdown(t1, plots, promotions, run_dir, t2, ev, (config, published), decon)
        head, sep, rest = text.partition("## Table 1")
        text = head + judged + "\n\n" + sep + rest if sep else judged + "\n\n" + text
        sections = [*choice.markdown(wino, arm_label, _model_rank), *neutral.markdown(neutral.collect(run_dir))]
        outputs["markdown"] = write_text(out / L.REPORT_FILE, text + "\n".join(sections) + generated.markdown(gen))
    if "html" in config.report.formats:
        page = render_html(t1, plots, promotions, run_dir, t2, ev).replace(
            "<h2>Table 1", f"<p>{html.escape(judged)}</p><h2>Table 1", 1)
        page = _before_body_end(page, choice.to_html(wino, arm_label, _model_rank))
        outputs["html"] = write_text(out / "report.html", generated.into_html(page, gen))
    table = [{k: (None if v != v else v) for k, v in r.items()} for r in t1.to_dict("records")]
    summary = {"run_dir": str(run_dir), "rows": len(t1), "plots": [p.name for p in plots], "decontamination": decon,
               "table1": table, "files": {k: str(v) for k, v in outputs.items()},
               "table2": [{k: (None if v != v else v) for k, v in r.items()} for r in t2.to_dict("records")]}
    if config.tracking.enabled:
        summary["mlflow_run_id"] = _log_report(config, plots, outputs)
    write_json(out / "summary.json", summary)
    rec.finish({"rows": len(t1), "plots": len(plots)}, outputs=outputs, summary=summary)
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


def _before_body_end(page: str, section: str) -> str:
    if not section:
        return page
    head, sep, tail = page.rpartition("</body>")
    return f"{head}{section}\n{sep}{tail}" if sep else page + section


def _log_report(config: Config, plots: list[Path], outputs: Mapping[str, Path]) -> str | None:
    from ..tracking import tracker_for

    tracker = tracker_for(config)
    for p in plots:
        tracker.log_artifact(p, "report")
    for key in ("markdown", "html", "table1", "table2", "winogender_winobias"):
        if key in outputs:
            tracker.log_artifact(outputs[key], "report")
    return tracker.run_id


__all__ = [
    "collect_metrics", "evaluate_metrics", "next_token_aggregates", "plot_curves", "plot_next_token", "render_html",
    "render_markdown", "run_report", "table1", "table2",
]
