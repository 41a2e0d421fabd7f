"""MLflow against a real `mlflow server` on 127.0.0.1: nested runs, per-epoch metrics, registry, gate, aliases,
and loading ``models:/<name>@champion`` to score a sentence."""

from __future__ import annotations

import json
import math
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("mlflow")
torch = pytest.importorskip("torch")
httpx = pytest.importorskip("httpx")

from context_cda.config import Config  # noqa: E402

pytestmark = pytest.mark.services


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory):
    """A real tracking + registry server (sqlite backend, served local artifacts), started once per session."""
    root = tmp_path_factory.mktemp("mlflow-server")
    port = _free_port()
    exe = shutil.which("mlflow", path=str(Path(sys.executable).parent)) or "mlflow"
    cmd = [
        exe, "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
        "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
        "--serve-artifacts", "--artifacts-destination", str(root / "artifacts"),
    ]
    log = open(root / "server.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=root,
                            env={**os.environ, "MLFLOW_TRACKING_URI": ""})
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 180
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited: {(root / 'server.log').read_text()[-3000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.time() > deadline:
                raise RuntimeError(f"mlflow server not ready: {(root / 'server.log').read_text()[-3000:]}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _metrics(ss: float, cs: float, lms: float = 90.0) -> dict[str, float]:
    return {"stereoset_ss": ss, "stereoset_lms": lms, "stereoset_icat": lms * min(ss, 100 - ss) / 50, "crows_cs": cs}


def test_register_alias_gate_and_load_champion(mlflow_server, tmp_path):
    import mlflow
    from mlflow.tracking import MlflowClient

    from context_cda.tracking import pipeline_run_id, run_register
    from context_cda.train import run_finetune

    run_dir = tmp_path / "run"
    cfg = Config.model_validate({
        "run": {"run_dir": str(run_dir), "targets": {"tg": "tiny:gpt2"}, "device": "cpu"},
        "train": {"epochs": 2, "batch_size": 4, "learning_rate": 1e-3},
        "tracking": {"uri": mlflow_server, "experiment": "ccda-test"},
    })
    corpus = tmp_path / "cda.parquet"
    pd.DataFrame({"original": ["He said that his father was a doctor."] * 4,
                  "counterfactual": ["She said that her mother was a doctor."] * 4}).to_parquet(corpus)
    per_epoch = iter([_metrics(60, 58), _metrics(55, 54), _metrics(52, 51)])
    ft = run_finetune(cfg, {"cda": corpus}, run_dir / "finetune/tg/cda", "tg", "cda", token_budget=120,
                      evaluate_fn=lambda m, t, e: next(per_epoch))

    client = MlflowClient(tracking_uri=mlflow_server, registry_uri=mlflow_server)
    run = client.get_run(ft["mlflow_run_id"])
    assert run.data.tags["mlflow.parentRunId"] == pipeline_run_id(cfg)
    assert run.data.params["arm"] == "cda" and run.data.params["token_budget"] == "120"
    hist = client.get_metric_history(run.info.run_id, "stereoset_ss")
    assert [(h.step, h.value) for h in sorted(hist, key=lambda h: h.step)] == [(0, 60.0), (1, 55.0), (2, 52.0)]

    # first version: no champion yet, LMS rule holds -> champion
    ft_dir = run_dir / "finetune/tg/cda"
    s1 = run_register(cfg, {"model": ft_dir / "final", "metrics": ft_dir / "metrics.csv",
                            "corpus_stats": ft_dir / "corpus_stats.json"}, run_dir / "register/tg/cda", "tg", "cda")
    assert s1["registered"] and s1["promote"] and s1["version"] == "1"

    # a more biased second version is registered as candidate only
    worse = tmp_path / "eval.json"
    worse.write_text(json.dumps({"metrics": _metrics(58, 57)}))
    s2 = run_register(cfg, {"model": ft_dir / "final", "metrics": ft_dir / "metrics.csv", "evaluation": worse},
                      run_dir / "register/tg/context-cda", "tg", "context-cda")
    assert s2["version"] == "2" and not s2["promote"]
    assert any("worse than the champion" in r for r in s2["reasons"])

    name = "tg-debiased"
    assert client.get_model_version_by_alias(name, "champion").version == "1"
    cand = client.get_model_version_by_alias(name, "candidate")
    assert cand.version == "2"
    assert float(cand.tags["stereoset_ss"]) == 58.0 and cand.tags["promotion_decision"] == "refused"
    assert float(client.get_model_version(name, "1").tags["crows_cs"]) == 51.0
    decision = json.loads((run_dir / "register/tg/context-cda/promotion.json").read_text())
    assert decision["champion_version"] == "1" and decision["aliases"] == ["candidate"]
    arts = {a.path for a in client.list_artifacts(ft["mlflow_run_id"])}
    assert "promotion.json" in arts

    # load the champion through the registry and score one sentence
    from context_cda.tracking.register import _fluent_uri

    env_before = os.environ.get("MLFLOW_TRACKING_URI")
    with _fluent_uri(mlflow_server):  # restores mlflow's global URIs (and env vars) afterwards
        comps = mlflow.transformers.load_model(f"models:/{name}@champion", return_type="components")
    assert os.environ.get("MLFLOW_TRACKING_URI") == env_before
    model, tok = comps["model"], comps["tokenizer"]
    enc = tok("The nurse said that she was tired.", return_tensors="pt")
    with torch.no_grad():
        loss = float(model(**enc, labels=enc["input_ids"]).loss)
    assert math.isfinite(loss) and loss > 0
