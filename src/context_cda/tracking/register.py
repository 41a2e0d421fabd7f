"""The ``register`` stage: log a fine-tuned model to MLflow, register it and run the promotion gate.

Inputs (``inputs`` mapping, found by :func:`register_inputs` in the register step's folders):

* ``model`` (required): the ``save_pretrained`` folder of the *registered* seed,
  ``finetune/<target>/<arm>/seed-<first of train.seeds>/final`` (the first seed's weights are registered; the
  gate judges the arm by every seed's pooled evidence);
* ``metrics``: that step's ``metrics.csv`` (its last row: the candidate's metrics; its epoch-0 row: vanilla's),
  overridden by ``evaluation`` / ``vanilla``: the evaluate steps' ``aggregate.json`` (or any JSON of
  ``{metric: value}``), when present. These flat metrics become version tags;
* ``items_seed-<s>`` (one per training seed) and ``items_vanilla``: folders holding
  ``<benchmark>/predictions.parquet``, the per-item scores the gate decides on (:mod:`.evidence`);
* any other key: a file or folder logged as an artifact under ``inputs/<key>`` (stage summaries, the SE
  histogram, corpus statistics).

The stage table's ``register`` step is :func:`run_register_target`: every arm of one target, in order (so the
gate sees the previous arm's decision). Each version is registered as ``<target>-debiased`` in the flavour
``tracking.model_flavor`` names (:mod:`.flavors`; no pickled code by default), with its metrics and the pooled
evidence (``evidence/v<version>/evidence.parquet``, so a later candidate can be compared with it item by item),
gets the alias ``candidate``, and ``champion`` when :func:`~context_cda.tracking.promotion.decide` says so. The
decision, its reasons and the paired comparisons go to version and run tags, to ``promotion.json`` in the run's
artifacts and in ``out_dir`` (with ``evidence.parquet``).

The runner's up-to-date check of this step also asks the registry (:func:`registered_versions_exist`): a
version recorded in ``promotion.json`` that no longer exists (the MLflow database was deleted, another tracking
URI) makes the step run again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import layout as L
from ..arms import arm_k, published_refs
from ..arms import parse as parse_arm
from ..errors import ConfigError, InputError
from ..io import MANIFEST, StageRecorder, read_json, write_json, write_table
from . import decisions as D
from . import evidence as E
from .flavors import fluent_uri as _fluent_uri
from .flavors import log_model_version
from .promotion import CS, ICAT, LMS, SS, Decision, PromotionPolicy, decide
from .runs import get_client, tracker_for, tracking_uri

if TYPE_CHECKING:  # pragma: no cover
    from ..config import Config

logger = logging.getLogger(__name__)

KNOWN_INPUTS = {"model", "metrics", "evaluation", "vanilla", "arm_artifact"}
ITEMS_PREFIX = "items_seed-"
ITEMS_MODEL = "items_model"  # a post-hoc arm's per-item scores (no training seed)
VANILLA_ITEMS = "items_vanilla"
ARM_ARTIFACT = "arm_artifact"  # a projection arm's matrix, stored with the registered version
TAG_METRICS = (SS, LMS, ICAT, CS)
EVIDENCE_TAG = "evidence"

__all__ = ["_fluent_uri", "register_inputs", "registered_name", "registered_versions_exist", "run_register",
           "run_register_target"]


def registered_name(target: str, attribute: str = "gender") -> str:
    """``<target>-debiased`` (gender), ``<target>-debiased-race``, ``<target>-debiased-religion``: one registered
    model, and so one champion, per attribute, since the gate compares a candidate with the champion on the same
    benchmark items (a race candidate has no item in common with a gender champion)."""
    return f"{target}-debiased" if attribute == "gender" else f"{target}-debiased-{attribute}"


def register_inputs(
    config: Config, target: str, arm: str, seed: int | None = None, folders: Mapping[str, Path | str] | None = None
) -> dict[str, Path]:
    """The per-arm ``inputs`` of :func:`run_register`, found in the register step's folders (``folders``: the
    stage table's ``finetune``, ``evaluations`` and ``filtered`` inputs; default: the run folder's).

    ``seed`` (default: the first of ``train.seeds``) picks the fine-tuned model that is registered; the per-item
    scores of every seed of ``train.seeds`` that has them are inputs of the gate."""
    from .. import stages as T

    folders = folders or T.step_inputs(config, "register", target=target)
    spec = parse_arm(arm, config.train.k, published_refs(config, target))
    if spec.posthoc:
        return _posthoc_inputs(config, target, spec, folders)
    seed = config.train.seeds[0] if seed is None else seed
    fixed = {"target": target}
    ft = L.within(folders["finetune"], "finetune", fixed, arm=arm, seed=seed)
    out: dict[str, Path] = {"model": ft / L.FINAL_DIR, "metrics": ft / L.METRICS_FILE}
    extras: dict[str, Path] = {"finetune_summary": ft / MANIFEST, "corpus_stats": ft / L.CORPUS_STATS_FILE}
    k = arm_k(arm, config.train.k)
    if k is not None and folders.get("filtered"):
        corpus = L.filtered_in(folders["filtered"], k)
        extras.update(se_hist=corpus.parent / L.SE_HIST_FILE, filter_summary=corpus.parent / MANIFEST)
    ev = folders.get("evaluations")
    if ev:
        extras["evaluation"] = L.within(ev, "evaluate", fixed, arm=arm, seed=seed) / L.AGGREGATE_FILE
        extras["vanilla"] = L.within(ev, "evaluate", fixed, "evaluate-vanilla") / L.AGGREGATE_FILE
    for s in config.train.seeds:
        found = E.model_items_dir(ev, folders["finetune"], target, arm, s)
        if found is not None:
            extras[f"{ITEMS_PREFIX}{s}"] = found
    found = E.vanilla_items_dir(ev, folders["finetune"], target)
    if found is not None:
        extras[VANILLA_ITEMS] = found
    out.update({k: Path(v) for k, v in extras.items() if Path(v).exists()})
    return out


def _posthoc_inputs(config: Config, target: str, spec, folders: Mapping[str, Path | str]) -> dict[str, Path]:
    """A post-hoc arm's register inputs: the vanilla model (the arm is applied to it), its evaluate-posthoc
    aggregate and per-item scores, vanilla's, and the arm's learnt matrix (logged with the version)."""
    from ..models import local_folder

    fixed = {"target": target}
    out: dict[str, Path] = {"model": Path(local_folder(config.run.targets[target], config.run.model_cache))}
    ev = folders.get("posthoc") or folders.get("evaluations")
    if ev:
        post = L.within(ev, "evaluate", fixed, "evaluate-posthoc", arm=spec.name)
        out.update({"evaluation": post / L.AGGREGATE_FILE, ITEMS_MODEL: post})
    van = folders.get("evaluations") or ev
    if van:
        out["vanilla"] = L.within(van, "evaluate", fixed, "evaluate-vanilla") / L.AGGREGATE_FILE
    found = E.vanilla_items_dir(folders.get("evaluations"), folders.get("finetune"), target)
    if found is not None:
        out[VANILLA_ITEMS] = found
    if spec.artifact and folders.get("debias"):
        out[ARM_ARTIFACT] = L.within(folders["debias"], "debias", fixed, arm=spec.name) / spec.artifact
    return {k: Path(v) for k, v in out.items() if Path(v).exists()}


def registered_arms(config: Config, target: str) -> list[str]:
    """The arms of ``target`` the register step registers, in order: every arm of train.arms it runs (the
    post-hoc ones as the vanilla model with the arm applied); published checkpoints are scored, not registered."""
    from ..arms import for_target

    return for_target(config, target, ("trained", "projection", "scoring"))


def run_register_target(
    config: Config, inputs: Mapping[str, Path | str], out_dir: Path | str, target: str,
    arms: Sequence[str] | None = None, evaluation: Path | str | None = None,
) -> dict[str, Any]:
    """The ``register`` step of one target: every arm of ``arms`` (default ``train.arms``) in order (so the
    promotion gate sees the previous arm's decision), each into ``<out_dir>/<arm>/``. ``evaluation`` (a JSON
    file of metrics) overrides the evaluation of the one arm registered (``ccda register --evaluation``)."""
    arms = list(registered_arms(config, target) if arms is None else arms)
    if evaluation is not None and len(arms) != 1:
        raise ConfigError(f"register {target}: an evaluation override ({evaluation}) is for exactly one arm; "
                          f"got {len(arms)} ({', '.join(arms)}). Name one arm (--arm).")
    results = {}
    seed = config.train.seeds[0]
    for arm in arms:
        arm_inputs = register_inputs(config, target, arm, seed, folders=inputs)
        if evaluation is not None:
            arm_inputs["evaluation"] = Path(evaluation)
        results[arm] = run_register(config, arm_inputs, Path(out_dir) / L.safe_name(arm, "arm"), target, arm,
                                    discover=False, seed=seed)
    return {"target": target, "arms": results}


# ------------------------------------------------------------------------------------------------ inputs


def _metrics_json(path: Path | str) -> dict[str, float]:
    data = read_json(path)
    if isinstance(data, dict) and isinstance(data.get("metrics"), dict):
        data = data["metrics"]
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object of metric -> value.")
    out = {}
    for k, v in data.items():
        with contextlib.suppress(TypeError, ValueError):
            if math.isfinite(float(v)):
                out[str(k)] = float(v)
    return out


def metrics_from_csv(path: Path | str) -> tuple[dict[str, float], dict[str, float]]:
    """(vanilla = epoch-0 row, final = last row) of a finetune ``metrics.csv``."""
    import pandas as pd

    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: not found; run `ccda finetune` first.")
    df = pd.read_csv(p).sort_values("epoch")
    if df.empty:
        return {}, {}
    cols = [c for c in df.columns if c not in ("epoch", "arm", "target", "seed")]

    def row(r) -> dict[str, float]:
        return {c: float(r[c]) for c in cols if pd.notna(r[c]) and math.isfinite(float(r[c]))}

    first = df.iloc[0]
    vanilla = row(first) if int(first["epoch"]) == 0 else {}
    return vanilla, row(df.iloc[-1])


def flat_metrics(inputs: Mapping[str, Path]) -> tuple[dict[str, float], dict[str, float]]:
    """(candidate, vanilla) flat metrics: metrics.csv's last and epoch-0 rows, overridden by the evaluate steps'."""
    vanilla, final = metrics_from_csv(inputs["metrics"]) if "metrics" in inputs else ({}, {})
    if "evaluation" in inputs:
        final = {**final, **_metrics_json(inputs["evaluation"])}
    if "vanilla" in inputs:
        vanilla = {**vanilla, **_metrics_json(inputs["vanilla"])}
    return final, vanilla


def gate_evidence(inputs: Mapping[str, Path]) -> tuple[E.Evidence | None, E.Evidence | None]:
    """(candidate pooled over its seeds, vanilla) per-item evidence from the ``items_*`` inputs (None: none)."""
    seeds = {int(k[len(ITEMS_PREFIX):]): Path(v) for k, v in inputs.items() if k.startswith(ITEMS_PREFIX)}
    cand = E.load(dict(sorted(seeds.items()))) if seeds else None
    if cand is None and ITEMS_MODEL in inputs:
        cand = E.load([inputs[ITEMS_MODEL]])
    van = E.load([inputs[VANILLA_ITEMS]]) if VANILLA_ITEMS in inputs else None
    return cand, van


# ------------------------------------------------------------------------------------------------ the stage


@dataclass
class _Context:
    """What one registration works with."""

    config: Config
    target: str
    arm: str
    seed: int | None
    out: Path
    inputs: dict[str, Path]
    model_dir: Path
    final: dict[str, float]
    vanilla: dict[str, float]
    candidate: E.Evidence | None
    vanilla_items: E.Evidence | None
    policy: PromotionPolicy

    @property
    def name(self) -> str:
        return registered_name(self.target, self.config.run.attribute)


def _context(config: Config, inputs, out_dir, target: str, arm: str, discover: bool, seed: int | None) -> _Context:
    given = {k: Path(v) for k, v in (inputs or {}).items()}
    if discover or not given:
        given = {**register_inputs(config, target, arm, seed), **given}
    model_dir = Path(given.get("model", ""))
    if not (model_dir / "config.json").is_file():
        raise InputError(f"register {target}/{arm}: {model_dir} is not a save_pretrained folder; run finetune.")
    E.check_bias_types({k: v for k, v in given.items() if k.startswith("items_")}, config.evaluate.bias_type,
                       f"register {target}/{arm}")
    final, vanilla = flat_metrics(given)
    cand, van = gate_evidence(given)
    policy = PromotionPolicy.from_config(config.tracking.promotion, config.evaluate.bootstrap,
                                         config.evaluate.bias_type)
    return _Context(config, target, arm, seed, Path(out_dir), given, model_dir, final, vanilla, cand, van, policy)


def run_register(
    config: Config,
    inputs: Mapping[str, Path | str] | None,
    out_dir: Path | str,
    target: str,
    arm: str,
    discover: bool = True,
    seed: int | None = None,
) -> dict[str, Any]:
    """Log, register and gate the fine-tuned model of (target, arm); returns the decision summary.

    With ``discover`` (default), inputs not named in ``inputs`` are filled in from the run directory when they
    exist *now* (see :func:`register_inputs`): the evaluate stage's aggregates and predictions, summaries.
    """
    if config.tracking.enabled and config.tracking.register_model:
        from .runs import check_server

        check_server(config)  # an unreachable server: one line now, not minutes of the client's retries
    ctx = _context(config, inputs, out_dir, target, arm, discover, seed)
    rec = StageRecorder("register", ctx.out, {"tracking": config.tracking.model_dump(mode="json"),
                                              "bootstrap": config.evaluate.bootstrap.model_dump(mode="json"),
                                              "target": target, "arm": arm}, ctx.inputs)
    summary: dict[str, Any] = {"target": target, "arm": arm, "model_name": ctx.name, "metrics": ctx.final,
                               "vanilla": ctx.vanilla, "registered": False, "version": None,
                               "registered_seed": seed, "evidence_seeds": ctx.candidate.seeds if ctx.candidate else []}
    if not config.tracking.enabled or not config.tracking.register_model:
        decision = decide(ctx.candidate, None, ctx.vanilla_items, ctx.policy)
        record = {**decision.to_dict(), "decision": D.decision(decision.promote), "model_name": ctx.name,
                  "version": None, "champion_version": None}
        summary.update(_verdict_summary(decision))
        return _finish(ctx, rec, record, summary, registered=False)
    client = get_client(config)
    tracker = tracker_for(config, target=target, arm=arm, seed=seed)
    version, flavor = _register_version(ctx, client, tracker)
    champion_mv, champion_ev = _champion(client, ctx.name, version)
    decision = decide(ctx.candidate, champion_ev, ctx.vanilla_items, ctx.policy,
                      champion_version=champion_mv.version if champion_mv is not None else None,
                      has_champion=champion_mv is not None)
    record = {**decision.to_dict(), "decision": D.decision(decision.promote), "model_name": ctx.name,
              "version": version, "flavor": flavor,
              "champion_version": champion_mv.version if champion_mv is not None else None}
    _apply(ctx, client, tracker, version, decision, record)
    summary.update(registered=True, version=version, flavor=flavor, **_verdict_summary(decision),
                   previous_champion=record["champion_version"], aliases=decision.aliases,
                   tracking_uri=tracking_uri(config), model_uri=f"models:/{ctx.name}/{version}")
    logger.info("register %s v%s (%s): %s (%s)", ctx.name, version, arm, decision.line, "; ".join(decision.reasons))
    return _finish(ctx, rec, record, summary, registered=True)


def _verdict_summary(decision: Decision) -> dict[str, Any]:
    """The decision's words for the step's summary: the two-word decision, the four-state verdict and its note,
    the detectable shifts, the reasons."""
    return {"promote": decision.promote, "decision": D.decision(decision.promote), "verdict": decision.verdict,
            "note": decision.note, "detectable_shift": decision.detectable_shift, "reasons": decision.reasons}


def detectable_text(decision: Decision) -> str:
    """``stereoset_ss=14.52,crows_cs=20.10``: the detectable shifts as one tag value."""
    return ",".join(f"{m}={v:.2f}" for m, v in decision.detectable_shift.items())


def _finish(ctx: _Context, rec: StageRecorder, record: dict[str, Any], summary: dict[str, Any],
            registered: bool) -> dict[str, Any]:
    outputs = {"promotion": write_json(ctx.out / L.PROMOTION_FILE, record)}
    if ctx.candidate is not None:
        outputs["evidence"] = write_table(E.to_table(ctx.candidate), ctx.out / L.EVIDENCE_FILE)
    rec.finish({"registered": int(registered)}, outputs=outputs, summary=summary)
    return summary


def _register_version(ctx: _Context, client, tracker) -> tuple[str, str]:
    """Log the model (and the inputs worth keeping) to the run, register a version, tag it; its evidence goes to
    ``evidence/v<version>/`` in the run."""
    from transformers import AutoConfig

    from ..models import family_of_config

    for key, path in ctx.inputs.items():
        if key not in KNOWN_INPUTS and not key.startswith("items_"):
            tracker.log_artifact(path, f"inputs/{key}" if Path(path).is_dir() else "inputs")
    family = family_of_config(AutoConfig.from_pretrained(ctx.model_dir))
    spec = parse_arm(ctx.arm, ctx.config.train.k, published_refs(ctx.config, ctx.target))
    extra = _arm_files(ctx, spec) if spec.posthoc else {}
    version, flavor = log_model_version(client, tracking_uri(ctx.config), ctx.model_dir, family, tracker.run_id,
                                        ctx.name, "folder" if spec.posthoc else ctx.config.tracking.model_flavor,
                                        extra=extra)
    # full precision: the tags are the version's metrics as the evaluation measured them
    tags = {k: repr(float(v)) for k, v in ctx.final.items() if k in TAG_METRICS and math.isfinite(v)}
    tags.update({"vanilla_" + k: repr(float(v)) for k, v in ctx.vanilla.items() if k in TAG_METRICS
                 and math.isfinite(v)})
    tags.update({"target": ctx.target, "arm": ctx.arm, "family": family, "flavor": flavor, "run_id": tracker.run_id,
                 "attribute": ctx.config.run.attribute, "bias_type": ctx.config.evaluate.bias_type,
                 "run_dir": str(ctx.config.run_dir().resolve()), "registered_seed": str(ctx.seed),
                 "evidence_seeds": ",".join(map(str, ctx.candidate.seeds)) if ctx.candidate else ""})
    if ctx.candidate is not None:
        with tempfile.TemporaryDirectory() as tmp:
            path = write_table(E.to_table(ctx.candidate), Path(tmp) / L.EVIDENCE_FILE)
            tracker.log_artifact(path, f"evidence/v{version}")
        tags[EVIDENCE_TAG] = f"evidence/v{version}/{L.EVIDENCE_FILE}"
    for k, v in tags.items():
        client.set_model_version_tag(ctx.name, version, k, v)
    return version, flavor


def _arm_files(ctx: _Context, spec) -> dict[str, Any]:
    """What a post-hoc arm's version holds beside the vanilla weights: ``ccda_arm.json`` (the arm, how to apply
    it) and a projection arm's matrix (safetensors)."""
    note: dict[str, Any] = {"arm": spec.name, "kind": spec.kind, "weights": "the vanilla target's, unchanged"}
    files: dict[str, Any] = {}
    if spec.kind == "projection" and ARM_ARTIFACT in ctx.inputs:
        files[str(spec.artifact)] = ctx.inputs[ARM_ARTIFACT]
        note["apply"] = (f"context_cda.scoring.interventions.Projection.load('{spec.artifact}').attach(model): "
                         "the last hidden states projected before the head reads them")
    if spec.kind == "scoring":
        sd = ctx.config.baselines.self_debias
        note.update(apply="score with context_cda.scoring.self_debias", prefixes=sd.prefixes,
                    decay_constant=sd.decay_constant, epsilon=sd.epsilon, mode=ctx.config.baselines.mode)
    files["ccda_arm.json"] = json.dumps(note, indent=2)
    return files


