"""evaluate.arm_benchmarks: some arms scored on fewer benchmarks (a quick run that compares the baselines on the
paper's Table 1 only) - through the evaluate stage, the per-epoch evaluation, the cost model and the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from context_cda import arms as A
from context_cda.errors import ConfigError
from context_cda.evaluate.posthoc import benchmarks_for

ALL = ["stereoset", "crows", "next-token", "winogender", "glue", "stsb"]


def _cfg(cfg_factory, arm_benchmarks, benchmarks=ALL, **evaluate):
    return cfg_factory("tiny", evaluate={"benchmarks": benchmarks, "arm_benchmarks": arm_benchmarks, **evaluate})


def test_benchmarks_of_keeps_the_configured_order_and_ignores_names_outside_the_list(cfg_factory):
    ev = _cfg(cfg_factory, {"dropout": ["crows", "stereoset", "nli-bias"], "inlp": []}).evaluate
    assert ev.benchmarks_of("dropout") == ["stereoset", "crows"]  # nli-bias is not run at all: left out
    assert ev.benchmarks_of("inlp") == []
    assert ev.benchmarks_of("cda") == ALL and ev.benchmarks_of(None) == ALL


def test_the_vanilla_model_cannot_be_restricted(cfg_factory):
    with pytest.raises(ConfigError, match="vanilla"):
        _cfg(cfg_factory, {"vanilla": ["stereoset"]})


def test_a_trained_arm_skips_what_its_list_leaves_out_and_says_why(cfg_factory):
    ev = _cfg(cfg_factory, {"dropout": ["stereoset", "crows", "next-token", "winogender"]}).evaluate
    run, skipped = benchmarks_for(ev, None, arm="dropout")
    assert run == ["stereoset", "crows", "next-token", "winogender"]
    assert set(skipped) == {"glue", "stsb"} and "evaluate.arm_benchmarks" in skipped["glue"]
    assert benchmarks_for(ev, None, arm="cda") == (ALL, {})
    assert benchmarks_for(ev, None) == (ALL, {})  # the vanilla model


def test_a_post_hoc_arm_keeps_its_own_reason_first(cfg_factory):
    ev = _cfg(cfg_factory, {"self-debias": ["stereoset"], "inlp": ["crows"]}).evaluate
    run, skipped = benchmarks_for(ev, A.parse("self-debias"))
    assert run == ["stereoset"]
    assert "scoring" in skipped["glue"] and "scoring" in skipped["next-token"]  # not applicable, whatever the list
    assert "evaluate.arm_benchmarks" in skipped["crows"]
    run, skipped = benchmarks_for(ev, A.parse("inlp"))
    assert run == ["crows"] and len(skipped) == len(ALL) - 1


def test_a_misspelt_benchmark_in_an_arms_list_names_the_key(cfg_factory):
    ev = _cfg(cfg_factory, {"inlp": ["stereoset", "crow"]}).evaluate
    with pytest.raises(ConfigError, match=r"evaluate\.arm_benchmarks\.inlp.*'crow'.*did you mean 'crows'"):
        benchmarks_for(ev, A.parse("inlp"))


def test_the_per_epoch_evaluation_runs_the_arms_benchmarks_after_training_and_all_at_epoch_0(cfg_factory,
                                                                                               tmp_path):
    from context_cda.tracking import NullTracker
    from context_cda.train.finetune import MetricsLog, _epoch_evaluator

    cfg = _cfg(cfg_factory, {"dropout": ["crows"]}, benchmarks=["stereoset", "crows", "next-token"])
    seen = []

    def fn(model, tok, eval_config):
        seen.append(list(eval_config.benchmarks))
        return {"crows_cs": 50.0}

    log = MetricsLog(tmp_path / "metrics.csv", {"arm": "dropout"}, None)
    on_eval = _epoch_evaluator(cfg, fn, True, None, log, NullTracker(), lambda _m: None, "t/dropout", "dropout")
    for epoch in (0, 1, 2):
        on_eval(None, None, epoch)
    assert seen == [["stereoset", "crows", "next-token"], ["crows"], ["crows"]]


def test_the_plan_prices_an_arm_on_its_own_benchmarks(tmp_path):
    from tests.unit.test_costs import TABLE, cfg

    from context_cda.tools.costs import plan_costs

    bench = {"benchmarks": ["stereoset", "crows", "glue"], "after_training": True}
    arms = {"arms": ["cda", "dropout", "inlp"], "seeds": [1]}
    full = {c.step: c for c in plan_costs(cfg(tmp_path, evaluate=bench, train=arms), TABLE)}
    cut_cfg = cfg(tmp_path, evaluate={**bench, "arm_benchmarks": {"dropout": ["stereoset"], "inlp": ["crows"]}},
                  train=arms)
    cut = {c.step: c for c in plan_costs(cut_cfg, TABLE)}
    assert cut["evaluate"].gpu_hours < full["evaluate"].gpu_hours
    assert cut["evaluate-posthoc"].gpu_hours < full["evaluate-posthoc"].gpu_hours
    assert cut["evaluate"].tasks == full["evaluate"].tasks == 3  # the same models (vanilla, cda, dropout)


def test_the_report_names_what_was_not_scored_and_why(tmp_path):
    from context_cda.report import not_scored
    from context_cda.report.findings import caveats

    ev = tmp_path / "evaluate" / "t"
    for arm, skipped in {"dropout/seed-13": {"glue": "evaluate.arm_benchmarks leaves it out for the arm"},
                         "inlp/posthoc": {"glue": "evaluate.arm_benchmarks leaves it out for the arm"},
                         "self-debias/posthoc": {"glue": "the arm changes the scoring",
                                                 "next-token": "the arm changes the scoring"},
                         "cda/seed-13": {}}.items():
        d = ev / arm
        d.mkdir(parents=True)
        (d / "aggregate.json").write_text(json.dumps({"metrics": {}, "not_applicable": skipped}))
        (d / "manifest.json").write_text("{}")
    (ev / "vanilla").mkdir()
    (ev / "vanilla" / "aggregate.json").write_text(json.dumps({"metrics": {}}))
    found = not_scored(tmp_path / "evaluate")
    assert found == {"evaluate.arm_benchmarks leaves it out for the arm": [(["Dropout", "INLP"], ["glue"])],
                     "the arm changes the scoring": [(["Self-Debias"], ["glue", "next-token"])]}
    text = " ".join(caveats({"not_scored": found}, None))
    assert "not scored: Dropout, INLP on glue (evaluate.arm_benchmarks" in text
    assert "Self-Debias on glue, next-token (the arm changes the scoring)" in text


def test_the_demo_compares_every_baseline_on_the_intrinsic_benchmarks():
    """The demo profile keeps its baselines and neutral arms to the paper's Table 1 and the coreference tests."""
    from context_cda.config import load_config

    root = Path(__file__).resolve().parents[2]
    cfg = load_config("demo", params_file=root / "params.yaml" if (root / "params.yaml").is_file() else None)
    for arm in cfg.train.arms:
        kept = set(cfg.evaluate.benchmarks_of(arm))
        assert {"stereoset", "crows", "winogender", "winobias"} <= kept, arm
        assert (kept == set(cfg.evaluate.benchmarks)) == (arm in ("cda", "context-cda")), arm
