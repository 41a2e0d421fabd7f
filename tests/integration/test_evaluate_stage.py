"""The evaluate stage end to end on a tiny model: files, manifest, CLI table, per-epoch helper."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from tests.helpers.envelope import enveloped

from context_cda.config import load_config

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "evaluate"



def _cfg(tmp_path, **evaluate):
    ev = {"stereoset_path": str(FIX / "stereoset_tiny.json"), "crows_path": str(FIX / "crows_tiny.csv"),
          "bias_type": "all", "batch_size": 4, **evaluate}
    return load_config(None, {"run": {"run_dir": str(tmp_path / "run"), "data_cache": str(tmp_path / "cache"),
                                      "device": "cpu"}, "evaluate": ev})


def test_run_evaluate_writes_predictions_aggregate_and_manifest(tmp_path):
    from context_cda.evaluate import run_evaluate

    cfg = _cfg(tmp_path)
    out = tmp_path / "run" / "evaluate" / "gpt2" / "vanilla"
    summary = enveloped(cfg, "evaluate-vanilla", run_evaluate, {}, out, {"target": "gpt2"}, model="tiny:gpt2")
    assert summary["family"] == "causal" and summary["crows_mode"] == "bias-bench"
    point = {"stereoset_ss", "stereoset_lms", "stereoset_icat", "crows_cs", "crows_stereo", "crows_antistereo"}
    # every point estimate with its interval's bounds
    assert set(summary["metrics"]) == point | {f"{m}_ci_{b}" for m in point for b in ("low", "high")}
    ss = pd.read_parquet(out / "stereoset" / "predictions.parquet")
    assert len(ss) == 3 and {"id", "target", "score_stereotype", "score_anti_stereotype", "score_unrelated"} <= set(ss)
    cp = pd.read_parquet(out / "crows" / "predictions.parquet")
    assert len(cp) == 4 and {"id", "score_more", "score_less", "mode"} <= set(cp)
    agg = json.loads((out / "aggregate.json").read_text())
    assert agg["benchmarks"]["crows"]["mode"] == "bias-bench"
    assert agg["metrics"]["stereoset_ss"] == agg["benchmarks"]["stereoset"]["overall"]["ss"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["stage"] == "evaluate-vanilla" and manifest["summary"]["counts"]["crows_scored"] == 4
    assert manifest["counts"]["items_in"] == manifest["summary"]["counts"]["crows_in"] + 3
    assert set(manifest["summary"]["benchmark_files"]) == {"stereoset", "crows"}
    assert (out / "rejected.parquet").is_file()


def test_inputs_override_config_paths_and_missing_file_is_a_clear_error(tmp_path):
    from context_cda.errors import InputError
    from context_cda.evaluate import run_evaluate

    cfg = _cfg(tmp_path, benchmarks=["stereoset"], stereoset_path=str(tmp_path / "nope.json"))
    with pytest.raises(InputError, match="nope.json: stereoset file not found"):
        run_evaluate(cfg, {}, tmp_path / "o", "tiny:gpt2")
    s = run_evaluate(cfg, {"stereoset": FIX / "stereoset_tiny.jsonl"}, tmp_path / "o", "tiny:gpt2")
    assert s["counts"]["stereoset_scored"] == 3


def test_evaluate_model_flat_metrics(tmp_path):
    from context_cda.evaluate import evaluate_model
    from context_cda.models import load_lm

    cfg = _cfg(tmp_path, crows_mode="auto")
    model, tok, _ = load_lm("tiny:distilbert", device="cpu")
    m = evaluate_model(model, tok, cfg.evaluate)
    assert set(m) >= {"stereoset_ss", "stereoset_lms", "stereoset_icat", "crows_cs"}
    assert all(isinstance(v, float) for v in m.values())


def test_cli_prints_a_table(tmp_path, capsys):
    from context_cda.cli import main

    rc = main([
        "evaluate", "--model", "tiny:t5", "--benchmarks", "stereoset,crows", "--bias-type", "gender",
        "--crows-mode", "lm-eval", "--stereoset-path", str(FIX / "stereoset_tiny.jsonl"),
        "--crows-path", str(FIX / "crows_tiny.csv"), "--run-dir", str(tmp_path / "run"), "--no-progress",
        "--set", f"run.data_cache={tmp_path / 'cache'}",
    ])
    out = capsys.readouterr().out
    assert rc == 0
    assert "SS" in out and "ICAT" in out and "CS" in out and "mode=lm-eval" in out
    assert (tmp_path / "run" / "evaluate" / "t5" / "vanilla" / "aggregate.json").is_file()
    rc = main(["evaluate", "--model", "tiny:gpt2", "--crows-mode", "nangia", "--benchmarks", "crows",
               "--crows-path", str(FIX / "crows_tiny.csv"), "--run-dir", str(tmp_path / "run")])
    assert rc == 2 and "needs a masked or seq2seq LM" in capsys.readouterr().err
