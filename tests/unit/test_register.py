"""The register step without a server: where the gate's per-item evidence is found (evaluate steps, else the
per-epoch predictions that fine-tuning saves), seeds pooled, the decision written with tracking off, and the
runner's registry check on a local sqlite store whose database is deleted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from tests.helpers.predictions import write_predictions

from context_cda.config import Config
from context_cda.layout import EVIDENCE_FILE, RunLayout, epoch_predictions_dir

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "evaluate"


def _model(folder: Path) -> Path:
    from context_cda.models import resolve_pretrained

    src = Path(resolve_pretrained("tiny:gpt2"))
    folder.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file():
            (folder / f.name).write_bytes(f.read_bytes())
    return folder


def _cfg(run: Path, **over) -> Config:
    return Config.model_validate({"run": {"run_dir": str(run), "targets": {"tg": "tiny:gpt2"}},
                                  "train": {"arms": ["cda"], "seeds": [13, 14]}, **over})


def test_inputs_prefer_the_evaluate_steps_and_fall_back_to_the_epoch_predictions(tmp_path):
    from context_cda.tracking import register_inputs

    run = tmp_path / "run"
    lay = RunLayout(run)
    cfg = _cfg(run)
    for seed in (13, 14):
        ft = lay.step_dir("finetune", target="tg", arm="cda", seed=seed)
        write_predictions(epoch_predictions_dir(ft, 0), 0.75, 0.75)
        write_predictions(epoch_predictions_dir(ft, 2), 0.60, 0.60)
        write_predictions(epoch_predictions_dir(ft, 1), 0.99, 0.99)  # an earlier epoch: never the candidate's
    write_predictions(lay.evaluation_dir("tg", "cda", 14), 0.50, 0.50)
    inputs = register_inputs(cfg, "tg", "cda")
    assert inputs["items_seed-13"] == epoch_predictions_dir(lay.step_dir("finetune", target="tg", arm="cda",
                                                                         seed=13), 2)
    assert inputs["items_seed-14"] == lay.evaluation_dir("tg", "cda", 14)
    assert inputs["items_vanilla"].name == "epoch-0"  # no vanilla evaluate step: a finetune step's epoch 0
    write_predictions(lay.evaluation_dir("tg"), 0.70, 0.70)
    assert register_inputs(cfg, "tg", "cda")["items_vanilla"] == lay.evaluation_dir("tg")


def test_seeds_are_pooled_and_the_decision_is_written_with_tracking_off(tmp_path):
    from context_cda.tracking import run_register
    from context_cda.tracking.register import gate_evidence

    run = tmp_path / "run"
    s13 = write_predictions(tmp_path / "s13", 0.50, 0.50)
    s14 = write_predictions(tmp_path / "s14", 0.54, 0.52)
    van = write_predictions(tmp_path / "van", 0.75, 0.74)
    inputs = {"model": _model(tmp_path / "final"), "items_seed-13": s13, "items_seed-14": s14, "items_vanilla": van}
    cand, vanilla = gate_evidence(inputs)
    assert cand.seeds == [13, 14] and len(cand.sources) == 2
    assert cand.items["stereoset"].columns["ss"][:65].tolist() == [1.0] * 60 + [0.5] * 5  # 60 vs 65 stereotyped
    cfg = _cfg(run, tracking={"enabled": False})
    out = run / "register" / "tg" / "cda"
    summary = run_register(cfg, inputs, out, "tg", "cda", discover=False, seed=13)
    assert summary["promote"] and summary["evidence_seeds"] == [13, 14] and not summary["registered"]
    record = json.loads((out / "promotion.json").read_text())
    assert record["candidate"]["stereoset_ss"] == pytest.approx(52.0, abs=1.5)  # the mean over the two seeds
    assert record["comparisons"]["vs_vanilla"]["crows_cs"]["ci"][0] > 0  # the shift toward 50
    assert set(pd.read_parquet(out / EVIDENCE_FILE)["benchmark"]) == {"stereoset", "crows"}


def test_without_per_item_scores_the_gate_refuses_naming_the_metrics(tmp_path):
    from context_cda.tracking import run_register

    cfg = _cfg(tmp_path / "run", tracking={"enabled": False})
    s = run_register(cfg, {"model": _model(tmp_path / "final")}, tmp_path / "out", "tg", "cda", discover=False)
    assert not s["promote"]
    assert {"refused: the candidate has no stereoset_ss (no per-item stereoset predictions to compare)",
            "refused: the vanilla model has no crows_cs (no per-item crows predictions to compare)"} <= set(s["reasons"])


def test_registered_versions_exist_notices_a_deleted_database(tmp_path):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    from context_cda.tracking import registered_versions_exist

    run = tmp_path / "runs" / "r"
    cfg = _cfg(run)
    db = tmp_path / "runs" / "mlflow.db"
    uri = f"sqlite:///{db}"
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    client.create_registered_model("tg-debiased")
    mv = client.create_model_version("tg-debiased", source=str(tmp_path), run_id=None)
    client.set_model_version_tag("tg-debiased", mv.version, "run_dir", str(run.resolve()))
    reg = run / "register" / "tg"
    (reg / "cda").mkdir(parents=True)
    (reg / "cda" / "promotion.json").write_text(json.dumps({"model_name": "tg-debiased", "version": mv.version}))
    assert registered_versions_exist(cfg, reg, target="tg")
    db.unlink()  # a new process (the next `ccda run`) finds the version gone: mlflow keeps the open store per process
    code = ("import sys; from context_cda.config import Config; from context_cda.tracking import "
            "registered_versions_exist as f; cfg = Config.model_validate_json(sys.argv[1]); "
            "print(f(cfg, sys.argv[2], target='tg'))")
    out = subprocess.run([sys.executable, "-c", code, cfg.model_dump_json(by_alias=True), str(reg)],
                         capture_output=True, text=True, check=True, env={**os.environ, "MLFLOW_TRACKING_URI": ""})
    assert out.stdout.strip().splitlines()[-1] == "False"
    off = _cfg(run, tracking={"enabled": False})
    assert registered_versions_exist(off, reg, target="tg")  # nothing registered to look for


def test_finetune_saves_epoch_0_and_the_last_epochs_predictions(tmp_path):
    pytest.importorskip("accelerate")
    from context_cda.tracking.evidence import last_epoch_dir, read_predictions
    from context_cda.train import run_finetune

    run = tmp_path / "run"
    cfg = Config.model_validate({
        "run": {"run_dir": str(run), "targets": {"tg": "tiny:gpt2"}, "device": "cpu"},
        "train": {"epochs": 2, "batch_size": 4}, "tracking": {"enabled": False},
        "evaluate": {"stereoset_path": str(FIX / "stereoset_tiny.json"), "crows_path": str(FIX / "crows_tiny.csv"),
                     "bias_type": "all"},
    })
    corpus = tmp_path / "cda.parquet"
    pd.DataFrame({"original": ["He said that his father was a doctor."] * 4,
                  "counterfactual": ["She said that her mother was a doctor."] * 4}).to_parquet(corpus)
    out = RunLayout(run).step_dir("finetune", target="tg", arm="cda", seed=13)
    run_finetune(cfg, {"cda": corpus}, out, "tg", "cda", token_budget=60)
    assert sorted(p.name for p in (out / "predictions").iterdir()) == ["epoch-0", "epoch-2"]
    last = last_epoch_dir(out)
    assert last is not None and last.name == "epoch-2"
    items = read_predictions(last)
    assert set(items) == {"stereoset", "crows"} and len(items["crows"]) == 4
    metrics = pd.read_csv(out / "metrics.csv")
    assert {"stereoset_ss_ci_low", "crows_cs_ci_high"} <= set(metrics.columns)
