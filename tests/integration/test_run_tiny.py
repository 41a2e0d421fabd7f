"""`ccda run --profile tiny` end to end through the real CLI, twice: the second run recomputes nothing.

Generation goes to the OpenAI-compatible test server (tests/helpers/fake_openai.py) on 127.0.0.1, so the run takes
seconds instead of minutes of CPU generation; every other stage runs for real (tiny random GPT-2 target, tiny NLI
judge, fine-tuning with per-epoch benchmarks, MLflow registry in the run folder, report).
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from tests.helpers.fake_openai import FakeOpenAIServer
from tests.helpers.tiny_pipeline import fast_overrides

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.services


def ccda(*args, cwd=ROOT):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    r = subprocess.run([sys.executable, "-m", "context_cda.cli", *args], cwd=cwd, capture_output=True, text=True,
                       env=env, timeout=900)
    assert r.returncode == 0, f"ccda {' '.join(args)} failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return r.stdout


def test_run_tiny_end_to_end_then_nothing_recomputed(tmp_path):
    with FakeOpenAIServer(model="fake-model") as srv:
        overrides = fast_overrides(srv.base_url)
        overrides["train"] = {"epochs": 2, "batch_size": 4, "max_seq_len": 32}
        overrides["run"] = {"run_dir": str(tmp_path / "run")}
        # after training, the evaluate stage scores vanilla and both arms on every benchmark (fixture data)
        overrides["evaluate"].update({"after_training": True, "benchmarks": [
            "stereoset", "crows", "next-token", "glue", "biasbios", "stsb", "nli-bias"]})
        base = yaml.safe_load((ROOT / "configs" / "tiny.yaml").read_text())
        for sec, values in overrides.items():
            base.setdefault(sec, {}).update(values)
        base["ingest"]["path"] = str(ROOT / base["ingest"]["path"])
        profile = tmp_path / "tiny-fast.yaml"
        profile.write_text(yaml.safe_dump(base))

        t0 = time.perf_counter()
        out = ccda("run", "--profile", str(profile))
        first = time.perf_counter() - t0
        run = tmp_path / "run"
        assert "report" in out and "failed" not in out
        # every stage wrote its outputs
        for rel in ("ingest/sentences.parquet", "cda/counterfactuals.parquet", "validate/cda/valid.parquet",
                    "augment/augmented.parquet", "entropy/tiny-gpt2/scores.parquet",
                    "filter/tiny-gpt2/k30/corpus.parquet", "finetune/tiny-gpt2/cda/seed-13/final/model.safetensors",
                    "finetune/tiny-gpt2/context-cda/seed-13/final/model.safetensors", "layout.json", "report/report.md", "report/report.html"):
            assert (run / rel).exists(), rel
        metrics = pd.read_csv(run / "finetune" / "tiny-gpt2" / "context-cda" / "seed-13" / "metrics.csv")
        assert list(metrics.epoch) == [0, 1, 2]
        assert {"stereoset_ss", "stereoset_lms", "stereoset_icat", "crows_cs"} <= set(metrics.columns)
        report = (run / "report" / "report.md").read_text()
        assert "tiny-gpt2" in report and "context-cda" in report.lower()
        decision = json.loads(next((run / "register" / "tiny-gpt2").rglob("*.json")).read_text())
        assert decision
        # the evaluate stage ran on the vanilla target and each arm; the report has Table 2 and the histogram
        for model in ("vanilla", "cda/seed-13", "context-cda/seed-13"):
            agg = json.loads((run / "evaluate" / "tiny-gpt2" / model / "aggregate.json").read_text())
            assert {"glue_sst2_acc", "nli_bias_net_neutral", "stsb_diff", "biasbios_tpr_gap_rms"} <= set(agg["metrics"])
        assert "Table 2" in report and "NT imbalance" in report
        assert (run / "report" / "tiny-gpt2-next-token.png").is_file()
        registered = json.loads((run / "register" / "tiny-gpt2" / "manifest.json").read_text())["summary"]
        arm = registered["arms"]["context-cda"]  # the step's manifest: each arm's record, its inputs named
        assert "evaluation" in arm["inputs"] and "vanilla" in arm["inputs"]

        t0 = time.perf_counter()
        out2 = ccda("run", "--profile", str(profile))
        second = time.perf_counter() - t0
        assert " ran " not in out2.replace("│", " "), out2
        assert out2.count("up to date, skipped") >= 10
        # no fine-tuning left its resume state; `ccda clean` removes the parts' shards and caches, and every step
        # stays up to date
        assert not list(run.glob("finetune/*/*/*/checkpoints"))
        cleaned = ccda("clean", str(run))
        assert "removed" in cleaned and "freed" in cleaned and not list(run.glob("*-parts/**/shards"))
        assert not list(run.glob("sample-parts/*/draws")) and not list(run.glob("entropy/*/shards"))
        dry = ccda("run", "--profile", str(profile), "--dry-run")
        assert "to run" not in dry and dry.count("up to date") >= 10, dry
    assert first < 180, f"tiny run took {first:.0f}s"
    assert second < first