def _champion(client, name: str, new_version: str):
    """(the current champion's model version or None, its evidence or None when it carries none)."""
    try:
        mv = client.get_model_version_by_alias(name, D.CHAMPION)
    except Exception:  # noqa: BLE001 - no alias yet
        return None, None
    if mv is None or str(mv.version) == str(new_version):
        return None, None
    path = (mv.tags or {}).get(EVIDENCE_TAG)
    if not path or not mv.run_id:
        return mv, None
    import pandas as pd

    try:
        with tempfile.TemporaryDirectory() as tmp:
            local = client.download_artifacts(mv.run_id, path, tmp)
            return mv, E.from_table(pd.read_parquet(local), f"{name} v{mv.version}")
    except Exception as e:  # noqa: BLE001 - artifacts gone: the gate refuses and says so
        logger.warning("champion %s v%s: evidence %s unreadable (%s)", name, mv.version, path, e)
        return mv, None


def _apply(ctx: _Context, client, tracker, version: str, decision: Decision, record: dict[str, Any]) -> None:
    """Aliases, decision tags, the decision record and the gate's numbers as run metrics."""
    for alias in decision.aliases:
        client.set_registered_model_alias(ctx.name, alias, version)
    tags = {D.DECISION_TAG: D.decision(decision.promote), D.VERDICT_TAG: decision.verdict,
            D.NOTE_TAG: decision.note[:4000], D.DETECTABLE_TAG: detectable_text(decision),
            D.REASONS_TAG: "; ".join(decision.reasons)[:4000]}
    for k, v in tags.items():
        client.set_model_version_tag(ctx.name, version, k, v)
    tracker.set_tags({**tags, "registered_version": version})
    tracker.log_dict(record, "promotion.json")
    metrics = {f"final_{k}": v for k, v in ctx.final.items()}
    metrics.update({f"gate_{k}": v for k, v in decision.candidate.items()})
    metrics.update({f"gate_detectable_shift_{k}": v for k, v in decision.detectable_shift.items()})
    for side, diffs in decision.comparisons.items():
        for metric, d in diffs.items():
            for part, value in (("diff", d["diff"]), ("ci_low", d["ci"][0]), ("ci_high", d["ci"][1]), ("p", d["p"])):
                if value is not None:
                    metrics[f"{side}_{metric}_{part}"] = value
    tracker.log_metrics(metrics, step=0)


# ------------------------------------------------------------------------------------------------ freshness


def registered_versions_exist(config: Config, out_dir: Path | str, **keys: Any) -> bool:
    """Whether every version the register step's ``promotion.json`` files record still exists in the registry
    (the runner's extra up-to-date check of the step: False makes it register again)."""
    if not config.tracking.enabled or not config.tracking.register_model:
        return True
    records = sorted(Path(out_dir).glob(f"*/{L.PROMOTION_FILE}"))  # none: nothing recorded to look for
    try:
        client = get_client(config)
        for p in records:
            rec = read_json(p)
            if rec.get("version") is None:
                return False
            mv = client.get_model_version(rec["model_name"], str(rec["version"]))
            if (mv.tags or {}).get("run_dir") not in (None, str(config.run_dir().resolve())):
                return False
    except Exception as e:  # noqa: BLE001 - version (or the whole database) gone, or unreachable
        logger.info("register %s: registered versions not found (%s); registering again", out_dir, e)
        return False
    return True
