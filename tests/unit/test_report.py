"""The report: Table 1 from finetune metrics.csv files, per-epoch PNGs, Markdown and HTML."""

from __future__ import annotations

import pandas as pd
import pytest

pytest.importorskip("matplotlib")

from tests.helpers.predictions import write_predictions

from context_cda.config import Config  # noqa: E402
from context_cda.errors import InputError  # noqa: E402
from context_cda.layout import RunLayout  # noqa: E402
from context_cda.report import run_report  # noqa: E402
from context_cda.stages import step_inputs  # noqa: E402

VANILLA = {"stereoset_ss": 61.0, "stereoset_lms": 85.0, "stereoset_icat": 66.3, "crows_cs": 58.0}


def _write(run_dir, target, arm, rows, seed=13):
    RunLayout(run_dir).check()
    d = RunLayout(run_dir).step_dir("finetune", target=target, arm=arm, seed=seed)
    d.mkdir(parents=True)
    df = pd.DataFrame([{"epoch": e, "arm": arm, "target": target, **m} for e, m in rows])
    df.to_csv(d / "metrics.csv", index=False)


def test_report_table1_and_curves(tmp_path):
    run = tmp_path / "run"
    for target in ("gpt2", "bert"):
        _write(run, target, "cda", [(0, VANILLA), (1, {**VANILLA, "stereoset_ss": 57.0}),
                                    (2, {**VANILLA, "stereoset_ss": 55.5, "crows_cs": 54.0})])
        _write(run, target, "context-cda", [(0, VANILLA), (1, {**VANILLA, "stereoset_ss": 53.25}),
                                            (2, {**VANILLA, "stereoset_ss": 51.0, "crows_cs": 50.5})])
    cfg = Config.model_validate({"run": {"run_dir": str(run)}, "tracking": {"enabled": False}})
    s = run_report(cfg, step_inputs(cfg, "report"), run / "report")
    out = run / "report"
    t1 = pd.read_csv(out / "table1.csv")
    assert list(t1["model"]) == ["vanilla", "cda", "context-cda"] * 2
    gpt2 = t1[t1["target"] == "gpt2"].set_index("model")
    assert gpt2.loc["vanilla", "stereoset_ss"] == 61.0
    assert gpt2.loc["context-cda", "stereoset_ss"] == 51.0 and gpt2.loc["context-cda", "crows_cs"] == 50.5
    assert gpt2.loc["cda", "epoch"] == 2
    assert sorted(s["plots"]) == sorted(f"{t}-{m}.png" for t in ("gpt2", "bert") for m in ("ss", "lms", "icat", "cs"))
    assert all((out / p).stat().st_size > 1000 for p in s["plots"])
    md = (out / "report.md").read_text()
    assert "| Model | Epoch | SS | LMS | ICAT | CS |" in md
    assert "| Context-CDA | 2 | 51.00 | 85.00 | 66.30 | 50.50 |" in md
    assert "![gpt2-ss](gpt2-ss.png)" in md
    html = (out / "report.html").read_text()
    assert '<img src="bert-cs.png"' in html and ">51.00</td>" in html and "<h2>Setup</h2>" in html
    assert (out / "manifest.json").is_file()


def test_report_without_metrics_names_the_folder(tmp_path):
    cfg = Config.model_validate({"run": {"run_dir": str(tmp_path)}, "tracking": {"enabled": False}})
    with pytest.raises(InputError, match="finetune"):
        run_report(cfg, step_inputs(cfg, "report"), tmp_path / "report")


def test_ccda_report_command(tmp_path, capsys):
    from context_cda.cli import main

    run = tmp_path / "run"
    _write(run, "gpt2", "cda", [(0, VANILLA), (1, {**VANILLA, "stereoset_ss": 57.0})])
    assert main(["report", str(run), "--no-tracking"]) == 0
    assert "Table 1" in capsys.readouterr().out
    assert (run / "report" / "report.html").is_file() and (run / "report" / "gpt2-ss.png").is_file()


