"""The facts a registered version's model card is written from: one JSON-able record, gathered from the register
step's inputs (the version's evaluation, vanilla's, the per-item predictions), its decision (``promotion.json``,
the gate's output read as it is, never recomputed) and the run's manifests (what each stage did).

Nothing here is typed by hand: a fact the run did not record is ``None`` and the card says so. The record is kept
beside the card (``card.json``) and logged with the version, so ``ccda export`` writes the card again from it
(with the licence or the Hub repository the user names) without the run folder.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import layout as L
from ..errors import CCDAError, InputError
from ..io import MANIFEST, read_json

if TYPE_CHECKING:  # pragma: no cover
    from ..config import Config

SCHEMA = 1
#: the metrics whose paired difference from vanilla the per-item evidence gives (tracking.evidence.BENCHMARKS)
PAIRED_BENCHMARKS = ("stereoset", "crows")


def _json(path: Path | None) -> dict[str, Any]:
    if path is None or not Path(path).is_file():
        return {}
    try:
        data = read_json(path)
    except InputError:
        return {}
    return data if isinstance(data, dict) else {}


def _summary(folder: Path | None) -> dict[str, Any]:
    return dict(_json(Path(folder) / MANIFEST if folder else None).get("summary") or {})


# ------------------------------------------------------------------------------------------------ the model


def base_model(config: Config, target: str) -> dict[str, Any]:
    """The target's reference, exact source, precision and licence (:mod:`context_cda.models.info`)."""
    from ..models import parse_ref
    from ..models.info import describe, license_of

    ref = config.run.targets[target]
    info = describe(ref)
    licence, found = license_of(ref, config.tracking.card.licenses, target)
    try:
        parsed = parse_ref(ref)
        hub_id = parsed.location if parsed.kind == "hub" else None
    except CCDAError:  # an unresolvable reference: describe() says so
        hub_id = None
    return {"target": target, "ref": ref, "kind": info.kind, "source": info.source, "precision": info.precision,
            "license": licence, "license_from": found, "hub_id": hub_id}


def arm_facts(config: Config, target: str, arm: str) -> dict[str, Any]:
    from ..arms import parse, published_refs, what_it_does

    published = published_refs(config, target)
    spec = parse(arm, config.train.k, published)
    return {"name": arm, "label": spec.label, "kind": spec.kind, "k": spec.k, "corpus": spec.corpus,
            "does": what_it_does(arm, config.train.k, published, config.run.attribute)}


# ------------------------------------------------------------------------------------------------ the data


def run_folders(config: Config) -> dict[str, Path]:
    """The run's stage folders the report's setup section reads (every target's: the card keeps its own rows)."""
    root = config.run_dir()
    return {"augment": root / L.FOLDERS["augment"], "sample": root / L.FOLDERS["sample"],
            "entropy": L.fanin_dir(root, "entropy", {}), "filtered": L.fanin_dir(root, "filter", {}),
            "finetune": L.fanin_dir(root, "finetune", {})}


def _ours(label: str, target: str, arm: str) -> bool:
    """Whether a setup row is about this (target, arm): rows of a step without fan-out, and the target's own."""
    if "[" not in label:
        return True
    keys = label[label.index("[") + 1: label.rindex("]")].split(", ")
    return keys[0] == target and (not label.startswith("finetune") or keys[1] == arm)


def stages(config: Config, target: str, arm: str) -> dict[str, Any]:
    """The corpus and the rows in and out of every stage that fed this arm, as the report's setup table has them."""
    from ..report import setup

    folders, root = run_folders(config), config.run_dir()
    rows = [r for r in setup.size_rows(config, folders, root) if _ours(r[0], target, arm)]
    ingest = _json(root / L.FOLDERS["ingest"] / MANIFEST)
    return {"corpus": setup._corpus_text(config, ingest) if ingest else None,
            "rows": [[str(c) for c in r] for r in rows],
            "models": setup.models_lines(config, folders), "sampled": setup.sampled_lines(config)}


def training(config: Config, inputs: Mapping[str, Path]) -> dict[str, Any]:
    """The fine-tuning as its manifest recorded it (texts, tokens, the token budget, epochs, steps, settings)."""
    manifest = _json(inputs.get("finetune_summary"))
    train = dict((manifest.get("config") or {}).get("train") or {})
    keep = ("epochs", "batch_size", "grad_accum", "learning_rate", "max_seq_len", "precision", "token_budget")
    return {"summary": dict(manifest.get("summary") or {}), "settings": {k: train.get(k) for k in keep if k in train},
            "lora": bool((train.get("lora") or {}).get("enabled")), "versions": dict(manifest.get("versions") or {}),
            "corpus_stats": _json(inputs.get("corpus_stats"))}


