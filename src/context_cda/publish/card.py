"""A registered version's Hugging Face model card, written from its facts (:mod:`.facts`), never by hand.

* ``README.md``: YAML metadata (licence, base model, tags, ``model-index`` with every metric; a value with its
  bootstrap interval is the text ``57.75 [95% CI 55.10, 60.30]``, which the Hub shows as given), then the card:
  model details, training data and procedure, evaluation (each metric with its interval, vanilla's, and the paired
  difference from vanilla), the promotion gate's verdict and reasons, bias, risks and limitations, datasets and
  licences, provenance;
* ``.eval_results/<benchmark>.yaml``: the Hub's evaluation-results format (dataset id, task id, value, source,
  notes; :class:`huggingface_hub.EvalResultEntry`), one file per benchmark whose dataset the Hub holds.

huggingface_hub (installed with transformers) writes and validates the metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PIPELINE_TAGS = {"causal": "text-generation", "masked": "fill-mask", "seq2seq": "text2text-generation"}
UNKNOWN_LICENSE = "unknown"


def _f(v: Any, digits: int = 2) -> str:
    return "–" if v is None or v != v else f"{float(v):.{digits}f}"


def interval_text(value: float, ci: list[float] | None, level: float) -> str:
    """``57.75 [95% CI 55.10, 60.30]`` (the value alone when it has no interval)."""
    if not ci:
        return _f(value)
    return f"{_f(value)} [{level:.0%} CI {_f(ci[0])}, {_f(ci[1])}]"


def _cell(value: Any, ci: list[float] | None) -> str:
    return "–" if value is None else (f"{_f(value)} [{_f(ci[0])}, {_f(ci[1])}]" if ci else _f(value))


def _diff(d: Mapping[str, Any] | None) -> str:
    if not d or d.get("diff") is None:
        return "–"
    lo, hi = d.get("ci") or (None, None)
    p = d.get("p")
    ptext = "" if p is None else (", p<0.001" if p < 0.001 else f", p={p:.3f}")

    def signed(v: Any) -> str:
        return "–" if v is None else f"{v:+.2f}"

    return f"{signed(d['diff'])} [{signed(lo)}, {signed(hi)}]{ptext}"


def metrics_of(facts: Mapping[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(benchmark, metric name, its facts) of every metric the card reports, in the evaluation's order."""
    return [(b, name, m) for b, bench in facts["evaluation"]["benchmarks"].items()
            for name, m in bench["metrics"].items()]


def license_of(facts: Mapping[str, Any], override: str | None = None) -> str | None:
    return override or facts["base"].get("license")


# ------------------------------------------------------------------------------------------------ metadata


def dataset_of(facts: Mapping[str, Any], bench: str, metric: str) -> tuple[str, str]:
    """(Hub dataset id, or the registry's name when the Hub holds none; a readable name) of the dataset a metric was
    measured on: of the benchmark's datasets, the one its name names (GLUE's ``glue-rte`` for ``glue_rte_acc``),
    else the first."""
    rows = [d for d in facts["datasets"] if bench in d["used_by"].split(", ")]
    if not rows:
        return bench, bench
    parts = set(metric.split("_"))
    d = next((r for r in rows if r["name"].rsplit("-", 1)[-1] in parts), rows[0])
    return d.get("hub_id") or d["name"], d.get("description") or d["name"]


def eval_results(facts: Mapping[str, Any]) -> list:
    """``model-index`` entries (:class:`huggingface_hub.EvalResult`): every metric, its interval in the value. The
    Hub groups a model's results by task and dataset, so the task's name lists the benchmarks measured on it."""
    from huggingface_hub import EvalResult

    ev = facts["evaluation"]
    task = PIPELINE_TAGS.get(facts.get("family") or "", "text-generation")
    measured = [(bench, name, m, dataset_of(facts, bench, name)) for bench, name, m in metrics_of(facts)]
    on: dict[str, list[str]] = {}
    for bench, _, _, (dataset_id, _) in measured:
        if bench not in on.setdefault(dataset_id, []):
            on[dataset_id].append(bench)
    out = []
    for _, name, m, (dataset_id, dataset_name) in measured:
        value = interval_text(m["value"], m["ci"], ev["level"]) if m["ci"] else float(m["value"])
        out.append(EvalResult(task_type=task, task_name=f"{', '.join(on[dataset_id])} ({ev['bias_type']})",
                              dataset_type=dataset_id, dataset_name=dataset_name, metric_type=name,
                              metric_name=f"{name} ({m['description']})", metric_value=value, verified=False))
    return out