def test_evaluate_stage_metrics_take_precedence_in_table1(tmp_path):
    import json

    run = tmp_path / "run"
    _write(run, "gpt2", "cda", [(0, VANILLA), (1, {**VANILLA, "stereoset_ss": 57.0})])
    agg = RunLayout(run).evaluation_dir("gpt2", "cda", 13) / "aggregate.json"
    agg.parent.mkdir(parents=True)
    agg.write_text(json.dumps({"metrics": {"stereoset_ss": 52.5, "crows_cs": 51.0}, "name": "gpt2/cda"}))
    cfg = Config.model_validate({"run": {"run_dir": str(run)}, "tracking": {"enabled": False}})
    run_report(cfg, step_inputs(cfg, "report"), run / "report")
    t1 = pd.read_csv(run / "report" / "table1.csv").set_index("model")
    assert t1.loc["cda", "stereoset_ss"] == 52.5 and t1.loc["cda", "source"] == "evaluate"
    assert t1.loc["cda", "stereoset_lms"] == 85.0  # not in the aggregate: per-epoch value kept
    assert t1.loc["vanilla", "source"] == "metrics.csv"


def test_seeds_intervals_marks_and_paired_comparisons(tmp_path):
    """Two seeds per arm: the arm row (first seed) with its interval and a significance mark, a row per seed, the
    mean ± std over seeds, and the paired comparisons (arm - vanilla, arm - arm) from the per-item scores."""
    run = tmp_path / "run"
    lay = RunLayout(run)
    ci = {"stereoset_ss_ci_low": 55.0, "stereoset_ss_ci_high": 67.0}
    for arm, shares in (("cda", {13: 0.70, 14: 0.74}), ("context-cda", {13: 0.50, 14: 0.52})):
        for seed, share in shares.items():
            _write(run, "gpt2", arm, [(0, {**VANILLA, **ci}), (1, {**VANILLA, "stereoset_ss": 100 * share})], seed=seed)
            write_predictions(lay.evaluation_dir("gpt2", arm, seed), share, share)
    write_predictions(lay.evaluation_dir("gpt2"), 0.72, 0.72)
    cfg = Config.model_validate({"run": {"run_dir": str(run)}, "tracking": {"enabled": False},
                                 "train": {"seeds": [13, 14]}})
    run_report(cfg, step_inputs(cfg, "report"), run / "report")
    md = (run / "report" / "report.md").read_text()
    assert "| Vanilla | 0 | 61.00 [55.00, 67.00] |" in md  # the interval of the epoch-0 evaluation
    assert "| CDA, seed 14 |  | 74.00 |" in md
    # Context-CDA's seeds pooled are significantly less biased than vanilla on |SS-50|: the mark sits on the mean
    # row, not on the first seed's row beside it (the comparison is not of the first seed alone)
    assert "| Context-CDA, mean ± std (2 seeds) |  | 51.00 ± 1.41 ▲ |" in md
    assert "| Context-CDA | 1 | 50.00 |" in md
    assert "## Paired comparisons" in md and "| Context-CDA − Vanilla |" in md and "| Context-CDA − CDA |" in md
    comp = pd.read_csv(run / "report" / "comparisons.csv")
    # the gate's statistic, the shift toward 50 (72 -> 51), and its outcome: the same as the register step's
    row = comp[(comp.a == "context-cda") & (comp.b == "vanilla") & (comp.metric == "stereoset_ss")].iloc[0]
    assert row["diff"] == pytest.approx(21.0, abs=1.0) and row["ci_low"] > 0 and row["outcome"] == "better"
    assert row["statistic"] == "shift toward 50" and row["regime"] == "biased" and row["detectable_shift"] > 0
    assert not (comp.metric.str.endswith("_dist")).any()  # a distance to 50 is never shown as evidence
    row = comp[(comp.a == "cda") & (comp.b == "vanilla") & (comp.metric == "ss")].iloc[0]
    assert row["diff"] == pytest.approx(0.0, abs=1.0) and not bool(row["significant"])  # (70 + 74) / 2 = 72
    html = (run / "report" / "report.html").read_text()
    assert "Paired comparisons" in html and "mean ± std (2 seeds)" in html
