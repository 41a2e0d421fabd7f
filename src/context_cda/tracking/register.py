"""The ``register`` stage: log a fine-tuned model to MLflow, register it and run the promotion gate.

Inputs (``inputs`` mapping):

* ``model`` (required): the ``save_pretrained`` folder, ``finetune/<target>/<arm>/seed-<seed>/final``;
* ``metrics``: that step's ``metrics.csv``; its last row is the candidate's metrics and its epoch-0 row the
  vanilla model's, unless
* ``evaluation`` / ``vanilla``: JSON files of ``{metric: value}`` (or ``{"metrics": {...}}``, the evaluate
  stage's ``aggregate.json``), which take precedence (:func:`register_inputs` picks up the evaluate steps'
  ``aggregate.json`` of the arm and of the vanilla target when present);
* any other key: a file or folder logged as an artifact under ``inputs/<key>`` (stage summaries, the SE
  histogram, corpus statistics).

The stage table's ``register`` step is :func:`run_register_target`: every arm of one target, in order.
The version is registered as ``<target>-debiased`` with its bias metrics as version tags, gets the alias
``candidate``, and ``champion`` when :func:`~context_cda.tracking.promotion.decide` says so. The decision and its
reasons go to version and run tags, to ``promotion.json`` in the run's artifacts and in ``out_dir``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import layout as L
from ..config import arm_k
from ..errors import InputError
from ..io import MANIFEST, StageRecorder, read_json, write_json
from .promotion import CS, ICAT, LMS, SS, PromotionPolicy, decide
from .runs import get_client, tracker_for, tracking_uri

if TYPE_CHECKING:  # pragma: no cover
    from ..config import Config

logger = logging.getLogger(__name__)

KNOWN_INPUTS = {"model", "metrics", "evaluation", "vanilla"}
TASKS: dict[str, str] = {"causal": "text-generation", "masked": "fill-mask"}
TAG_METRICS = (SS, LMS, ICAT, CS)


def registered_name(target: str) -> str:
    return f"{target}-debiased"


def register_inputs(
    config: Config, target: str, arm: str, seed: int | None = None, folders: Mapping[str, Path | str] | None = None
) -> dict[str, Path]:
    """The per-arm ``inputs`` of :func:`run_register`, found in the register step's folders (``folders``: the
    stage table's ``finetune``, ``evaluations`` and ``filtered`` inputs; default: the run folder's).

    ``seed`` (default: the first of ``train.seeds``) picks the fine-tuned model that is registered.
    """
    from .. import stages as T

    folders = folders or T.step_inputs(config, "register", target=target)
    seed = config.train.seeds[0] if seed is None else seed
    fixed = {"target": target}
    ft = L.within(folders["finetune"], "finetune", fixed, arm=arm, seed=seed)
    out: dict[str, Path] = {"model": ft / L.FINAL_DIR, "metrics": ft / L.METRICS_FILE}
    extras = {"finetune_summary": ft / MANIFEST, "corpus_stats": ft / L.CORPUS_STATS_FILE}
    k = arm_k(arm, config.train.k)
    if k is not None and folders.get("filtered"):
        corpus = L.filtered_in(folders["filtered"], k)
        extras.update(se_hist=corpus.parent / L.SE_HIST_FILE, filter_summary=corpus.parent / MANIFEST)
    if folders.get("evaluations"):
        ev = folders["evaluations"]
        extras["evaluation"] = L.within(ev, "evaluate", fixed, arm=arm, seed=seed) / L.AGGREGATE_FILE
        extras["vanilla"] = L.within(ev, "evaluate", fixed, "evaluate-vanilla") / L.AGGREGATE_FILE
    out.update({k: Path(v) for k, v in extras.items() if Path(v).exists()})
    return out


def run_register_target(
    config: Config, inputs: Mapping[str, Path | str], out_dir: Path | str, target: str
) -> dict[str, Any]:
    """The ``register`` step of one target: every arm of ``train.arms`` in order (so the promotion gate sees
    the previous arm's decision), each into ``<out_dir>/<arm>/``."""
    results = {}
    seed = config.train.seeds[0]
    for arm in config.train.arms:
        arm_inputs = register_inputs(config, target, arm, seed, folders=inputs)
        results[arm] = run_register(config, arm_inputs, Path(out_dir) / L.safe_name(arm, "arm"), target, arm,
                                    discover=False, seed=seed)
    return {"target": target, "arms": results}


def _metrics_json(path: Path | str) -> dict[str, float]:
    data = read_json(path)
    if isinstance(data, dict) and isinstance(data.get("metrics"), dict):
        data = data["metrics"]
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object of metric -> value.")
    out = {}
    for k, v in data.items():
        with contextlib.suppress(TypeError, ValueError):
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
    cols = [c for c in df.columns if c not in ("epoch", "arm", "target")]

    def row(r) -> dict[str, float]:
        return {c: float(r[c]) for c in cols if pd.notna(r[c])}

    first = df.iloc[0]
    vanilla = row(first) if int(first["epoch"]) == 0 else {}
    return vanilla, row(df.iloc[-1])


@contextlib.contextmanager
def _fluent_uri(uri: str) -> Iterator[None]:
    """Point mlflow's fluent API (needed by ``log_model``) at ``uri`` and put everything back afterwards,
    including the MLFLOW_TRACKING_URI / MLFLOW_REGISTRY_URI variables mlflow sets as a side effect."""
    import mlflow
    from mlflow.tracking._model_registry import utils as registry_utils
    from mlflow.tracking._tracking_service import utils as tracking_utils

    env = {k: os.environ.get(k) for k in ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI")}
    old_t = getattr(tracking_utils, "_tracking_uri", None)
    old_r = getattr(registry_utils, "_registry_uri", None)
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    try:
        yield
    finally:
        mlflow.set_tracking_uri(old_t)
        registry_utils._registry_uri = old_r
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _version_metrics(mv) -> dict[str, float]:
    out = {}
    for k in TAG_METRICS:
        with contextlib.suppress(KeyError, TypeError, ValueError):
            out[k] = float(mv.tags[k])
    return out


def pip_requirements() -> list[str]:
    """Pinned requirements of a logged model (MLflow's own inference trips over optional torch extras)."""
    from importlib import metadata

    reqs = []
    for pkg in ("torch", "transformers", "accelerate", "safetensors", "sentencepiece", "tokenizers"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            reqs.append(f"{pkg}=={metadata.version(pkg).split('+')[0]}")
    return reqs


def log_hf_model(model_dir: Path, family: str, run_id: str, name: str):
    """Log a ``save_pretrained`` folder to ``run_id`` and register it as ``name``; returns (info, flavor).

    The transformers flavour is used where transformers still has a pipeline task for the family
    (text-generation, fill-mask). Seq2seq models have none in transformers 5 (``text2text-generation`` was
    removed), so they are logged as a pyfunc model carrying the same folder (:class:`HFFolderModel`), which
    ``mlflow.pyfunc.load_model`` serves as a sentence scorer.
    """
    import mlflow
    from transformers import AutoTokenizer

    from ..models import auto_class_for

    with mlflow.start_run(run_id=run_id):
        task = TASKS.get(family)
        if task is not None:
            try:
                model = auto_class_for(family).from_pretrained(model_dir)  # type: ignore[arg-type]
                tok = AutoTokenizer.from_pretrained(model_dir)
                info = mlflow.transformers.log_model(
                    transformers_model={"model": model, "tokenizer": tok},
                    task=task,
                    name="model",
                    registered_model_name=name,
                    pip_requirements=pip_requirements(),
                )
                return info, "transformers"
            except Exception as e:  # noqa: BLE001 - task unsupported by this transformers/mlflow pair
                logger.warning("transformers flavour failed for %s (%s); logging a pyfunc model", model_dir, e)
        from .pyfunc import HFFolderModel

        info = mlflow.pyfunc.log_model(
            name="model",
            python_model=HFFolderModel(),
            artifacts={"hf_model": str(model_dir)},
            registered_model_name=name,
            pip_requirements=pip_requirements(),
        )
        return info, "pyfunc"


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
    exist *now* (see :func:`register_inputs`): the evaluate stage's aggregates, the SE histogram, summaries.
    """
    from transformers import AutoConfig

    from ..models import family_of_config

    out = Path(out_dir)
    inputs = dict(inputs or {})
    if discover or not inputs:
        inputs = {**register_inputs(config, target, arm, seed), **inputs}
    model_dir = Path(inputs.get("model", ""))
    if not (model_dir / "config.json").is_file():
        raise InputError(f"register {target}/{arm}: {model_dir} is not a save_pretrained folder; run finetune.")
    rec = StageRecorder(
        "register", out, {"tracking": config.tracking.model_dump(mode="json"), "target": target, "arm": arm}, inputs
    )
    vanilla, final = metrics_from_csv(inputs["metrics"]) if "metrics" in inputs else ({}, {})
    if "evaluation" in inputs:
        final = {**final, **_metrics_json(inputs["evaluation"])}
    if "vanilla" in inputs:
        vanilla = {**vanilla, **_metrics_json(inputs["vanilla"])}
    family = family_of_config(AutoConfig.from_pretrained(model_dir))
    name = registered_name(target)
    policy = PromotionPolicy.from_config(config.tracking.promotion)

    summary: dict[str, Any] = {"target": target, "arm": arm, "model_name": name, "metrics": final,
                               "vanilla": vanilla, "registered": False, "version": None}
    tracker = tracker_for(config, target=target, arm=arm, seed=seed)
    if not config.tracking.enabled or not config.tracking.register_model:
        decision = decide(final, None, vanilla, policy)
        summary.update(promote=decision.promote, reasons=decision.reasons, decision=decision.to_dict())
        write_json(out / L.PROMOTION_FILE, summary)
        rec.finish({"registered": 0}, outputs={"promotion": out / L.PROMOTION_FILE}, summary=summary)
        return summary

    client = get_client(config)
    for key, path in inputs.items():
        if key not in KNOWN_INPUTS:
            tracker.log_artifact(path, f"inputs/{key}" if Path(path).is_dir() else "inputs")
    with _fluent_uri(tracking_uri(config)):
        info, flavor = log_hf_model(model_dir, family, tracker.run_id, name)
    version = str(info.registered_model_version)
    # full precision: the promotion gate compares these tags with the next candidate's metrics
    tags = {k: repr(float(v)) for k, v in final.items() if k in TAG_METRICS}
    tags.update({"vanilla_" + k: repr(float(v)) for k, v in vanilla.items() if k in TAG_METRICS})
    tags.update({"target": target, "arm": arm, "family": family, "flavor": flavor, "run_id": tracker.run_id,
                 "run_dir": str(config.run_dir().resolve())})
    for k, v in tags.items():
        client.set_model_version_tag(name, version, k, v)

    champion_mv = None
    with contextlib.suppress(Exception):
        champion_mv = client.get_model_version_by_alias(name, "champion")
    champion = _version_metrics(champion_mv) if champion_mv is not None else None
    decision = decide(final, champion, vanilla, policy)
    for alias in decision.aliases:
        client.set_registered_model_alias(name, alias, version)
    reasons = "; ".join(decision.reasons)
    client.set_model_version_tag(name, version, "promotion_decision", "promoted" if decision.promote else "refused")
    client.set_model_version_tag(name, version, "promotion_reasons", reasons[:4000])
    tracker.set_tags({"promotion_decision": "promoted" if decision.promote else "refused",
                      "promotion_reasons": reasons[:4000], "registered_version": version})
    record = {**decision.to_dict(), "model_name": name, "version": version,
              "champion_version": champion_mv.version if champion_mv is not None else None}
    tracker.log_dict(record, "promotion.json")
    tracker.log_metrics({f"final_{k}": v for k, v in final.items()}, step=0)
    summary.update(registered=True, version=version, promote=decision.promote, reasons=decision.reasons,
                   previous_champion=record["champion_version"], aliases=decision.aliases,
                   tracking_uri=tracking_uri(config), model_uri=f"models:/{name}/{version}")
    write_json(out / L.PROMOTION_FILE, record)
    rec.finish({"registered": 1}, outputs={"promotion": out / L.PROMOTION_FILE}, summary=summary)
    logger.info("register %s v%s: %s", name, version, json.dumps(decision.reasons))
    return summary
