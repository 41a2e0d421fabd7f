"""The dose-response step of the study at tiny sizes, through the ordinary runner: the tiny profile's CDA arm and
two doses of it, two seeds each, with StereoSet intersentence beside the gate's benchmarks. Each dose trains on
exactly its tokens; the report's verdicts are the gate's own decisions (context_cda.tracking.promotion.decide on
the same pooled evidence), and its dose response has the table, the curve and the detectable shift.

No generation (CDA arms only), a tiny random GPT-2, the fixture benchmarks: seconds."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "evaluate"
ARMS = ["cda", "cda-0.1k", "cda-0.3k"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from context_cda.config import load_config
    from context_cda.pipeline import run_pipeline

    run_dir = tmp_path_factory.mktemp("dose") / "run"
    cfg = load_config("tiny", {
        "run": {"run_dir": str(run_dir)},
        "ingest": {"path": str(ROOT / "tests" / "fixtures" / "corpus" / "tiny_corpus.txt")},
        "train": {"arms": ARMS, "seeds": [13, 14], "epochs": 1, "batch_size": 8, "max_seq_len": 32},
        "evaluate": {"benchmarks": ["stereoset", "stereoset-inter", "crows"], "after_training": False,
                     "stereoset_path": str(FIX / "stereoset_tiny.json"), "crows_path": str(FIX / "crows_tiny.csv"),
                     "bootstrap": {"min_items": 1, "resamples": 200}},
        "tracking": {"enabled": False},
    }, params_file=ROOT / "params.yaml")
    results = run_pipeline(cfg)
    return cfg, run_dir, results


def test_each_dose_trains_on_its_tokens_and_the_cda_arm_on_its_groups(run):
    from context_cda.io import read_json

    cfg, run_dir, results = run
    assert all(r.status == "ran" for r in results), [(r.step.name, r.status) for r in results]
    budgets = {a: read_json(run_dir / "budget" / "tiny-gpt2" / a / "budget.json")["token_budget"] for a in ARMS}
    assert budgets["cda-0.1k"] == 100 and budgets["cda-0.3k"] == 300 and budgets["cda"] > 300
    for arm in ARMS:
        for seed in (13, 14):
            summary = read_json(run_dir / "finetune" / "tiny-gpt2" / arm / f"seed-{seed}" / "manifest.json")["summary"]
            assert summary["tokens"] == budgets[arm] and summary["epochs"] == 1
            preds = run_dir / "finetune" / "tiny-gpt2" / arm / f"seed-{seed}" / "predictions" / "epoch-1"
            assert (preds / "stereoset-inter" / "predictions.parquet").is_file()


def test_the_reports_verdicts_are_the_gates_decisions_on_the_pooled_seeds(run):
    from context_cda.tracking import evidence as E
    from context_cda.tracking.promotion import PromotionPolicy, decide

    cfg, run_dir, _ = run
    table = pd.read_csv(run_dir / "report" / "verdicts.csv")
    assert list(table["arm"]) == ARMS and set(table["seeds"]) == {2}
    policy = PromotionPolicy.from_config(cfg.tracking.promotion, cfg.evaluate.bootstrap, cfg.evaluate.bias_type)
    ft = run_dir / "finetune" / "tiny-gpt2"
    van = E.load([E.vanilla_items_dir(None, ft, "tiny-gpt2")])
    for _, row in table.iterrows():
        arm = E.load({s: E.last_epoch_dir(ft / row["arm"] / f"seed-{s}") for s in (13, 14)})
        d = decide(arm, None, van, policy)
        assert (row["verdict"], row["note"] if row["note"] == row["note"] else "") == (d.verdict, d.note)
        assert row["candidate_stereoset_ss"] == pytest.approx(d.candidate["stereoset_ss"])
        assert row["stereoset_ss_detectable_shift"] == pytest.approx(d.detectable_shift["stereoset_ss"])
    seen = table.set_index("arm")["tokens_seen"]
    assert (seen["cda-0.1k"], seen["cda-0.3k"]) == (100, 300) and seen["cda"] > 300  # tokens x 1 epoch
    assert table["stereoset_inter_ss"].notna().all()


def test_the_report_has_the_dose_response_table_and_curve(run):
    _, run_dir, _ = run
    report = (run_dir / "report" / "report.md").read_text()
    assert "## Verdicts and power" in report and "## Dose response" in report
    section = report.split("## Dose response", 1)[1].split("\n## ", 1)[0]
    assert section.index("CDA (0.1k tokens)") < section.index("CDA (0.3k tokens)") < section.index("| CDA |")
    assert "(≥ " in section  # the detectable shift beside each shift toward 50
    png = run_dir / "report" / "tiny-gpt2-cda-dose-response.png"
    assert png.is_file() and png.stat().st_size > 10_000 and f"]({png.name})" in section
