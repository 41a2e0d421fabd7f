"""The evaluate step of a fine-tuned model reuses its last epoch's per-epoch scores (context_cda.evaluate.reuse):
the same numbers as scoring again, and nothing reused when the settings, the items or the model differ."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from tests.helpers.envelope import enveloped

from context_cda.config import Config

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "evaluate"
SENTENCES = ["The doctor said that he would help the nurse with her work.",
             "She went to the city because her brother was tired.",
             "His father wrote a letter to the teacher and the manager.",
             "The woman told the team that she was tired."] * 3


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _cfg(tmp_path: Path, **evaluate) -> Config:
    return Config.model_validate({
        "run": {"run_dir": str(tmp_path / "run"), "targets": {"tg": "tiny:gpt2"}, "device": "cpu", "seed": 7},
        "train": {"epochs": 2, "batch_size": 2, "learning_rate": 1e-3},
        "evaluate": {"benchmarks": ["stereoset", "crows", "winogender"], "stereoset_path": str(FIX / "stereoset_tiny.json"),
                     "crows_path": str(FIX / "crows_tiny.csv"), "winogender": {"max_items": 4}, **evaluate},
        "tracking": {"enabled": False},
    })


@pytest.fixture(scope="module")
def trained(tmp_path_factory, shared_data):
    """A tiny GPT-2 fine-tuned for 2 epochs with the real per-epoch evaluation (WinoGender from the mirror)."""
    from context_cda.train import run_finetune

    tmp = tmp_path_factory.mktemp("reuse")
    corpus = tmp / "corpus.parquet"
    pd.DataFrame({"text": SENTENCES}).to_parquet(corpus)
    out = tmp / "finetune"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CCDA_DATA_DIR", str(shared_data))
        mp.setenv("CCDA_DATA_CACHE", str(tmp / "data-cache"))
        mp.setenv("HF_HUB_OFFLINE", "1")
        enveloped(_cfg(tmp), "finetune", run_finetune, {"corpus": corpus}, out,  # its manifest names the last epoch
                  {"target": "tg", "arm": "cda", "seed": 13}, target="tg", arm="cda", token_budget=120)
        yield tmp, out


def _evaluate(cfg: Config, model: Path, out: Path) -> dict:
    from context_cda.evaluate import run_evaluate

    run_evaluate(cfg, {"model": model}, out, target="tg", arm="cda", seed=13)
    return json.loads((out / "aggregate.json").read_text())


def test_the_last_epochs_scores_are_reused_and_equal_a_fresh_scoring(trained):
    tmp, ft = trained
    assert (ft / "predictions" / "epoch-2" / "stereoset" / "result.json").is_file()
    agg = _evaluate(_cfg(tmp), ft / "final", tmp / "ev")
    assert agg["reused"] == ["crows", "stereoset"]  # the per-epoch benchmarks; winogender is scored here
    assert agg["benchmarks"]["stereoset"]["reused_from"] == "the fine-tuning's epoch 2"
    lone = tmp / "elsewhere" / "final"  # the same weights outside a finetune folder: scored again
    shutil.copytree(ft / "final", lone)
    fresh = _evaluate(_cfg(tmp), lone, tmp / "ev2")
    assert "reused" not in fresh
    assert fresh["metrics"].keys() == agg["metrics"].keys()
    for k, v in agg["metrics"].items():
        assert fresh["metrics"][k] == pytest.approx(v, abs=1e-9), k
    for b in ("stereoset", "crows"):
        a = pd.read_parquet(tmp / "ev" / b / "predictions.parquet")
        f = pd.read_parquet(tmp / "ev2" / b / "predictions.parquet")
        pd.testing.assert_frame_equal(a, f, check_exact=False, rtol=1e-9)


def test_other_settings_or_items_are_scored_again(trained):
    tmp, ft = trained
    assert "reused" not in _evaluate(_cfg(tmp, start_token="eos"), ft / "final", tmp / "ev3")
    assert "reused" not in _evaluate(_cfg(tmp, max_items=3), ft / "final", tmp / "ev4")
    # the benchmark lists choose what runs, not how: still reused
    again = _evaluate(_cfg(tmp, benchmarks=["crows", "stereoset"], after_training=False), ft / "final", tmp / "ev5")
    assert again["reused"] == ["crows", "stereoset"]


def test_a_result_file_of_another_epoch_or_item_set_is_not_taken(trained, tmp_path):
    from context_cda.evaluate.reuse import fingerprint, last_epoch_dir, reusable

    tmp, ft = trained
    copy = tmp_path / "ft"
    shutil.copytree(ft, copy)
    assert last_epoch_dir(copy / "final") == copy / "predictions" / "epoch-2"
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["summary"]["epochs"] = 3  # the final model is not the last evaluated epoch's
    (copy / "manifest.json").write_text(json.dumps(manifest))
    assert last_epoch_dir(copy / "final") is None
    cfg = _cfg(tmp).evaluate
    assert fingerprint(cfg, "crows", [1, 2]) != fingerprint(cfg, "crows", [1, 3])
    assert fingerprint(cfg, "crows", [1]) == fingerprint(cfg.model_copy(update={"benchmarks": ["crows"]}), "crows", [1])
    assert reusable([], cfg, {"crows": [1]}) == {}


def _vanilla(cfg: Config, out: Path) -> dict:
    from context_cda.evaluate import run_evaluate

    run_evaluate(cfg, {}, out, target="tg")
    return json.loads((out / "aggregate.json").read_text())


def test_the_vanilla_evaluation_takes_epoch_0_of_a_fine_tuning_of_the_run_and_equals_a_fresh_scoring(trained,
                                                                                                     tmp_path):
    """evaluate-vanilla after a fine-tuning of its target: the per-epoch benchmarks from that fine-tuning's epoch 0
    (the untouched model), the same rows and metrics as scoring the model itself; another run folder, another
    model reference or device in the fine-tuning's manifest, or other settings: scored."""
    from context_cda import layout as L

    tmp, ft = trained
    cfg = _cfg(tmp_path)
    step = L.RunLayout.of(cfg).step_dir("finetune", target="tg", arm="cda", seed=13)
    shutil.copytree(ft, step)
    agg = _vanilla(cfg, tmp_path / "ev")
    assert agg["reused"] == ["crows", "stereoset"]
    assert agg["benchmarks"]["crows"]["reused_from"] == "epoch 0 of the fine-tuning cda/seed-13 (the untouched model)"
    fresh = _vanilla(_cfg(tmp_path / "no-run"), tmp_path / "ev2")  # no fine-tuning there: scored
    assert "reused" not in fresh
    assert fresh["metrics"].keys() == agg["metrics"].keys()
    for k, v in agg["metrics"].items():
        assert fresh["metrics"][k] == pytest.approx(v, abs=1e-9), k
    for b in ("stereoset", "crows"):
        pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "ev" / b / "predictions.parquet"),
                                      pd.read_parquet(tmp_path / "ev2" / b / "predictions.parquet"),
                                      check_exact=False, rtol=1e-9)
    assert "reused" not in _vanilla(_cfg(tmp_path, max_items=3), tmp_path / "ev3")
    manifest = json.loads((step / "manifest.json").read_text())
    for key, other in (("run.targets.tg", "tiny:bert"), ("run.device", "cuda")):
        assert manifest["config"][key] != other
        changed = {**manifest, "config": {**manifest["config"], key: other}}
        (step / "manifest.json").write_text(json.dumps(changed))
        assert "reused" not in _vanilla(cfg, tmp_path / f"ev-{other}"), key
    (step / "manifest.json").write_text(json.dumps(manifest))
    assert _vanilla(cfg, tmp_path / "ev4")["reused"] == ["crows", "stereoset"]
