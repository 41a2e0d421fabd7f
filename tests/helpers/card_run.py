"""A crafted run folder for the model-card and export tests: a target's vanilla and fine-tuned evaluations (per-item
predictions and an ``aggregate.json`` the evaluate step's way), a finetune step's ``final/`` model (tiny GPT-2) and
manifest, laid out where the register step finds them."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from tests.helpers.predictions import write_predictions

from context_cda import layout as L
from context_cda.config import Config


def evaluation(folder: Path, ss_share: float, cs_share: float) -> dict:
    """Predictions (tests.helpers.predictions) and their aggregate.json, as ``ccda evaluate`` writes it."""
    from context_cda.evaluate import get_benchmark

    write_predictions(folder, ss_share, cs_share)
    metrics, counts, benchmarks = {}, {}, {}
    for b in ("stereoset", "crows"):
        rows = pd.read_parquet(folder / b / L.PREDICTIONS_FILE).to_dict("records")
        agg = get_benchmark(b).aggregate(rows, Config().evaluate)
        metrics.update(get_benchmark(b).flat(agg))
        counts.update({f"{b}_in": len(rows), f"{b}_scored": len(rows), f"{b}_rejected": 0})
        benchmarks[b] = agg
    data = {"name": folder.name, "bias_type": "gender", "family": "causal", "metrics": metrics, "counts": counts,
            "crows_mode": "bias-bench", "benchmarks": benchmarks}
    (folder / L.AGGREGATE_FILE).write_text(json.dumps(data))
    return data


def copy_model(src: Path, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file():
            (dest / f.name).write_bytes(f.read_bytes())
    return dest


def crafted_run(run: Path, target: str, ref: str, arm: str = "cda", ss: float = 0.52, cs: float = 0.51,
                model_src: Path | None = None) -> dict:
    """The evaluations and the fine-tuned model of (target, arm, seed 13) in run folder ``run``; returns the
    candidate's aggregate."""
    from context_cda.models import resolve_pretrained

    lay = L.RunLayout(run).check()
    van = evaluation(lay.evaluation_dir(target), 0.75, 0.74)
    agg = evaluation(lay.evaluation_dir(target, arm, 13), ss, cs)
    ft = lay.step_dir("finetune", target=target, arm=arm, seed=13)
    ft.mkdir(parents=True, exist_ok=True)
    pd.DataFrame([{"epoch": e, "arm": arm, "target": target, "seed": 13, **m["metrics"]}
                  for e, m in ((0, van), (2, agg))]).to_csv(ft / L.METRICS_FILE, index=False)
    copy_model(model_src or Path(resolve_pretrained(ref)), ft / L.FINAL_DIR)
    manifest = {"config": {"train": {"epochs": 2, "batch_size": 4, "grad_accum": 1, "learning_rate": 5e-5,
                                     "max_seq_len": 32, "precision": "fp32"}},
                "summary": {"texts": 40, "tokens_available": 900, "sequences": 30, "tokens": 600, "token_budget": 600,
                            "epochs": 2, "steps": 16}}
    (ft / "manifest.json").write_text(json.dumps(manifest))
    return agg


def card_config(run: Path, targets: dict[str, str], **tracking) -> Config:
    return Config.model_validate({"run": {"run_dir": str(run), "targets": targets},
                                  "train": {"arms": ["cda"], "seeds": [13]},
                                  "evaluate": {"benchmarks": ["stereoset", "crows"]}, "tracking": tracking})