def card_data(facts: Mapping[str, Any], license_override: str | None = None):
    """The card's metadata block (:class:`huggingface_hub.ModelCardData`)."""
    from huggingface_hub import ModelCardData

    base, arm = facts["base"], facts["arm"]
    licence = license_of(facts, license_override)
    tags = ["context-cda", "debiasing", f"{facts['model']['attribute']}-bias", arm["name"]]
    return ModelCardData(
        language="en", license=licence, library_name="transformers", base_model=base.get("hub_id"),
        pipeline_tag=PIPELINE_TAGS.get(facts.get("family") or ""), tags=tags,
        model_name=title(facts["model"]), eval_results=eval_results(facts) or None,
    )


# ------------------------------------------------------------------------------------------------ eval results


def eval_result_files(facts: Mapping[str, Any], repo_id: str | None = None) -> dict[str, list]:
    """``{file name: [EvalResultEntry]}`` of the Hub's evaluation-results format: one file per benchmark whose
    dataset the Hub holds, one entry per metric (the value as measured; its interval and how it was measured in
    the notes). The source is the model's Hub page (``repo_id``), else ``tracking.card.source_url``, else none."""
    from huggingface_hub import EvalResultEntry

    ev = facts["evaluation"]
    url = f"https://huggingface.co/{repo_id}" if repo_id else facts.get("source_url")
    source = {"source_url": url, "source_name": "context-cda model card" if repo_id else "context-cda run"} if url \
        else {}
    files: dict[str, list] = {}
    for bench, name, m in metrics_of(facts):
        dataset_id = dataset_of(facts, bench, name)[0]
        if "/" not in dataset_id:
            continue
        notes = (f"{name}: {m['description']} {interval_text(m['value'], m['ci'], ev['level'])} (seeded bootstrap, "
                 f"{ev['resamples']} resamples); {facts['evaluation']['benchmarks'][bench]['items'] or '?'} items, "
                 f"bias type {ev['bias_type']}; scored by context-cda {facts['context_cda']}")
        files.setdefault(f"{bench}.yaml", []).append(EvalResultEntry(
            dataset_id=dataset_id, task_id=name, value=float(m["value"]), notes=notes, **source))
    return files


def eval_results_yaml(entries: list) -> str:
    import yaml
    from huggingface_hub import eval_result_entries_to_yaml

    return yaml.safe_dump(eval_result_entries_to_yaml(entries), sort_keys=False, allow_unicode=True)


# ------------------------------------------------------------------------------------------------ the body


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    def esc(c: Any) -> str:
        return str(c).replace("|", "\\|").replace("\n", " ")

    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(esc(c) for c in r) + " |" for r in rows), ""]


def details(facts: Mapping[str, Any], licence: str | None) -> list[str]:
    base, arm, model = facts["base"], facts["arm"], facts["model"]
    lic = licence or f"{UNKNOWN_LICENSE} (nothing records it: {base.get('license_from')})"
    return ["## Model details", "",
            f"- **Base model**: `{base['ref']}` (target `{base['target']}`): {base['source']}.",
            f"- **Precision**: {base['precision']}.",
            f"- **Debiasing arm**: {arm['label']} (`{arm['name']}`): {arm['does']}.",
            f"- **Attribute**: {model['attribute']}; model family: {facts.get('family') or '–'}.",
            f"- **Licence**: {lic}" + (f" (as recorded by: {base['license_from']})." if licence == base.get("license")
                                        else " (named at export)." if licence else "."),
            registered_line(model), ""]


def title(model: Mapping[str, Any]) -> str:
    return f"{model['name']} v{model['version']}" if model.get("version") is not None else \
        f"{model['name']} (not registered)"


def registered_line(model: Mapping[str, Any]) -> str:
    if model.get("version") is None:
        return "- **Registered**: no (tracking.register_model or tracking.enabled off): a card of the decision only."
    return (f"- **Registered**: `{model['name']}` version {model['version']} in the MLflow model registry"
            + (f" (run {model['run_id']})" if model.get("run_id") else "") + f"; stored as {model.get('flavor') or '–'}.")


