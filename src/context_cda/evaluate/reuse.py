"""The last epoch's per-epoch scores, reused by the evaluate step of the same fine-tuned model.

A fine-tuning run scores the per-epoch benchmarks (StereoSet, CrowS-Pairs, next-token) after its last epoch, and the
evaluate step then scores that very model on every benchmark: the same items, settings and weights, done twice. So
each per-epoch result is written beside its predictions (``predictions/epoch-<N>/<benchmark>/result.json``: the
aggregate, the rejected items and a fingerprint of the settings and items), and the evaluate step takes a
benchmark from there instead of scoring it again when

* its model is a finetune step's ``final/`` folder, and the step's manifest says training ended at epoch N;
* the fingerprint matches: the ``evaluate`` settings (less the benchmark lists and ``after_training``, which do not
  change a benchmark's scores) and every item the benchmark reads, compared by value.

Anything else (another model, changed settings or data, a run without the file) is scored as usual.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import layout as L
from ..io import MANIFEST, json_hash, read_json, write_json

if TYPE_CHECKING:  # pragma: no cover
    from ..config import EvaluateConfig

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
    if Path(model_dir).name != L.FINAL_DIR or not (step / MANIFEST).is_file():
        return None
    try:
        epochs = read_json(step / MANIFEST).get("summary", {}).get("epochs")
    except Exception:  # noqa: BLE001 - an unreadable manifest only means nothing is reused
        return None
    found = L.epoch_predictions_dir(step, int(epochs)) if isinstance(epochs, int) and epochs > 0 else None
    return found if found is not None and found.is_dir() else None


def reusable(model_dir: Path | str | None, cfg: EvaluateConfig, loaded: Mapping[str, list[Any]]
             ) -> dict[str, dict[str, Any]]:
    """``{benchmark: result}`` (as :func:`context_cda.evaluate.evaluate_scorer` returns them) for the benchmarks of
    ``loaded`` that the model's last epoch scored with the same settings and items."""
    import pandas as pd

    folder = last_epoch_dir(model_dir) if model_dir else None
    out: dict[str, dict[str, Any]] = {}
    if folder is None:
        return out
    for name, items in loaded.items():
        res, preds = folder / name / L.EPOCH_RESULT_FILE, folder / name / L.PREDICTIONS_FILE
        if not (res.is_file() and preds.is_file()):
            continue
        saved = read_json(res)
        if saved.get("fingerprint") != fingerprint(cfg, name, items):
            continue
        out[name] = {"rows": pd.read_parquet(preds).to_dict("records"), "rejected": saved.get("rejected", []),
                     "aggregate": {**saved["aggregate"], "reused_from": f"the fine-tuning's epoch {L.epoch_of(folder)}"},
                     "info": {}, "seconds": 0.0, "n_items": int(saved["n_items"])}  # no time spent here
    return out