def generation(config: Config) -> dict[str, Any]:
    """How much of what the generator wrote its review accepted, and what the filter kept (Context-CDA's corpus)."""
    root = config.run_dir()
    aug = _summary(root / L.FOLDERS["augment"])
    return {"items": aug.get("items"), "accepted": aug.get("accepted"), "rejected": aug.get("rejected"),
            "errors": aug.get("errors"), "backend": aug.get("backend", config.augment.backend),
            "model": aug.get("gen_model", config.augment.model),
            "meaning_review": (aug.get("review") or {}).get("meaning", config.augment.review.meaning)}


def datasets_used(config: Config) -> list[dict[str, Any]]:
    """Every dataset the run read (the corpus and each benchmark's files), with its licence from the registry."""
    from ..data import datasets as D
    from ..tools.preflight import needed_datasets

    out = []
    for name, used_by, key, explicit in needed_datasets(config):
        if explicit:
            out.append({"name": name, "used_by": used_by, "source": f"{key} = {explicit}", "license": None,
                        "hub_id": None})
            continue
        ds = D.get(name)
        out.append({"name": name, "used_by": used_by, "source": ds.provenance, "license": ds.license or None,
                    "hub_id": ds.hub_id or None, "description": ds.description})
    return out


# ------------------------------------------------------------------------------------------------ the evaluation


def _differences(inputs: Mapping[str, Path], seed: int | None, config: Config) -> dict[str, dict[str, Any]]:
    """``{metric name: Difference.to_dict()}``: the registered weights' per-item scores against vanilla's, paired
    on the items both were scored on (StereoSet and CrowS-Pairs: the benchmarks with per-item evidence)."""
    from ..tracking import evidence as E
    from ..tracking.register import ITEMS_MODEL, ITEMS_PREFIX, VANILLA_ITEMS

    own = inputs.get(f"{ITEMS_PREFIX}{seed}") or inputs.get(ITEMS_MODEL)
    if own is None or VANILLA_ITEMS not in inputs:
        return {}
    cand, van = E.load([own]), E.load([inputs[VANILLA_ITEMS]])
    diffs = E.paired_differences(cand, van, config.evaluate.bootstrap)
    names = {b: {m.key: m.name for m in _benchmark(b).metrics} for b in PAIRED_BENCHMARKS}
    out = {}
    for b in PAIRED_BENCHMARKS:
        if cand.has(b) and van.has(b):
            out.update({names[b][k]: d.to_dict() for k, d in diffs.items() if k in names[b]})
    return out


def _benchmark(name: str):
    from ..evaluate import get_benchmark

    return get_benchmark(name)


def _items_scored(aggregate: Mapping[str, Any]) -> dict[str, int]:
    counts = aggregate.get("counts") or {}
    return {k.removesuffix("_scored"): int(v) for k, v in counts.items() if k.endswith("_scored")}


def _not_scored(config: Config, inputs: Mapping[str, Path], scored: set[str]) -> dict[str, str]:
    """Configured benchmarks this version has no metrics for, and why (an evaluation that says it does not apply,
    else not run)."""
    folder = Path(inputs["evaluation"]).parent if "evaluation" in inputs else None
    out = {}
    for b in config.evaluate.benchmarks:
        if b in scored:
            continue
        note = _json(folder / b / L.NOT_APPLICABLE_FILE) if folder else {}
        out[b] = str(note.get("reason") or note.get("why") or "not evaluated for this version "
                     "(evaluate.after_training off, or the evaluation left it out)")
    return out