def training_section(facts: Mapping[str, Any]) -> list[str]:
    st, tr, model = facts["stages"], facts.get("training"), facts["model"]
    out = ["## Training data and procedure", "", f"Corpus: {st.get('corpus') or 'not recorded'}.", "",
           "Rows in and out of each stage that fed this model (from the run's manifests):", "",
           *_table(["Stage", "In", "Out", "What happened"], st["rows"] or [["–", "–", "–", "not recorded"]])]
    if tr:
        s, cfg = tr["summary"], tr["settings"]
        out += [f"- Token budget: {s.get('token_budget', '–')} tokens ({s.get('sequences', '–')} sequences of the "
                f"{s.get('texts', '–')} texts); the same for every arm of its budget group, so arms compare on equal "
                "training.",
                f"- {cfg.get('epochs', '–')} epochs, {s.get('steps', '–')} optimizer steps, batch "
                f"{cfg.get('batch_size', '–')} × {cfg.get('grad_accum', '–')}, learning rate "
                f"{cfg.get('learning_rate', '–')}, sequences of {cfg.get('max_seq_len', '–')} tokens, precision "
                f"{cfg.get('precision', '–')}" + (", LoRA" if tr.get("lora") else ", all weights trained") + "."]
    else:
        out.append("- No fine-tuning: this arm is applied to the vanilla weights (they are this version's weights).")
    out += [f"- Seeds: run.seed {model['run_seed']} (sampling, generation, the token-budget cut); training seeds "
            f"{', '.join(map(str, model['seeds']))} (the weights are seed {model['registered_seed']}'s; the gate "
            f"judged every seed's pooled evidence); bootstrap seed {model['bootstrap_seed']}.",
            "", "Models the run used:", "", *st.get("models", []), ""]
    return out


def evaluation_section(facts: Mapping[str, Any]) -> list[str]:
    ev = facts["evaluation"]
    rows = []
    for bench, name, m in metrics_of(facts):
        better = {True: "higher", False: "lower", None: f"closer to {m['ideal']:g}" if m["ideal"] is not None
                  else "–"}[m["higher_is_better"]]
        rows.append([bench, name, _cell(m["value"], m["ci"]), _cell(m["vanilla"], m["vanilla_ci"]),
                     _diff(m.get("vs_vanilla")), better, ev["benchmarks"][bench]["items"] or "–"])
    return ["## Evaluation", "",
            f"Every metric with its {ev['level']:.0%} seeded bootstrap interval ({ev['resamples']} resamples; StereoSet "
            "resampled within target terms, CrowS-Pairs over pairs), the vanilla model's on the same items, and the "
            "paired difference (this model − vanilla, resampled together on the items both were scored on; "
            "StereoSet and CrowS-Pairs, whose per-item scores the run keeps). Bias type "
            f"{ev['bias_type']}; CrowS-Pairs scoring {ev.get('crows_mode') or '–'}; from the {ev['source']}.", "",
            *_table(["Benchmark", "Metric", "This model", "Vanilla", "Difference (paired)", "Better", "Items"], rows)]


def gate_section(facts: Mapping[str, Any]) -> list[str]:
    d = facts["decision"]
    aliases = ", ".join(d["aliases"]) or "none"
    return ["## Promotion gate", "",
            f"**Verdict: {d['verdict']}**" + (f" — {d['note']}" if d.get("note") else "")
            + f". Aliases given at registration: {aliases}. The gate's reasons, as it stated them (context-cda's "
            "promotion gate, `tracking.promotion.decide`: every rule judged on the items both models were scored on, "
            "by its paired interval and exact test; docs/evaluation.md states the rules):", "",
            *(f"- {r}" for r in d["reasons"] or ["(none recorded)"]), ""]


