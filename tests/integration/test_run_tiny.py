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
from tests.helpers.data import mirrored
from tests.helpers.fake_openai import FakeOpenAIServer
from tests.helpers.tiny_pipeline import fast_overrides

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.services
HUB_DATA = mirrored("stereoset") is not None and mirrored("crows-pairs") is not None


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
        if HUB_DATA:  # StereoSet and CrowS-Pairs by name (their first 8 gender items): the cards name their Hub ids
            overrides["evaluate"].update({"stereoset_path": None, "crows_path": None})
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
        registered = json.loads((run / "register" / "tiny-gpt2" / "context-cda" / "manifest.json").read_text())
        assert "evaluation" in registered["inputs"] and "vanilla" in registered["inputs"]
        _every_version_has_its_card_and_exports(run, tmp_path)

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


def _every_version_has_its_card_and_exports(run: Path, tmp_path: Path) -> None:
    """A model card per registered version, its numbers the evaluate step's aggregate.json's; `ccda export` of the
    CDA version is a folder huggingface_hub loads as a model card with its evaluation results."""
    from huggingface_hub import ModelCard, parse_eval_result_entries

    for arm in ("cda", "context-cda"):
        card_dir = run / "register" / "tiny-gpt2" / arm / "card"
        card = ModelCard.load(card_dir / "README.md")
        agg = json.loads((run / "evaluate" / "tiny-gpt2" / arm / "seed-13" / "aggregate.json").read_text())["metrics"]
        values = {r.metric_type: str(r.metric_value) for r in card.data.eval_results}
        assert {"stereoset_ss", "stereoset_lms", "crows_cs", "glue_sst2_acc"} <= set(values)
        for name, text in values.items():  # a value with its interval as text, one without it as the number
            assert text.startswith(f"{agg[name]:.2f} [95% CI") if f"{name}_ci_low" in agg else \
                float(text) == agg[name], (arm, name, text)
        decision = json.loads((run / "register" / "tiny-gpt2" / arm / "promotion.json").read_text())
        assert f"Verdict: {decision['verdict']}" in card.text and "## Bias, Risks, and Limitations" in card.text
    version = json.loads((run / "register" / "tiny-gpt2" / "cda" / "promotion.json").read_text())["version"]
    out = tmp_path / "export"
    ccda("export", "--model", "tiny-gpt2-debiased", "--version", str(version), "--to", str(out),
         "--tracking-uri", f"sqlite:///{run.parent / 'mlflow.db'}")
    card = ModelCard.load(out / "README.md")
    assert card.data.license == "apache-2.0" and (out / "model.safetensors").is_file()
    entries = [e for f in sorted((out / ".eval_results").glob("*.yaml"))
               for e in parse_eval_result_entries(yaml.safe_load(f.read_text()))]
    agg = json.loads((run / "evaluate" / "tiny-gpt2" / "cda" / "seed-13" / "aggregate.json").read_text())["metrics"]
    assert all(e.value == agg[e.task_id] for e in entries)
    if HUB_DATA:  # the fixture files of the other benchmarks are no Hub dataset: no evaluation results for them
        assert {e.dataset_id for e in entries} == {"McGill-NLP/stereoset", "nyu-mll/crows_pairs"}
