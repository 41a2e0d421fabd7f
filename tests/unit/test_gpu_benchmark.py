"""benchmarks/gpu/run.py --smoke: the prepared GPU benchmark runs end to end on CPU (tiny shapes of the four
families) and writes the JSON docs/results.md and ``ccda plan --throughput`` read, so it cannot rot unnoticed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHAPES = ("gpt2", "bert-base", "t5-base", "llama-3.2-1b")
KEYS = {"gpt2": "gpt2", "bert-base": "bert-base-uncased", "t5-base": "t5-base",
        "llama-3.2-1b": "meta-llama/Llama-3.2-1B"}


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> dict:
    pytest.importorskip("torch")
    pytest.importorskip("peft")
    out = tmp_path_factory.mktemp("gpu") / "smoke.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu" / "run.py"), "--smoke", "--out", str(out)],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    data = json.loads(out.read_text())
    assert json.loads(p.stdout) == data  # printed and written alike
    for name in SHAPES:  # the per-shape summary on stderr names the batched scorer's speedup
        assert re.search(rf"^{re.escape(name)}: \d+ measurements in .* s; scoring batched is [\d.]+x one-at-a-time "
                         r"per item \(same 4 items\)$", p.stderr, flags=re.M), p.stderr[-2000:]
    return data


def test_environment_and_formula_are_recorded(smoke):
    assert smoke["smoke"] is True and smoke["device"] == "cpu"
    for k in ("date", "device_name", "torch", "transformers", "accelerate", "peft", "python", "mfu_formula"):
        assert smoke[k], k
    assert smoke["peak_flops"] is None  # no MFU without a GPU's peak
    assert "6N" in smoke["mfu_formula"] and "embedding" in smoke["mfu_formula"]
    assert smoke["elapsed_s"] > 0


def test_every_shape_and_operation_is_measured(smoke):
    assert list(smoke["shapes"]) == list(SHAPES)
    for name, info in smoke["shapes"].items():
        assert info["model_key"] == KEYS[name]
        assert info["model_vocab"] >= info["tokenizer_vocab"] > 100
        assert 0 < info["matmul_parameters"] <= info["parameters"]
    rows = smoke["results"]
    assert not [r for r in rows if "error" in r or "skipped" in r]
    ops = {(r["shape"], r["operation"], r.get("mode")) for r in rows}
    for name in SHAPES:
        assert {(name, "train", "full"), (name, "train", "lora"), (name, "score", "batched"),
                (name, "score", "one-at-a-time")} <= ops
    for name in ("gpt2", "llama-3.2-1b"):  # causal shapes generate, at two batch sizes
        gen = [r for r in rows if r["shape"] == name and r["operation"] == "generate"]
        assert sorted(r["batch_size"] for r in gen) == [1, 4]
        assert all(r["errors"] == 0 and r["generated_tokens"] > 0 for r in gen)
    assert not [r for r in rows if r["shape"] in ("bert-base", "t5-base") and r["operation"] == "generate"]
    for r in rows:
        assert r["tokens_per_s"] > 0
        if r["operation"] == "train":
            assert r["batch_size"] and r["seq_len"] and r["steps_timed"] >= 1 and r["mfu"] is None
            assert r["flops_per_step"] > 0 and (r["trainable_share"] == 1.0) == (r["mode"] == "full")
        if r["operation"] == "score":
            assert r["stereoset_items"] > 0 and r["crows_pairs"] > 0 and r["items_per_s"] > 0
            assert r["batch_size"] == (32 if r["mode"] == "batched" else 1)
            assert r["speedup_vs_one_at_a_time"] > 0 and r["speedup_items"] == 4  # smoke: 2 + 2 reference items
    for name in SHAPES:  # both score rows carry the one ratio: reference seconds / batched seconds, same items
        ref, fast = (next(r for r in rows if r["shape"] == name and r.get("mode") == m)
                     for m in ("one-at-a-time", "batched"))
        assert fast["speedup_vs_one_at_a_time"] == ref["speedup_vs_one_at_a_time"] == pytest.approx(
            ref["seconds"] / fast["batched_seconds_on_speedup_items"], rel=0.2, abs=0.02)  # seconds are rounded
    assert smoke["goals"]["gpt2_score_speedup_vs_one_at_a_time"] == next(
        r["speedup_vs_one_at_a_time"] for r in rows if r["shape"] == "gpt2" and r["operation"] == "score")


def test_rates_table_feeds_the_cost_model(smoke, tmp_path):
    from context_cda.tools.costs import load_throughput, rate

    for op in ("train", "score", "generate"):
        for key, entry in smoke["rates"][op].items():
            assert entry["per_s"] > 0 and "SMOKE" in entry["source"], (op, key)
    assert set(smoke["rates"]["train"]) == set(KEYS.values()) == set(smoke["rates"]["score"])
    assert set(smoke["rates"]["generate"]) == {"gpt2", "meta-llama/Llama-3.2-1B"}
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps(smoke))
    table = load_throughput(path)
    assert rate(table, "train", "gpt2") == (smoke["rates"]["train"]["gpt2"]["per_s"],
                                            smoke["rates"]["train"]["gpt2"]["source"])
    assert set(smoke["goals"]) >= {"gpt2_full_finetune_best_mfu", "gpt2_stereoset_crows_gender_s"}


def test_the_json_prices_a_profile_on_its_own(smoke, tmp_path, capsys):
    """Rates not measured (the paper's 8B generator, its NLI judge) come from the packaged table it carries."""
    from context_cda.cli import main

    path = tmp_path / "gpu.json"
    path.write_text(json.dumps(smoke))
    assert "SMOKE" in smoke["about"] and smoke["models"]["meta-llama/Meta-Llama-3-8B-Instruct"]["params"] > 0
    assert main(["plan", "--profile", "paper", "--throughput", str(path)]) == 0
    assert "dominant step" in capsys.readouterr().out


def test_score_rates_are_in_the_tokens_the_plan_counts(smoke, tmp_path):
    """A score rate prices an evaluation: the tokens costs.benchmark_tokens counts for the measured items and the
    model's family, over the measured seconds (a sentence-token rate would price a masked LM's many passes per
    sentence as one); --rebuild makes the same table again from the saved measurements."""
    from context_cda.tools.costs import Assumptions, benchmark_tokens

    for r in smoke["results"]:
        if r.get("operation") == "score" and r.get("mode") == "batched":
            counts = Assumptions(stereoset_items=r["stereoset_items"], crows_items=r["crows_pairs"])
            want = benchmark_tokens(counts, r["family"], "auto") / r["seconds"]
            assert r["plan_tokens_per_s"] == pytest.approx(want, rel=1e-3)
            assert smoke["rates"]["score"][KEYS[r["shape"]]]["per_s"] == r["plan_tokens_per_s"]
    saved, again = tmp_path / "run.json", tmp_path / "again.json"
    saved.write_text(json.dumps(smoke))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu" / "run.py"), "--rebuild", str(saved),
                        "--out", str(again)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    rebuilt = json.loads(again.read_text())
    assert rebuilt["rates"] == smoke["rates"] and rebuilt["results"] == smoke["results"]
