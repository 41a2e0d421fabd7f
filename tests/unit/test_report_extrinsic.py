"""Table 2's deviation marks and chance-baseline columns (report.extrinsic) on hand-written aggregates."""

from __future__ import annotations

import json

import pandas as pd

from context_cda.report import extrinsic as rx


def _aggregate(folder, benchmarks):
    folder.mkdir(parents=True)
    (folder / "aggregate.json").write_text(json.dumps({"metrics": {}, "benchmarks": benchmarks}))
    return folder


def test_marks_from_the_deviations_of_each_benchmark(tmp_path):
    glue = {"deviations": [
        {"code": "dev_holdout", "metrics": ["glue_qnli_acc", "glue_avg_acc"], "detail": "qnli: no train file"},
        {"code": "small_sample", "metrics": ["glue_qnli_acc"], "detail": "qnli: 32 training examples"},
    ]}
    bios = {"deviations": [{"code": "near_chance", "metrics": ["biasbios_acc", "biasbios_tpr_gap_rms"],
                            "detail": "biasbios: accuracy 5.4% vs 3.6%"},
                           {"code": "unknown-code", "metrics": ["biasbios_acc"], "detail": "ignored"}]}
    folders = {("t", "vanilla"): _aggregate(tmp_path / "v", {"glue": glue, "biasbios": bios}),
               ("t", "cda"): _aggregate(tmp_path / "c", {"glue": {"deviations": []}}),
               ("t", "missing"): tmp_path / "nothing-here"}
    devs = rx.read_deviations(folders)
    assert set(devs) == {("t", "vanilla")} and len(devs[("t", "vanilla")]) == 3  # the unknown code is dropped
    assert rx.marks_by_metric(devs[("t", "vanilla")]) == {
        "glue_qnli_acc": ["H", "N"], "glue_avg_acc": ["H"], "biasbios_acc": ["C"], "biasbios_tpr_gap_rms": ["C"]}
    t2 = pd.DataFrame([{"target": "t", "model": "vanilla", "glue_qnli_acc": 56.25, "biasbios_tpr_gap_rms": 0.0},
                       {"target": "t", "model": "cda", "glue_qnli_acc": 60.0, "biasbios_tpr_gap_rms": None}])
    t2 = rx.with_marks(t2, devs)
    assert list(t2["deviations"]) == ["biasbios_tpr_gap_rms:C; glue_qnli_acc:HN", ""]
    rows = list(t2.iterrows())
    assert rx.cell(t2, rows[0][1], "glue_qnli_acc") == "56.25<sup>H,N</sup>"
    assert rx.cell(t2, rows[0][1], "biasbios_tpr_gap_rms") == "0.000<sup>C</sup>"  # the toy "0.000" is marked
    assert rx.cell(t2, rows[1][1], "glue_qnli_acc") == "60.00"
    assert rx.cell(t2, rows[1][1], "biasbios_tpr_gap_rms") == "–"
    md = rx.notes(t2, "t", label=str.upper)
    assert md[0].startswith("Marks: H = the head trained on part of the dev set")
    assert "N = a small set" in md[0] and "C = the head scores near chance" in md[0]
    assert "- VANILLA: biasbios: accuracy 5.4% vs 3.6%" in md and "- VANILLA: qnli: no train file" in md
    assert not any("32 training examples" in line for line in md)  # small samples: the legend is enough
    html = rx.notes(t2, "t", fmt="html")
    assert html[0].startswith("<p>Marks: ") and "<li>vanilla: biasbios: accuracy 5.4% vs 3.6%</li>" in html[1]
    assert rx.notes(t2, "other-target") == []


def test_chance_columns_sit_beside_what_they_calibrate():
    cols = list(rx.EXTRINSIC)
    assert cols.index("next_token_chance_imbalance") == cols.index("next_token_imbalance") + 1
    assert cols.index("next_token_chance_male_share") == cols.index("next_token_male_share") + 1
    assert {"stsb_gt_0_3", "stsb_gt_0_5", "stsb_gt_0_7", "nli_bias_dev_acc"} <= set(cols)
    assert "stsb_gt_0_2" not in cols and "nli_bias_mnli_acc" not in cols
