"""The report's "Generated data" section: acceptance by reason, examples, entropy extremes beside the histogram."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("matplotlib")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))

from cda_table import openai_config, write_cda_table  # noqa: E402
from envelope import enveloped  # noqa: E402
from predictions import write_entropy_scores  # noqa: E402
from test_augment_stage import ScriptedGenerator  # noqa: E402

from context_cda import schemas as S  # noqa: E402
from context_cda.augment import run_augment  # noqa: E402
from context_cda.layout import RunLayout  # noqa: E402
from context_cda.report import generated  # noqa: E402


def _run(tmp_path):
    run = tmp_path / "run"
    RunLayout(run).check()
    src = write_cda_table(tmp_path / "cda.parquet", 8, {1: "[REFUSE]", 2: "[SAME]", 3: "[FLAKY]"})
    enveloped(openai_config("http://127.0.0.1:9/v1", run), "augment", run_augment, {"counterfactuals": src},
              run / "augment", generator=ScriptedGenerator())  # with its manifest, as every door writes it
    write_entropy_scores(run / "entropy" / "tiny")
    (run / "filter" / "tiny" / "k30").mkdir(parents=True)
    return run


def test_generated_section(tmp_path):
    run = _run(tmp_path)
    out = tmp_path / "report"
    g = generated.collect(run / "augment", run / "entropy", run / "filter", out)
    assert g.summary["accepted"] == 6 and g.summary["items"] == 8
    md = generated.markdown(g)
    assert md.startswith("## Generated data")
    assert "6 accepted (75 %), 2 rejected" in md and "Accepted per attempt: 1: 5, 2: 1." in md
    # acceptance by reason: final rejections, then each attempt's reasons
    assert "| Reason | Rejected items | Attempt 1 | Attempt 2 | Attempt 3 |" in md
    assert "| refusal | 1 | 2 | 1 | 1 |" in md and "| identical | 1 | 1 | 1 | 1 |" in md
    assert "Rejected examples: one drawn at random (seed 0) for each first reason, from the 2 rejected" in md
    assert "| identical |" in md and "| refusal" in md
    assert "Accepted examples: 3 drawn at random (seed 0) from the 6 accepted" in md
    assert md.count("In the quiet town") >= 3  # accepted examples (the scripted generator's rephrasings)
    # entropy extremes beside the histogram, the filter's cut marked
    assert "### Semantic entropy: tiny (10 items)" in md and "![tiny-se-hist](tiny-se-hist.png)" in md
    high = md.split("Highest entropy (dropped first):")[1].split("Lowest entropy:")[0]
    assert high.index("Item 9 about") < high.index("Item 8 about") and "| 0.900 | 1 |" in high
    assert "Item 0 about" in md.split("Lowest entropy:")[1]
    assert (out / "tiny-se-hist.png").stat().st_size > 1000


def test_examples_are_a_seeded_random_draw_not_the_first_rows(tmp_path):
    run = _run(tmp_path)
    acc = pd.read_parquet(run / "augment" / "augmented.parquet")
    draws = {seed: [e["input"] for e in generated.collect(run / "augment", None, None, tmp_path / "o",
                                                           seed=seed).accepted_examples] for seed in range(8)}
    assert draws[3] == [e["input"] for e in generated.collect(run / "augment", None, None, tmp_path / "o",
                                                              seed=3).accepted_examples]  # the same seed, the same
    assert len({tuple(d) for d in draws.values()}) > 1  # other seeds, other examples
    first = [generated._short(t) for t in acc[S.COUNTERFACTUAL].head(3)]
    assert any(d != first for d in draws.values())  # not always the table's first rows
    assert all(set(d) <= {generated._short(t) for t in acc[S.COUNTERFACTUAL]} for d in draws.values())


def test_generated_section_absent_parts(tmp_path):
    g = generated.collect(tmp_path / "none", tmp_path / "none", None, tmp_path / "out")
    assert g.empty and generated.markdown(g) == ""


def test_report_has_the_section(tmp_path):
    from context_cda.config import Config
    from context_cda.report import run_report
    from context_cda.stages import step_inputs

    run = _run(tmp_path)
    d = RunLayout(run).step_dir("finetune", target="tiny", arm="cda", seed=13)
    d.mkdir(parents=True)
    pd.DataFrame([{"epoch": e, "arm": "cda", "target": "tiny", "stereoset_ss": 55.0, "stereoset_lms": 80.0,
                   "stereoset_icat": 70.0, "crows_cs": 52.0} for e in (0, 1)]).to_csv(d / "metrics.csv", index=False)
    cfg = Config.model_validate({"run": {"run_dir": str(run), "targets": {"tiny": "tiny:gpt2"}},
                                 "tracking": {"enabled": False}})
    run_report(cfg, step_inputs(cfg, "report"), run / "report")
    md = (run / "report" / "report.md").read_text()
    assert "## Table 1" in md and "## Generated data" in md and "### Semantic entropy: tiny" in md
    assert "<h2>Generated data</h2>" in (run / "report" / "report.html").read_text()
    assert "## Setup" in md and "## Findings" in md and "`tiny:gpt2`: a tiny randomly initialised gpt2" in md
    json.loads((run / "report" / "summary.json").read_text())
