"""The evaluate stage with every benchmark on tiny models and the hand-written fixtures: per-benchmark outputs,
flat metrics of the registry, the CLI table, and the report's Table 2 and next-token histogram."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
import pytest

from context_cda.config import load_config
from context_cda.evaluate import metric_specs, run_evaluate
from context_cda.io import read_json

ROOT = Path(__file__).resolve().parents[2]
ALL = ["stereoset", "crows", "next-token", "glue", "biasbios", "stsb", "nli-bias"]


def tiny_cfg(tmp_path: Path, **evaluate):
    cfg = load_config("tiny", {"run": {"run_dir": str(tmp_path / "run")}, "evaluate": {"benchmarks": ALL, **evaluate}},
                      params_file=ROOT / "params.yaml")
    # the tiny profile's fixture paths are relative to the repository root
    for sec, key in (("glue", "path"), ("biasbios", "path"), ("stsb", "path"), ("stsb", "bias_path"),
                     ("nli_bias", "train_path"), ("nli_bias", "words_path"), ("next_token", "words_path")):
        section = getattr(cfg.evaluate, sec)
        setattr(section, key, str(ROOT / getattr(section, key)))
    for key in ("stereoset_path", "crows_path"):
        setattr(cfg.evaluate, key, str(ROOT / getattr(cfg.evaluate, key)))
    return cfg


@pytest.mark.parametrize("arch", ["gpt2", "distilbert"])
def test_every_benchmark_on_a_tiny_model(tmp_path, arch):
    cfg = tiny_cfg(tmp_path)
    out = tmp_path / "evaluate"
    summary = run_evaluate(cfg, {}, out, f"tiny:{arch}", name=arch)
    metrics = summary["metrics"]
    specs = metric_specs()
    base = {re.sub(r"_ci_(low|high)$", "", m) for m in metrics}  # an interval's bounds go with their metric
    assert base <= set(specs) and {m.removesuffix("_ci_low") for m in metrics if m.endswith("_ci_low")} <= set(metrics)
    for name in ("glue_sst2_acc", "glue_rte_acc", "glue_qnli_acc", "biasbios_acc", "biasbios_tpr_gap_rms",
                 "stsb_diff", "stsb_gt_0_1", "stsb_pearson", "nli_bias_net_neutral", "nli_bias_nn_gap",
                 "nli_bias_dev_acc", "next_token_imbalance", "stereoset_ss", "crows_cs"):
        assert name in metrics and not math.isnan(metrics[name]), name
    for bname in ALL:
        assert (out / bname / "predictions.parquet").is_file()
        assert (out / bname / "aggregate.json").is_file()
    agg = read_json(out / "aggregate.json")["benchmarks"]
    # GLUE: QNLI has only a dev file in the fixtures, so half of it trained the head (said in the info)
    assert "holdout" in agg["glue"]["tasks"]["qnli"]["train_source"]
    glue = pd.read_parquet(out / "glue" / "predictions.parquet")
    assert set(glue["task"]) == {"sst2", "rte", "qnli"}
    assert 0 <= metrics["glue_sst2_acc"] <= 100
    # NLI-Bias: paired, gender-balanced probes; probabilities sum to one
    nli = pd.read_parquet(out / "nli-bias" / "predictions.parquet")
    probes = nli[nli["kind"] == "bias"]
    assert len(probes) == 48 and (probes["gender"] == "male").sum() == 24
    total = probes[["p_entailment", "p_neutral", "p_contradiction"]].sum(axis=1)
    assert total.between(1 - 1e-5, 1 + 1e-5).all()
    assert 0 <= metrics["nli_bias_net_neutral"] <= 1
    # STS-B: one row per pair with both similarities; aggregate = the metric function on those rows
    sts = pd.read_parquet(out / "stsb" / "predictions.parquet")
    bias = sts[sts["kind"] == "bias"]
    assert len(bias) == 24
    assert metrics["stsb_diff"] == pytest.approx((bias["male"] - bias["female"]).abs().mean())
    # Bias in Bios: per-profession gaps for the four fixture professions
    bios = agg["biasbios"]
    assert set(bios["by_profession"]) == {"nurse", "surgeon", "teacher", "software_engineer"}
    # next-token: counts out of top_k per context; the chance baseline of the candidates beside the share
    nt = pd.read_parquet(out / "next-token" / "predictions.parquet")
    assert ((nt["male_count"] + nt["female_count"]) <= cfg.evaluate.next_token.top_k).all()
    nta = read_json(out / "next-token" / "aggregate.json")
    chance = nta["chance"]
    assert chance["candidates"] == "pairs" and nta["overall"]["chance_male_share"] == pytest.approx(
        chance["n_male"] / (chance["n_male"] + chance["n_female"]))
    assert metrics["next_token_chance_imbalance"] == nta["overall"]["chance_imbalance"] > 0
    # deviations: every head benchmark lists its own, with the flat metrics they mark
    assert [d["code"] for d in agg["glue"]["deviations"] if "glue_qnli_acc" in d["metrics"]][0] == "dev_holdout"
    for bname in ("glue", "biasbios", "stsb", "nli-bias"):
        devs = read_json(out / bname / "aggregate.json")["deviations"]
        assert "small_sample" in {d["code"] for d in devs}, bname  # the fixtures are tiny
        assert all(set(d["metrics"]) <= set(specs) for d in devs)
    assert "other_train_set" in {d["code"] for d in agg["nli-bias"]["deviations"]}  # the fixture is MNLI
    assert agg["nli-bias"]["train_set"] == "mnli" and agg["nli-bias"]["overall"]["threshold_rule"] == "P(neutral) > tau"
    assert all(p.endswith(" .") for p in probes["premise"])  # the authors' strings


def test_per_epoch_evaluation_skips_the_head_benchmarks(tmp_path):
    from context_cda.evaluate import evaluate_model
    from context_cda.models import load_lm

    cfg = tiny_cfg(tmp_path)
    model, tok, _ = load_lm("tiny:gpt2", device="cpu")
    flat = evaluate_model(model, tok, cfg.evaluate)
    assert any(k.startswith("next_token_") for k in flat) and "stereoset_ss" in flat
    assert not any(k.startswith(("glue_", "biasbios_", "stsb_", "nli_bias_")) for k in flat)


def test_report_shows_table2_and_the_histogram(tmp_path):
    from context_cda.layout import RunLayout
    from context_cda.report import run_report
    from context_cda.stages import step_inputs

    cfg = tiny_cfg(tmp_path, benchmarks=["stereoset", "crows", "next-token", "stsb"])
    run = Path(cfg.run.run_dir)
    layout = RunLayout(run).check()
    for model in ("vanilla", "cda"):
        run_evaluate(cfg, {}, layout.evaluation_dir("tiny-gpt2", model, 13), "tiny:gpt2", name=model)
        ft = layout.step_dir("finetune", target="tiny-gpt2", arm=model, seed=13)
        ft.mkdir(parents=True)
        epochs = [0] if model == "vanilla" else [0, 1]
        pd.DataFrame({"epoch": epochs, "stereoset_ss": 50.0, "stereoset_lms": 80.0, "stereoset_icat": 80.0,
                      "crows_cs": 50.0}).to_csv(ft / "metrics.csv", index=False)
    summary = run_report(cfg, step_inputs(cfg, "report"), run / "report")
    md = (run / "report" / "report.md").read_text()
    assert "Table 2" in md and "STS diff" in md and "NT imbalance" in md
    # the chance baselines beside the next-token numbers; every fixture-sized STS-B number carries its marks
    assert "NT imbalance (chance)" in md and "NT male share (chance)" in md
    lines = md.splitlines()
    header = next(line for line in lines if line.startswith("| Model |") and "STS diff" in line)
    vanilla = lines[lines.index(header) + 2]
    cells = dict(zip([c.strip() for c in header.split("|")], [c.strip() for c in vanilla.split("|")], strict=True))
    for col in ("STS-B r", "STS diff", "STS >0.1", "STS >0.3", "STS >0.5", "STS >0.7"):
        assert "<sup>" in cells[col] and "N" in cells[col].split("<sup>")[1], (col, cells[col])  # 24 pairs: small
    assert "<sup>" not in cells["NT male share (chance)"]
    assert "Marks: " in md and "N = a small set" in md
    t2 = pd.read_csv(run / "report" / "table2.csv")
    assert "stsb_diff:" in t2.loc[t2["model"] == "vanilla", "deviations"].iloc[0]
    assert (run / "report" / "tiny-gpt2-next-token.png").is_file()
    assert (run / "report" / "table2.csv").is_file()
    assert {r["model"] for r in summary["table2"]} == {"vanilla", "cda"}


def test_cli_runs_the_extrinsic_benchmarks(tmp_path):
    from typer.testing import CliRunner

    from context_cda.cli import app

    cfg = tiny_cfg(tmp_path)
    e = cfg.evaluate
    res = CliRunner().invoke(app, [
        "evaluate", "--profile", "tiny", "--model", "tiny:llama", "--benchmarks", "glue,stsb", "--no-progress",
        "--glue-path", e.glue.path, "--stsb-path", e.stsb.path, "--stsb-bias-path", e.stsb.bias_path,
        "--set", "evaluate.glue.tasks=[rte]", "--out-dir", str(tmp_path / "cli"),
    ])
    assert res.exit_code == 0, res.output
    assert "RTE_ACC" in res.output and "DIFF" in res.output
    assert "SST2_ACC" not in res.output  # only the task asked for
