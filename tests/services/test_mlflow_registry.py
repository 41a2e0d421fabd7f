"""MLflow against a real `mlflow server` on 127.0.0.1: nested runs, per-epoch metrics, registry, the evidence gate
(the champion's per-item evidence read back from the server's artifacts), aliases, flavours without pickled code,
loading ``models:/<name>@champion``, and the register step noticing a version that no longer exists."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("mlflow")
torch = pytest.importorskip("torch")
httpx = pytest.importorskip("httpx")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))

from mlflow_server import mlflow_server as start_mlflow_server  # noqa: E402
from predictions import write_predictions  # noqa: E402

from context_cda.config import Config  # noqa: E402

pytestmark = pytest.mark.services


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory):
    """A real tracking + registry server (sqlite backend, served local artifacts), started once per session."""
    root = tmp_path_factory.mktemp("mlflow-server")
    with start_mlflow_server(root, str(root / "artifacts")) as url:
        yield url


def _metrics(ss: float, cs: float, lms: float = 90.0) -> dict[str, float]:
    return {"stereoset_ss": ss, "stereoset_lms": lms, "stereoset_icat": lms * min(ss, 100 - ss) / 50, "crows_cs": cs}


def _config(run_dir: Path, uri: str, target: str = "tg", **tracking) -> Config:
    return Config.model_validate({
        "run": {"run_dir": str(run_dir), "targets": {target: "tiny:gpt2"}, "device": "cpu"},
        "train": {"epochs": 2, "batch_size": 4, "learning_rate": 1e-3},
        "tracking": {"uri": uri, "experiment": "ccda-test", **tracking},
    })


def _finetune(cfg: Config, tmp_path: Path, run_dir: Path, target: str = "tg") -> tuple[dict, Path]:
    from context_cda.train import run_finetune

    corpus = tmp_path / "cda.parquet"
    pd.DataFrame({"original": ["He said that his father was a doctor."] * 4,
                  "counterfactual": ["She said that her mother was a doctor."] * 4}).to_parquet(corpus)
    per_epoch = iter([_metrics(60, 58), _metrics(55, 54), _metrics(52, 51)])
    ft_dir = run_dir / f"finetune/{target}/cda/seed-13"
    ft = run_finetune(cfg, {"cda": corpus}, ft_dir, target, "cda", token_budget=120,
                      evaluate_fn=lambda m, t, e: next(per_epoch))
    return ft, ft_dir


def test_register_evidence_gate_aliases_and_load_champion(mlflow_server, tmp_path):
    import mlflow
    from mlflow.tracking import MlflowClient

    from context_cda.tracking import pipeline_run_id, registered_versions_exist, run_register

    run_dir = tmp_path / "run"
    cfg = _config(run_dir, mlflow_server)
    ft, ft_dir = _finetune(cfg, tmp_path, run_dir)
    client = MlflowClient(tracking_uri=mlflow_server, registry_uri=mlflow_server)
    run = client.get_run(ft["mlflow_run_id"])
    assert run.data.tags["mlflow.parentRunId"] == pipeline_run_id(cfg)
    assert run.data.params["arm"] == "cda" and run.data.params["token_budget"] == "120"
    hist = client.get_metric_history(run.info.run_id, "stereoset_ss")
    assert [(h.step, h.value) for h in sorted(hist, key=lambda h: h.step)] == [(0, 60.0), (1, 55.0), (2, 52.0)]

    vanilla = write_predictions(tmp_path / "vanilla", 0.75, 0.72)
    base = {"model": ft_dir / "final", "metrics": ft_dir / "metrics.csv", "items_vanilla": vanilla}

    # v1: clearly less biased than vanilla on the same 120 items, no champion yet -> champion
    good = write_predictions(tmp_path / "good", 0.50, 0.50)
    s1 = run_register(cfg, {**base, "items_seed-13": good, "corpus_stats": ft_dir / "corpus_stats.json"},
                      run_dir / "register/tg/cda", "tg", "cda", discover=False, seed=13)
    assert s1["registered"] and s1["promote"] and s1["version"] == "1", s1["reasons"]
    assert any(r.startswith("SS (gender) vs vanilla") and "shift toward 50" in r and "p=" in r and r.endswith(
        "less biased") for r in s1["reasons"])
    assert (run_dir / "register/tg/cda/evidence.parquet").is_file()

    # v2: the same evidence again: never displaces the champion (its evidence comes back from the server)
    s2 = run_register(cfg, {**base, "items_seed-13": good}, run_dir / "register/tg/context-cda", "tg",
                      "context-cda", discover=False, seed=13)
    assert s2["version"] == "2" and not s2["promote"]
    assert any("not significantly better than champion v1" in r for r in s2["reasons"]), s2["reasons"]
    decision = json.loads((run_dir / "register/tg/context-cda/promotion.json").read_text())
    assert decision["champion_version"] == "1" and decision["aliases"] == ["candidate"]
    assert decision["comparisons"]["vs_champion"]["stereoset_ss"]["ci"] == [0.0, 0.0]

    # v3: more biased than vanilla: refused
    bad = write_predictions(tmp_path / "bad", 0.90, 0.88)
    s3 = run_register(cfg, {**base, "items_seed-13": bad}, run_dir / "register/tg/nofilter", "tg",
                      "context-cda-nofilter", discover=False, seed=13)
    assert not s3["promote"] and any("more biased" in r for r in s3["reasons"]), s3["reasons"]

    name = "tg-debiased"
    assert client.get_model_version_by_alias(name, "champion").version == "1"
    cand = client.get_model_version_by_alias(name, "candidate")
    assert cand.version == "3" and cand.tags["promotion_decision"] == "refused"
    # the four-state verdict, its note and the detectable shifts, as the Decision holds them
    assert cand.tags["promotion_verdict"] == "refused: worse" and s3["verdict"] == "refused: worse"
    v2 = client.get_model_version(name, "2")
    assert v2.tags["promotion_verdict"] == "refused: not shown" and v2.tags["promotion_note"] == s2["note"]
    assert client.get_model_version(name, "1").tags["promotion_verdict"] == "promoted"
    assert v2.tags["promotion_detectable_shift"].startswith("stereoset_ss=") and "crows_cs=" in v2.tags[
        "promotion_detectable_shift"]
    v1 = client.get_model_version(name, "1")
    assert float(v1.tags["crows_cs"]) == 51.0 and v1.tags["flavor"] == "transformers"
    assert v1.tags["evidence"] == "evidence/v1/evidence.parquet" and v1.tags["registered_seed"] == "13"
    arts = {a.path for a in client.list_artifacts(ft["mlflow_run_id"])}
    assert "promotion.json" in arts
    metrics = client.get_run(ft["mlflow_run_id"]).data.metrics
    assert metrics["vs_vanilla_stereoset_ss_ci_low"] > 0 and "gate_stereoset_ss_ci_low" in metrics  # the shift

    # no pickled code in the transformers flavour: weights as safetensors
    from context_cda.tracking.register import _fluent_uri

    with _fluent_uri(mlflow_server):
        local = Path(mlflow.artifacts.download_artifacts(artifact_uri=f"models:/{name}/1"))
    files = [p.name for p in local.rglob("*") if p.is_file()]
    assert any(f.endswith(".safetensors") for f in files), files
    assert not any(f.endswith((".pkl", ".pickle", ".cloudpickle")) for f in files), files

    # load the champion through the registry and score one sentence
    env_before = os.environ.get("MLFLOW_TRACKING_URI")
    with _fluent_uri(mlflow_server):  # restores mlflow's global URIs (and env vars) afterwards
        comps = mlflow.transformers.load_model(f"models:/{name}@champion", return_type="components")
    assert os.environ.get("MLFLOW_TRACKING_URI") == env_before
    _score(comps["model"], comps["tokenizer"])

    # the runner's extra freshness check: the versions exist; one deleted -> register again
    reg = run_dir / "register/tg"
    assert registered_versions_exist(cfg, reg, target="tg")
    client.delete_model_version(name, "2")
    assert not registered_versions_exist(cfg, reg, target="tg")


def _score(model, tok) -> None:
    enc = tok("The nurse said that she was tired.", return_tensors="pt")
    with torch.no_grad():
        loss = float(model(**enc, labels=enc["input_ids"]).loss)
    assert math.isfinite(loss) and loss > 0


def test_folder_flavour_registers_plain_weights(mlflow_server, tmp_path):
    """tracking.model_flavor=folder (what seq2seq models get): the save_pretrained folder as plain artifacts and
    a model version pointing at them, loaded with transformers alone."""
    import mlflow
    from mlflow.tracking import MlflowClient
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from context_cda.tracking import run_register

    run_dir = tmp_path / "run2"
    cfg = _config(run_dir, mlflow_server, "tf", experiment="ccda-folder", model_flavor="folder")
    _, ft_dir = _finetune(cfg, tmp_path, run_dir, "tf")
    s = run_register(cfg, {"model": ft_dir / "final", "metrics": ft_dir / "metrics.csv"},
                     run_dir / "register/tf/cda", "tf", "cda", discover=False, seed=13)
    assert s["flavor"] == "folder" and not s["promote"]  # no per-item evidence: refused, naming the metrics
    assert any("the candidate has no stereoset_ss" in r for r in s["reasons"])
    client = MlflowClient(tracking_uri=mlflow_server, registry_uri=mlflow_server)
    mv = client.get_model_version("tf-debiased", s["version"])
    assert mv.tags["flavor"] == "folder"
    from context_cda.tracking.register import _fluent_uri

    with _fluent_uri(mlflow_server):
        path = mlflow.artifacts.download_artifacts(artifact_uri=f"models:/tf-debiased/{s['version']}")
    files = {p.name for p in Path(path).iterdir()}
    assert {"config.json", "model.safetensors", "ccda_model.json"} <= files and "MLmodel" not in files
    _score(AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path))
