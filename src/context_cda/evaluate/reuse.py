"""The last epoch's per-epoch scores, reused by the evaluate step of the same fine-tuned model.

A fine-tuning run scores the per-epoch benchmarks (StereoSet, CrowS-Pairs, next-token) after its last epoch, and the
evaluate step then scores that very model on every benchmark: the same items, settings and weights, done twice. So
each per-epoch result is written beside its predictions (``predictions/epoch-<N>/<benchmark>/result.json``: the
aggregate, the rejected items and a fingerprint of the settings and items), and the evaluate step takes a
benchmark from there instead of scoring it again when

* its model is a finetune step's ``final/`` folder, and the step's manifest says training ended at epoch N;
* the fingerprint matches: the ``evaluate`` settings (less the benchmark lists and ``after_training``, which do not
  change a benchmark's scores) and every item the benchmark reads, compared by value.

The vanilla model is the same case at epoch 0: every fine-tuning scores the untouched target before it trains,
so the evaluate step of the vanilla target (``evaluate-vanilla``) takes a per-epoch benchmark from the epoch-0
predictions of a fine-tuning of that target in the run folder when its manifest names the same model reference
and device and the fingerprint matches (:func:`sources`); run before any fine-tuning, it scores them itself.

Anything else (another model, changed settings or data, a run without the file) is scored as usual.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import layout as L
from ..io import MANIFEST, json_hash, read_json, write_json

if TYPE_CHECKING:  # pragma: no cover
    from ..config import Config, EvaluateConfig

#: settings that choose which benchmarks run, not how one is scored
_NOT_SCORING = {"benchmarks", "arm_benchmarks", "after_training"}


def fingerprint(cfg: EvaluateConfig, name: str, items: list[Any]) -> str:
    """What a benchmark's scores depend on besides the model: its settings and its items, by value."""
    settings = {k: v for k, v in cfg.model_dump(mode="json").items() if k not in _NOT_SCORING}
    return json_hash({"benchmark": name, "evaluate": settings, "items": [repr(i) for i in items]})


def save(folder: Path, name: str, result: Mapping[str, Any]) -> Path:
    """``<folder>/<name>/result.json`` beside the predictions (``result``: one benchmark's result of
    :func:`context_cda.evaluate.evaluate_model` with its ``fingerprint``): what the evaluate step reuses."""
    return write_json(Path(folder) / name / L.EPOCH_RESULT_FILE, {
        "fingerprint": result["fingerprint"], "aggregate": result["aggregate"], "rejected": list(result["rejected"]),
        "n_items": result["n_items"], "seconds": result["seconds"]})


def last_epoch_dir(model_dir: Path | str) -> Path | None:
    """The per-epoch predictions of the epoch ``model_dir`` (a finetune step's ``final/``) holds, or None."""
    step = Path(model_dir).parent
    if Path(model_dir).name != L.FINAL_DIR:
        return None
    epochs = _manifest(step).get("summary", {}).get("epochs")
    found = L.epoch_predictions_dir(step, int(epochs)) if isinstance(epochs, int) and epochs > 0 else None
    return found if found is not None and found.is_dir() else None


def sources(model_dir: Path | str | None, config: Config | None = None, vanilla: str | None = None
            ) -> list[tuple[Path, str]]:
    """Where a model's per-epoch scores may already be, as (predictions folder, what it is): a fine-tuned
    model's last epoch (``model_dir``, a finetune step's ``final/``), or, for the vanilla model of target
    ``vanilla``, the epoch 0 of each of that target's fine-tunings in ``config``'s run folder that loaded the same
    model reference on the same device."""
    if model_dir:
        folder = last_epoch_dir(model_dir)
        return [(folder, f"the fine-tuning's epoch {L.epoch_of(folder)}")] if folder is not None else []
    if config is None or vanilla is None or vanilla not in config.run.targets:
        return []
    want = {f"run.targets.{vanilla}": config.run.targets[vanilla], "run.device": config.run.device}
    fanin = L.fanin_dir(L.RunLayout.of(config).root, "finetune", {"target": vanilla})
    out = []
    for keys, step in L.discover(fanin, "finetune", fixed={"target": vanilla}):  # whatever arms the folder holds
        folder = L.epoch_predictions_dir(step, 0)
        if folder.is_dir() and _loaded(step, want):
            out.append((folder, f"epoch 0 of the fine-tuning {keys['arm']}/seed-{keys['seed']} (the untouched model)"))
    return out


def _loaded(step: Path, want: Mapping[str, Any]) -> bool:
    """Whether the finetune step's manifest records the config values ``want`` (its model reference, device)."""
    config = _manifest(step).get("config", {})
    return all(config.get(k) == v for k, v in want.items())


def _manifest(step: Path) -> dict[str, Any]:
    """A finetune step's manifest; {} when it is missing or unreadable (then nothing is reused)."""
    try:
        return read_json(step / MANIFEST) if (step / MANIFEST).is_file() else {}
    except Exception:  # noqa: BLE001 - an unreadable manifest only means nothing is reused
        return {}


def reusable(found: list[tuple[Path, str]], cfg: EvaluateConfig, loaded: Mapping[str, list[Any]]
             ) -> dict[str, dict[str, Any]]:
    """``{benchmark: result}`` (as :func:`context_cda.evaluate.evaluate_scorer` returns them) for the benchmarks of
    ``loaded`` that one of the ``found`` folders (:func:`sources`) scored with the same settings and items."""
    import pandas as pd

    out: dict[str, dict[str, Any]] = {}
    for name, items in loaded.items():
        for folder, what in found:
            res, preds = folder / name / L.EPOCH_RESULT_FILE, folder / name / L.PREDICTIONS_FILE
            if not (res.is_file() and preds.is_file()):
                continue
            saved = read_json(res)
            if saved.get("fingerprint") != fingerprint(cfg, name, items):
                continue
            out[name] = {"rows": pd.read_parquet(preds).to_dict("records"), "rejected": saved.get("rejected", []),
                         "aggregate": {**saved["aggregate"], "reused_from": what},
                         "info": {}, "seconds": 0.0, "n_items": int(saved["n_items"])}  # no time spent here
            break
    return out
