"""The report's "Setup" section, generated from the run: what was trained and measured, exactly.

Everything is read from the steps' ``manifest.json`` files (what ran), falling back on the configuration the
report is written with (what would run) where a step left no record:

* **models**: every target, the generator and the judges, with their exact source and the precision of their
  weights (:func:`context_cda.models.info.describe`: e.g. a 4-bit GGUF dequantized to float32);
* **data at each stage**: the corpus and its size, the rows in and out of ingest, CDA, validation, augment,
  the sample step (drawn once for every target), each target's entropy, the filter and each arm's fine-tuning corpus (texts, sequences, the token budget);
* **training**: epochs, batches, learning rate, sequence length, precision, LoRA, seeds;
* **evaluation**: each benchmark's items as scored, the bias type, the CrowS scoring mode, the bootstrap;
* **what was sampled or cut**: every setting that made the run use part of its data, with its value;
* **time per step**: each stage's steps, their summed seconds and share, from the manifests' ``timings``, and the
  run's wall time from its first step's start to its last step's end (the report itself not counted).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from .. import layout as L
from ..errors import InputError
from ..io import MANIFEST, read_json


def _manifest(folder: Path | None) -> dict[str, Any]:
    if folder is None:
        return {}
    try:
        data = read_json(Path(folder) / MANIFEST)
    except InputError:
        return {}
    return data if isinstance(data, dict) else {}


def summary_of(folder: Path | None) -> dict[str, Any]:
    return dict(_manifest(folder).get("summary") or {})


def _steps(parent: Path | None, step: str) -> list[tuple[dict[str, str], Path]]:
    return list(L.discover(parent, step)) if parent is not None and Path(parent).is_dir() else []


def _n(v: Any) -> str:
    return "–" if v is None else f"{v:,}" if isinstance(v, int) else str(v)


# ------------------------------------------------------------------------------------------------ models


def models_lines(config: Any, folders: Mapping[str, Path]) -> list[str]:
    """One bullet per model the run used."""
    from ..models.info import describe

    out = []
    for target, ref in config.run.targets.items():
        out.append(f"- **Target `{target}`** — {describe(ref).text()}.")
    aug = summary_of(folders.get("augment"))
    smp = summary_of(_sample_dir(folders))
    gen = (aug.get("backend", config.augment.backend), aug.get("gen_model", config.augment.model))
    sampler = (smp.get("generator_backend"), smp.get("generator_model"))
    sampler = sampler if all(sampler) else config.sample_generator()
    shared = sampler == gen
    out.append(_generator_line("augment, and the sample step's rephrasings" if shared else "augment", *gen))
    if not shared:
        out.append(_generator_line("the sample step's rephrasings", *sampler))
    e = config.entropy
    judge = f"{e.judge} judge" + (f" (cosine ≥ {e.embedding_threshold:g})" if e.judge == "embedding" else "")
    out.append(f"- **Entailment judge** (semantic-entropy clusters; {judge}) — {describe(e.judge_model).text()}.")
    out.append(_meaning_line(config, aug))
    return out


def _generator_line(used_by: str, backend: str, model: str) -> str:
    from ..models.info import describe

    if backend == "openai":
        return (f"- **Generator** ({used_by}) — `{model}` served by an OpenAI-compatible server (its precision is "
                "the server's).")
    return f"- **Generator** ({used_by}; backend {backend}) — {describe(model).text()}."


def _sample_dir(folders: Mapping[str, Path]) -> Path | None:
    """The sample step's folder: an input of the report, else next to the augment step's in the run folder."""
    if folders.get("sample"):
        return Path(folders["sample"])
    aug = folders.get("augment")
    return Path(aug).parent / L.FOLDERS["sample"] if aug else None


def _meaning_line(config: Any, aug: Mapping[str, Any]) -> str:
    from ..augment.checks.meaning import judge_model_ref
    from ..errors import CCDAError
    from ..models.info import describe

    r = config.augment.review
    meaning = (aug.get("review") or {}).get("meaning", r.meaning)
    if meaning in (None, "off"):
        return "- **Review meaning judge** (augment) — off: the review checks form, names, numbers and genders only."
    try:
        ref = judge_model_ref(config)
    except CCDAError as e:
        return f"- **Review meaning judge** (augment; {meaning}) — model not resolvable ({e})."
    rule = f"cosine ≥ {r.meaning_threshold:g}" if meaning == "embedding" else r.meaning_rule
    return f"- **Review meaning judge** (augment; {meaning}, {rule}) — {describe(ref).text()}."


# ------------------------------------------------------------------------------------------------ data


def _corpus_text(config: Any, ingest: dict[str, Any]) -> str:
    from ..data import datasets as D

    icfg = (_cfg(ingest).get("ingest") or {}) or config.ingest.model_dump(mode="json")
    if icfg.get("path"):
        name = f"the file(s) at `{icfg['path']}`"
    else:
        name = f"`{icfg.get('corpus')}`"
        try:
            name += f" ({D.get(str(icfg.get('corpus'))).description})"
        except InputError:
            pass
    return name


def _cfg(manifest: dict[str, Any]) -> dict[str, Any]:
    return dict(manifest.get("config") or {})


def size_rows(config: Any, folders: Mapping[str, Path], run_dir: Path) -> list[list[str]]:
    """(stage, in, out, what happened) rows, in pipeline order."""
    ing = _manifest(run_dir / L.FOLDERS["ingest"])
    s = dict(ing.get("summary") or {})
    icfg = _cfg(ing).get("ingest") or {}
    rows = [["ingest", f"{_n(s.get('lines'))} lines, {_n(s.get('sentences'))} sentences", _n(s.get("rows_out")),
             f"sentences with a {config.run.attribute} term kept; "
             f"{_why(s.get('rejected_by_reason'))}"
             + (f"; a seeded sample of {icfg['sample_n']}" if icfg.get("sample_n") else "")]]
    c = summary_of(run_dir / L.FOLDERS["cda"])
    if c:
        rows.append(["cda", _n(c.get("rows_in")), _n(c.get("rows_out")),
                     f"{c.get('mode')} swaps ({_n(c.get('swaps'))} words swapped; {_n(c.get('training_texts'))} "
                     "training texts for the CDA arm)"])
    rows += _validation_row(run_dir, "cda")
    a = summary_of(folders.get("augment"))
    if a:
        lim = config.augment.limit
        rows.append(["augment", _n(a.get("items")), _n(a.get("accepted")),
                     f"rephrased by the generator{f' (the first {lim} counterfactuals: augment.limit)' if lim else ''};"
                     f" {_n(a.get('rejected'))} rejected by the review, {_n(a.get('errors'))} errors"])
    rows += _validation_row(run_dir, "augment")
    rows += _sample_rows(config, folders)
    for keys, folder in _steps(folders.get("entropy"), "entropy"):
        e = summary_of(folder)
        rows.append([f"entropy [{keys['target']}]", _n(e.get("items_in")), _n(e.get("scored")),
                     f"the shared samples scored by this target, {e.get('estimator', config.entropy.estimator)} "
                     f"semantic entropy over their clusters; {_n(e.get('rejected'))} rejected"])
    rows += _filter_rows(folders.get("filtered"))
    rows += _finetune_rows(folders.get("finetune"))
    return rows


def _sample_rows(config: Any, folders: Mapping[str, Path]) -> list[list[str]]:
    """The sample step: drawn once for every target (the generator's M rephrasings, reviewed, clustered)."""
    s = summary_of(_sample_dir(folders))
    if not s:
        return []
    lim = config.entropy.limit
    return [["sample", _n(s.get("items_in")), _n(s.get("sampled")),
             f"{s.get('n_samples', config.entropy.n_samples)} rephrasings per item drawn once for every target"
             f"{f' (the first {lim} items: entropy.limit)' if lim else ''}, reviewed and clustered by bidirectional "
             f"entailment ({s.get('judge', config.entropy.judge)} judge, {s.get('judge_calls_per_item', '–')} "
             f"calls per item); {_n(s.get('samples'))} samples kept, {_n(s.get('rejected'))} items rejected, "
             f"{_n(s.get('errors'))} errors"]]


def _why(reasons: Any) -> str:
    if not isinstance(reasons, dict) or not reasons:
        return "none dropped"
    return "dropped: " + ", ".join(f"{k} {_n(v)}" for k, v in reasons.items())


def _validation_row(run_dir: Path, boundary: str) -> list[list[str]]:
    v = summary_of(run_dir / L.FOLDERS[L.BOUNDARY_STEPS[boundary]])
    if not v:
        return []
    return [[f"validate ({boundary})", _n(v.get("rows_in")), _n(v.get("rows_valid")),
             f"{_n(v.get('expectations'))} expectations; {_n(v.get('rows_quarantined'))} rows quarantined"]]


def _filter_rows(filter_dir: Path | None) -> list[list[str]]:
    rows = []
    for target_dir in sorted(Path(filter_dir).iterdir()) if filter_dir and Path(filter_dir).is_dir() else []:
        for kdir in sorted(p for p in target_dir.iterdir() if p.is_dir()):
            f = summary_of(kdir)
            if f:
                kept, dropped = f.get("kept"), f.get("dropped")
                total = kept + dropped if isinstance(kept, int) and isinstance(dropped, int) else None
                rows.append([f"filter [{target_dir.name}, {kdir.name}]", _n(total), _n(kept), _cut_note(f)])
    return rows


def _cut_note(f: Mapping[str, Any]) -> str:
    """What a filter cut dropped: the top k % above its SE cut, or the items at or above a threshold; a cut that
    dropped nothing (k % of a small corpus under one item) says so."""
    k, cut, threshold = f.get("k"), f.get("cut"), f.get("threshold")
    number = (int, float)
    if isinstance(k, number) and not isinstance(k, bool):
        if not isinstance(cut, number) or not f.get("dropped"):
            return f"the highest-entropy {k:g} % dropped: no item ({k:g} % of {_n(f.get('kept'))} is under one)"
        return f"the highest-entropy {k:g} % dropped (SE above {cut:.3f})"
    if isinstance(threshold, number) and not isinstance(threshold, bool):
        return f"items with SE at or above {threshold:g} dropped"
    return "filtered"


def _finetune_rows(finetune_dir: Path | None) -> list[list[str]]:
    rows = []
    for keys, folder in _steps(finetune_dir, "finetune"):
        f = summary_of(folder)
        if not f:
            continue
        rows.append([f"finetune [{keys['target']}, {keys['arm']}, seed {keys['seed']}]",
                     f"{_n(f.get('texts'))} texts, {_n(f.get('tokens_available'))} tokens",
                     f"{_n(f.get('sequences'))} sequences, {_n(f.get('tokens'))} tokens",
                     f"cut to the token budget of {_n(f.get('token_budget'))} (the same for every arm of its budget "
                     f"group); {_n(f.get('epochs'))} epochs, {_n(f.get('steps'))} optimizer steps"])
    return rows


# ------------------------------------------------------------------------------------------------ training, eval


def training_lines(config: Any, folders: Mapping[str, Path]) -> list[str]:
    t = config.train
    first = next(iter(_steps(folders.get("finetune"), "finetune")), None)
    tcfg = (_cfg(_manifest(first[1])).get("train") if first else None) or t.model_dump(mode="json")
    lora = tcfg.get("lora") or {}
    return [
        # the run's arms and seeds: a fine-tuning's manifest holds its own arm and seed only
        f"- Arms: {', '.join(t.arms)} (and vanilla, the target untouched, as epoch 0); "
        f"seeds {', '.join(map(str, t.seeds))}.",
        f"- {tcfg.get('epochs')} epoch{'' if tcfg.get('epochs') == 1 else 's'}, batch {tcfg.get('batch_size')} × "
        f"{tcfg.get('grad_accum')} accumulation, "
        f"learning rate {tcfg.get('learning_rate')}, sequences cut to {tcfg.get('max_seq_len')} tokens, precision "
        f"{tcfg.get('precision')} (auto: bf16 on a GPU that has it, else fp32), "
        + (f"LoRA r={lora.get('r')}" if lora.get("enabled") else "all weights trained") + ".",
        f"- Token budget: {tcfg.get('token_budget') or 'the smallest arm’s token count in each budget group'} for "
        "every arm of the group (the swapping arms: CDA, Context-CDA, dropout; apart, the neutral arms).",
        *_software(first[1] if first else None),
    ]


def _software(folder: Path | None) -> list[str]:
    """The library versions the fine-tuning ran with (its manifest's record)."""
    versions = _manifest(folder).get("versions") or {}
    shown = ", ".join(f"{k} {v}" for k, v in versions.items() if v)
    return [f"- Software (as the fine-tuning recorded it): {shown}."] if shown else []


def evaluation_lines(config: Any, folders: Mapping[str, Path], n_items: Mapping[str, int]) -> list[str]:
    ev = config.evaluate
    b = ev.bootstrap
    items = ", ".join(f"{k} {v:,}" for k, v in n_items.items()) or "–"
    return [
        f"- Benchmarks: {', '.join(ev.benchmarks)}; bias type {ev.bias_type}; CrowS-Pairs scoring {ev.crows_mode}.",
        f"- Items scored per model: {items}."
        + (f" evaluate.max_items = {ev.max_items}: only the first {ev.max_items} items of StereoSet, CrowS-Pairs "
           "and the next-token contexts, a small sample: intervals are wide." if ev.max_items else ""),
        f"- Intervals: seeded bootstrap ({b.resamples} resamples, seed {b.seed}, {b.level:.0%}); StereoSet resampled "
        "within target terms, CrowS over pairs; differences paired on the same items.",
    ]


def sampled_lines(config: Any) -> list[str]:
    """Every setting that made the run use part of its data (seeded samples and prefixes), with its value."""
    c, out = config, []
    if c.ingest.sample_n:
        out.append(f"ingest.sample_n = {c.ingest.sample_n} (a sample seeded with run.seed = {c.run.seed})")
    if c.augment.limit:
        out.append(f"augment.limit = {c.augment.limit} (the first counterfactuals, in input order)")
    if c.entropy.limit:
        out.append(f"entropy.limit = {c.entropy.limit}")
    if c.evaluate.max_items:
        out.append(f"evaluate.max_items = {c.evaluate.max_items} (the first items of each per-epoch benchmark)")
    for sec in ("glue", "biasbios", "stsb"):
        s = getattr(c.evaluate, sec)
        parts = [f"{k} = {getattr(s, k)}" for k in ("max_train", "max_eval", "max_pairs") if getattr(s, k, None)]
        if parts:
            out.append(f"evaluate.{sec}: " + ", ".join(parts) + " (seeded samples)")
    out.append("the token budget cut of each arm's corpus (a shuffle seeded with run.seed)")
    return out


def item_counts(evaluate_dir: Path | None, finetune_dir: Path | None) -> dict[str, int]:
    """Items per benchmark as the evaluate steps scored them, else as the per-epoch evaluation of the first
    fine-tuning step did (its epoch-0 predictions)."""
    counts: dict[str, int] = {}
    for _, folder in _steps(evaluate_dir, "evaluate-vanilla") + _steps(evaluate_dir, "evaluate"):
        try:
            agg = read_json(folder / L.AGGREGATE_FILE)
        except InputError:
            continue
        for k, v in (agg.get("counts") or {}).items():
            if k.endswith("_scored") and isinstance(v, int):
                counts.setdefault(k.removesuffix("_scored"), v)
    if counts:
        return counts
    import pandas as pd

    for _, folder in _steps(finetune_dir, "finetune")[:1]:
        epochs = L.epoch_predictions_dirs(folder)
        for p in sorted(epochs[0].glob(f"*/{L.PREDICTIONS_FILE}")) if epochs else []:
            counts[p.parent.name] = len(pd.read_parquet(p))
    return counts


def markdown(config: Any, folders: Mapping[str, Path], run_dir: Path, n_items: Mapping[str, int]) -> list[str]:
    """The section's Markdown lines."""
    rows = size_rows(config, folders, run_dir)
    lines = ["## Setup", "", "Generated from the run's manifests.", "", "**Models**", "",
             *models_lines(config, folders), "", "**Data at each stage**", "",
             f"Corpus: {_corpus_text(config, _manifest(run_dir / L.FOLDERS['ingest']))}.", "",
             "| Stage | In | Out | What happened |", "|---|---:|---:|---|",
             *(f"| {' | '.join(str(c).replace('|', chr(92) + '|') for c in r)} |" for r in rows), "",
             "**Training**", "", *training_lines(config, folders), "",
             "**Evaluation**", "", *evaluation_lines(config, folders, n_items), "",
             "**Sampled or cut**: " + "; ".join(sampled_lines(config)) + ".", "",
             f"**Seeds**: run.seed = {config.run.seed} (the corpus sample, CDS, the M samples, the token-budget cut; the augment generator: augment.sampling.seed), train.seeds = "
             f"{', '.join(map(str, config.train.seeds))}, bootstrap seed {config.evaluate.bootstrap.seed}.", "",
             *time_lines(run_dir)]
    return lines


# ------------------------------------------------------------------------------------------- time per step


def step_times(run_dir: Path) -> list[dict[str, Any]]:
    """Every finished step under ``run_dir``: its stage, name, seconds (``timings.total``), start and end, in the
    order they started. A manifest without timings (written by older code) is left out."""
    steps = []
    for path in Path(run_dir).rglob(MANIFEST):
        m = _manifest(path.parent)
        total = (m.get("timings") or {}).get("total")
        if m.get("stage") == "report" or not isinstance(total, (int, float)):
            continue
        try:
            start, end = datetime.fromisoformat(m["started"]), datetime.fromisoformat(m["finished"])
        except (KeyError, TypeError, ValueError):
            continue
        steps.append({"stage": m.get("stage") or path.parent.name, "name": m.get("name") or path.parent.name,
                      "seconds": float(total), "start": start, "end": end})
    return sorted(steps, key=lambda s: s["start"])


def time_lines(run_dir: Path) -> list[str]:
    """The "Time per step" table: a row per stage in the order the stages started (steps, seconds, share)."""
    steps = step_times(run_dir)
    if not steps:
        return []
    by_stage: dict[str, list[float]] = {}  # stage -> its steps' seconds, stages in the order they started
    for s in steps:
        by_stage.setdefault(s["stage"], []).append(s["seconds"])
    total = sum(s["seconds"] for s in steps)
    wall = (max(s["end"] for s in steps) - steps[0]["start"]).total_seconds()
    rows = [f"| {stage} | {len(secs)} | {sum(secs):,.1f} | {100 * sum(secs) / (total or 1.0):.1f} % |"
            for stage, secs in by_stage.items()]
    return ["**Time per step** (from the manifests; a step finished earlier and skipped by this run keeps its "
            "first time)", "", "| Stage | Steps | Seconds | Share |", "|---|---:|---:|---:|", *rows,
            f"| all steps | {len(steps)} | {total:,.1f} | 100 % |", "",
            f"Wall time from the first step's start to the last step's end: {wall:,.0f} s.", ""]