def _sizes(facts: Mapping[str, Any]) -> list[str]:
    """One line per benchmark: its items, and the smallest shift the gate says it could show."""
    ev, shown = facts["evaluation"], facts["decision"].get("detectable") or {}
    out = []
    for bench, b in ev["benchmarks"].items():
        mine = {k: v for k, v in shown.items() if k.startswith(f"{bench}_")}
        shift = ("; smallest shift toward 50 it could show, in points (the gate's power statement): "
                 + ", ".join(f"{k} {_shift(v)}" for k, v in mine.items())) if mine else ""
        out.append(f"- {bench}: {b['items'] or '?'} items{shift}.")
    if not shown:
        out.append("- The gate that decided states no smallest detectable shift: read a refusal for want of evidence "
                   "as \"not shown\", not as \"no effect\"; the intervals above say how wide the uncertainty is.")
    if ev.get("max_items"):
        out.append(f"- evaluate.max_items = {ev['max_items']}: only the first items of each per-epoch benchmark were "
                   "scored, a small sample.")
    return out


def _shift(value: Any) -> str:
    return _f(value) if isinstance(value, int | float) else str(value)


def _generation(facts: Mapping[str, Any]) -> list[str]:
    g = facts["generation"]
    if facts["arm"]["corpus"] not in ("filtered", "augmented", "neutral") or not g.get("items"):
        return []
    share = f" ({g['accepted'] / g['items']:.0%})" if g.get("accepted") is not None and g["items"] else ""
    return [f"- Generated data: the generator (`{g['model']}`, backend {g['backend']}) rephrased {g['items']} "
            f"counterfactuals; its review accepted {g.get('accepted', '–')}{share}, rejected {g.get('rejected', '–')} "
            f"(meaning check: {g.get('meaning_review') or 'off'}), {g.get('errors', 0) or 0} failed. A generated "
            "sentence can still carry a stereotype the review does not catch."]


def limits_section(facts: Mapping[str, Any]) -> list[str]:
    ev = facts["evaluation"]
    missing = [f"- Not scored: {b}: {why}." for b, why in ev["not_scored"].items()]
    return ["## Bias, Risks, and Limitations", "",
            f"This model was fine-tuned to reduce {facts['model']['attribute']} bias as StereoSet and CrowS-Pairs "
            "measure it: stereotypical associations in short English sentences, with binary gender terms for the "
            "gender attribute. A better score is evidence about those benchmarks, not a guarantee of unbiased "
            "behaviour elsewhere; the model keeps the biases and risks of its base model.", "",
            *_sizes(facts), *missing, *_generation(facts),
            "- Values published for other models (e.g. the Context-CDA paper's Table 1) come from other scorers on other "
            "items: compare only numbers measured the same way.", ""]


def datasets_section(facts: Mapping[str, Any]) -> list[str]:
    rows = [[d["name"], d["used_by"], d.get("license") or "not recorded (check its source)", d["source"]]
            for d in facts["datasets"]]
    return ["## Datasets and licences", "", *_table(["Dataset", "Used by", "Licence", "Source"], rows)]


def provenance_section(facts: Mapping[str, Any]) -> list[str]:
    model = facts["model"]
    return ["## Provenance", "",
            f"Written by context-cda {facts['context_cda']} from the run's evidence (the evaluate steps' aggregates and "
            "per-item predictions, the register step's decision, the stages' manifests); nothing in it is typed by "
            f"hand. The registered version `models:/{model['name']}/{model['version']}` carries the same card and the "
            "per-item evidence the gate decided on.", ""]


def body(facts: Mapping[str, Any], licence: str | None) -> str:
    model, arm, d = facts["model"], facts["arm"], facts["decision"]
    head = [f"# {title(model)}", "",
            f"`{facts['base']['ref']}` debiased for {model['attribute']} with {arm['label']}, by the context-cda "
            f"pipeline. Promotion gate: **{d['verdict']}**.", ""]
    parts = [head, details(facts, licence), training_section(facts), evaluation_section(facts), gate_section(facts),
             limits_section(facts), datasets_section(facts), provenance_section(facts)]
    return "\n".join(line for part in parts for line in part)


def render(facts: Mapping[str, Any], license_override: str | None = None, repo_id: str | None = None
           ) -> tuple[str, dict[str, str]]:
    """(README.md text, ``{.eval_results file name: YAML text}``) of a version's card."""
    from huggingface_hub import ModelCard

    licence = license_of(facts, license_override)
    data = card_data(facts, license_override)
    readme = str(ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body(facts, licence)}"))
    files = {name: eval_results_yaml(entries) for name, entries in eval_result_files(facts, repo_id).items()}
    return readme, files