def evaluation(config: Config, inputs: Mapping[str, Path], seed: int | None) -> dict[str, Any]:
    """Every metric of the version's evaluation with its interval, vanilla's, and the paired difference from
    vanilla: ``{"benchmarks": {name: {"description", "items", "metrics": {metric: {...}}}}, "not_scored": {...}}``."""
    from ..evaluate import REGISTRY
    from ..tracking.register import flat_metrics

    final, vanilla = flat_metrics(inputs)
    aggregate = _json(inputs.get("evaluation"))
    items, diffs = _items_scored(aggregate), _differences(inputs, seed, config)
    out: dict[str, Any] = {}
    for name, bench in REGISTRY.items():
        metrics = {}
        for m in bench.metrics:
            if m.name not in final:
                continue
            metrics[m.name] = {
                "label": m.key, "description": m.description, "higher_is_better": m.higher_is_better,
                "ideal": m.ideal, "value": final[m.name], "ci": _ci(final, m.name),
                "vanilla": vanilla.get(m.name), "vanilla_ci": _ci(vanilla, m.name), "vs_vanilla": diffs.get(m.name)}
        if metrics:
            out[name] = {"description": bench.description, "items": items.get(name), "metrics": metrics}
    return {"benchmarks": out, "not_scored": _not_scored(config, inputs, set(out)),
            "level": config.evaluate.bootstrap.level, "resamples": config.evaluate.bootstrap.resamples,
            "bias_type": config.evaluate.bias_type, "crows_mode": aggregate.get("crows_mode"),
            "max_items": config.evaluate.max_items, "source": "evaluate step" if aggregate else "metrics.csv"}


def _ci(values: Mapping[str, float], name: str) -> list[float] | None:
    lo, hi = values.get(f"{name}_ci_low"), values.get(f"{name}_ci_high")
    return None if lo is None or hi is None else [float(lo), float(hi)]


# ------------------------------------------------------------------------------------------------ the decision


def decision(record: Mapping[str, Any]) -> dict[str, Any]:
    """The gate's output as ``promotion.json`` holds it: its verdict (the gate's own four-state word and note where
    the gate gives them, else its two-word ``decision``), reasons, aliases, policy, comparisons and the smallest
    shift each bias metric's benchmark could show against vanilla (where the gate states it)."""
    verdict = record.get("verdict") or record.get("decision")
    return {"verdict": verdict, "note": record.get("note") or "", "promote": bool(record.get("promote")),
            "reasons": list(record.get("reasons") or []), "aliases": list(record.get("aliases") or []),
            "champion_version": record.get("champion_version"), "policy": dict(record.get("policy") or {}),
            "comparisons": dict(record.get("comparisons") or {}), "detectable": detectable(record)}


def detectable(record: Mapping[str, Any]) -> dict[str, Any]:
    """``{metric: smallest shift (points toward 50) the benchmark could show against vanilla}`` as the gate states it
    (its ``detectable_shift``, else a ``detectable*`` entry of its comparisons with vanilla); empty when the gate
    that decided states none."""
    out: dict[str, Any] = {}
    for key in ("detectable_shift", "detectable"):
        if isinstance(record.get(key), dict):
            out.update({k: v for k, v in record[key].items() if v is not None})
    for metric, comp in ((record.get("comparisons") or {}).get("vs_vanilla") or {}).items():
        for key, value in (comp or {}).items() if isinstance(comp, dict) else []:
            if "detectable" in key and value is not None:
                out.setdefault(metric, value)
    return out


# ------------------------------------------------------------------------------------------------ the record


def gather(config: Config, target: str, arm: str, arm_dir: Path, inputs: Mapping[str, Path]) -> dict[str, Any]:
    """Every fact of the card of (target, arm)'s registered version, from the register step's folder ``arm_dir``
    (its ``promotion.json``) and inputs."""
    from importlib import metadata

    record = _json(Path(arm_dir) / L.PROMOTION_FILE)
    if not record:
        raise InputError(f"{Path(arm_dir) / L.PROMOTION_FILE}: no decision to write a model card from; run register.")
    seed = config.train.seeds[0] if arm_facts(config, target, arm)["kind"] == "trained" else None
    return {
        "schema": SCHEMA, "context_cda": metadata.version("context-cda"),
        "model": {"name": record.get("model_name"), "version": record.get("version"), "flavor": record.get("flavor"),
                  "attribute": config.run.attribute, "registered_seed": seed, "seeds": list(config.train.seeds),
                  "run_seed": config.run.seed, "bootstrap_seed": config.evaluate.bootstrap.seed},
        "base": base_model(config, target), "arm": arm_facts(config, target, arm),
        "training": training(config, inputs) if seed is not None else None,
        "stages": stages(config, target, arm), "generation": generation(config),
        "evaluation": evaluation(config, inputs, seed), "decision": decision(record),
        "datasets": datasets_used(config), "source_url": config.tracking.card.source_url,
    }
