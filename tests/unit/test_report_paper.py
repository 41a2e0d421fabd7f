"""The report as a short paper: its setup from the run's manifests, findings from the evidence (directions, what
is not shown, caveats), honest axes with interval bands, decisions in the registry's words."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("matplotlib")

from context_cda import layout as L  # noqa: E402
from context_cda.config import Config  # noqa: E402
from context_cda.evaluate.stats import Difference  # noqa: E402
from context_cda.report import evidence, findings, plots, registry, setup  # noqa: E402


def d(point: float, low: float, high: float, n: int = 120) -> Difference:
    return Difference(point, low, high, 0.01, n, 0.95, too_small=n < 20)


# ------------------------------------------------------------------------------------------------ axes and bands


@pytest.mark.parametrize(("values", "ideal", "expect"), [
    ([88.0, 88.5], None, (78.25 - 0.6, 98.25 + 0.6)),  # half a point of LMS on a 20-point axis
    ([61.0, 64.0], 50.0, (35.0 - 0.9, 65.0 + 0.9)),  # SS near 50: 50 ± 15 in view
    ([80.0, 90.0, 72.0], 50.0, (35.0 - 1.65, 90.0 + 1.65)),  # far from 50: the values and 50 both in view
    ([99.0, 99.5], None, (80.0, 100.0)),  # at the top of the scale: 20 points below it
])
def test_y_limits_are_honest(values, ideal, expect):
    lo, hi = plots.y_limits(values, ideal)
    assert lo == pytest.approx(expect[0], abs=0.01) and hi == pytest.approx(expect[1], abs=0.01)
    assert lo <= min(values) and hi >= max(values) and (ideal is None or lo <= ideal <= hi)
    assert hi - lo >= (plots.BIAS_SPAN if ideal is not None else plots.QUALITY_SPAN)


def test_curves_draw_a_band_per_arm_from_the_intervals():
    import matplotlib.pyplot as plt
    from matplotlib.collections import PolyCollection

    df = pd.DataFrame([{"target": "t", "arm": arm, "epoch": e, "stereoset_ss": 60 - e, "stereoset_ss_ci_low": 55 - e,
                        "stereoset_ss_ci_high": 65 - e} for arm in ("cda", "context-cda") for e in (0, 1, 2)])
    fig, ax = plt.subplots()
    seen = plots._draw_arms(ax, df, "stereoset_ss", lambda arms: arms, str)
    assert len([c for c in ax.collections if isinstance(c, PolyCollection)]) == 2 and len(ax.lines) == 2
    assert min(seen) == 53 and max(seen) == 65  # the band ends count for the axis range
    plt.close(fig)


# ------------------------------------------------------------------------------------------------ directions


def test_marks_say_better_or_worse_in_each_metrics_direction():
    assert evidence.mark_of("icat", d(3, 1, 5)) == " ▲" and evidence.mark_of("icat", d(-3, -5, -1)) == " ▼"
    assert evidence.mark_of("ss", d(2.8, 0.4, 6.1)) == "*"  # a signed ΔSS has no better side
    assert evidence.mark_of("icat", d(-2.5, -6.7, 4.2)) == ""  # not shown
    assert "ss_dist" not in evidence.DIRECTION and "cs_dist" not in evidence.DIRECTION  # never a distance


def _judged(van_ss: float, arm_ss: float, van_cs: float = 0.5, arm_cs: float = 0.5, lms_lost: int = 0):
    """A report Evidence of one arm against vanilla on 240 crafted items (StereoSet and CrowS), judged by the gate."""
    import numpy as np

    from context_cda.evaluate.stats import Items
    from context_cda.tracking.evidence import Evidence as Ev
    from context_cda.tracking.promotion import PromotionPolicy

    def model(ss: float, cs: float, lost: int = 0) -> Ev:
        v, w, lms = np.zeros(240), np.zeros(240), np.ones(240)
        v[: round(ss * 240)], w[: round(cs * 240)], lms[:lost] = 1, 1, 0
        o = np.ones(240)
        return Ev({"stereoset": Items.build(range(240), [f"t{i % 24}" for i in range(240)], ss=v, lms=lms),
                   "crows": Items.build(range(240), None, win=w, stereo=o, win_stereo=w, anti=0 * o, win_anti=0 * o)})

    ev = evidence.Evidence(level=0.95, seeds=[13])
    pairs, judgements = evidence.compare({"vanilla": model(van_ss, van_cs), "cda": model(arm_ss, arm_cs, lms_lost)},
                                         ["vanilla", "cda"], PromotionPolicy(), "t")
    ev.pairs, ev.judgements = pairs, judgements
    return ev


def test_the_gate_marks_the_gate_metrics():
    ev = _judged(0.62, 0.50)  # SS 62 -> 50: less biased; CS at 50 throughout: non-inferior, no mark
    assert ev.mark("t", "cda", "stereoset_ss") == " ▲" and ev.mark("t", "cda", "crows_cs") == ""
    ev = _judged(0.60, 0.65)  # 60 -> 65: shifted away from 50
    assert ev.mark("t", "cda", "stereoset_ss") == " ▼"
    ev = _judged(0.62, 0.38)  # as far past 50 as vanilla was, no evidence of an overshoot: no reduction, no mark
    assert ev.mark("t", "cda", "stereoset_ss") == ""
    ev = _judged(0.62, 0.10)  # significantly farther past 50 than vanilla's distance: an overshoot shown
    assert ev.mark("t", "cda", "stereoset_ss") == " ▼"
    ev = _judged(0.62, 0.50, lms_lost=24)  # LMS 90 vs 100: significantly lower, beyond the margin
    assert ev.mark("t", "cda", "stereoset_lms") == " ▼"
    rows = evidence.comparison_rows(ev, "t", str)
    assert rows[0][0] == "cda − vanilla" and rows[0][1][1].startswith("+12.08 [") and rows[0][1][1].endswith(" ▲")


def test_a_comparison_sentence_in_plain_words_with_numbers():
    ev = _judged(0.60, 0.65)
    j = ev.judgement("t", "cda")
    text = findings.comparison_sentence("cda", "vanilla", ev.pairs[("t", "cda", "vanilla")], str.upper, j,
                                        ("refused: worse", "evidence against it: SS vs vanilla"))
    assert text.startswith("**CDA** against VANILLA — refused: worse (evidence against it: SS vs vanilla): more "
                           "biased on StereoSet (shifted away from 50: SS shift toward 50 -5.00 [")
    assert "not farther from 50 on CrowS-Pairs, where vanilla is not demonstrably biased" in text
    assert "LMS non-inferior (ΔLMS +0.00 [+0.00, +0.00] against the -2 margin)" in text
    assert "significantly lower ICAT (ICAT -10.00 [" in text
    small = findings.comparison_sentence("a", "b", {"icat": d(1.0, -2.0, 3.0, n=8)}, str)
    assert "only 8 items shared: too few to decide on" in small


def test_findings_follow_the_arms_found_and_new_directed_metrics(monkeypatch):
    """Generic over arms and benchmarks: every comparison in the evidence gets its sentence; a benchmark that adds
    its key to evidence.DIRECTION is written about with no other change."""
    monkeypatch.setitem(evidence.DIRECTION, "wino_gap", (-1, "WinoBias gap", "a smaller WinoBias gap",
                                                         "a larger WinoBias gap"))
    ev = evidence.Evidence(level=0.95, seeds=[13])
    ev.pairs = {("t", "inlp", "vanilla"): {"wino_gap": d(-4.0, -7.0, -1.0)},
                ("t", "self-debias", "vanilla"): {"wino_gap": d(1.0, -1.0, 3.0)},
                ("t", "self-debias", "inlp"): {"wino_gap": d(5.0, 2.0, 8.0)}}
    t1 = pd.DataFrame([{"target": "t", "model": "vanilla", "stereoset_ss": 61.0, "stereoset_ss_ci_low": 55.0,
                        "stereoset_ss_ci_high": 67.0, "crows_cs": 50.5, "crows_cs_ci_low": 45.0,
                        "crows_cs_ci_high": 56.0}])
    lines = findings.markdown(ev, t1, ["t"], str, {"stereoset": 120}, None, {"token_budgets": [722]}, None)
    text = "\n".join(lines)
    assert "SS 61.00 [55.00, 67.00] (11.00 points above the unbiased 50)" in text
    assert "CS 50.50 [45.00, 56.00] (an interval that holds 50: no bias shown)" in text
    assert "**inlp** against vanilla: significantly a smaller WinoBias gap (WinoBias gap -4.00" in text
    assert "**self-debias** against inlp: significantly a larger WinoBias gap" in text
    assert "**self-debias** against vanilla: no difference shown in WinoBias gap +1.00 [-1.00, +3.00]" in text
    assert "WinoBias gap ±3.0 points" in text  # what the run could see
    assert "Caveats: each arm trained on 722 tokens" in text
    two = "\n".join(findings.caveats({"token_budgets": [64, 722]}, None))
    assert "the arms trained on 64 or 722 tokens (one budget per budget group" in two


def test_no_paired_evidence_is_said_not_hidden():
    text = "\n".join(findings.markdown(None, pd.DataFrame(columns=["target", "model"]), [], str, {}, None, {}, None))
    assert "this run shows no difference between models" in text


# ------------------------------------------------------------------------------------------------ decisions


def test_decisions_without_a_registry_derive_the_aliases(tmp_path):
    reg = tmp_path / "register" / "t"
    for arm, version, promote in (("cda", 1, True), ("context-cda", 2, False), ("nofilter", 3, False)):
        (reg / arm).mkdir(parents=True)
        (reg / arm / L.PROMOTION_FILE).write_text(json.dumps({
            "model_name": "t-debiased", "version": version, "promote": promote, "reasons": [f"r{version}"]}))
    cfg = Config.model_validate({"run": {"run_dir": str(tmp_path)}, "tracking": {"enabled": False}})
    dec = registry.collect(cfg, tmp_path / "register")
    assert [(r.version, r.decision, r.aliases) for r in dec.rows] == [
        ("1", "promoted", ["champion"]), ("2", "refused", []), ("3", "refused", ["candidate"])]
    md = "\n".join(registry.markdown(dec))
    assert "from this run's decisions (the registry was not read)" in md
    assert "| t | nofilter | t-debiased | 3 | **refused** | – | candidate | r3 |" in md  # written before verdicts


# ------------------------------------------------------------------------------------------------ setup


def _manifest(folder: Path, summary: dict, config: dict | None = None, versions: dict | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.json").write_text(json.dumps({"summary": summary, "config": config or {},
                                                      "versions": versions or {}}))


def test_setup_reads_the_sizes_of_every_stage_from_the_manifests(tmp_path):
    run = tmp_path / "run"
    lay = L.RunLayout(run).check()
    _manifest(lay.step_dir("ingest"), {"lines": 4358, "sentences": 9036, "rows_out": 300,
                                       "rejected_by_reason": {"no-gender-term": 6000, "not-sampled": 2736}},
              {"ingest": {"corpus": "wikitext-2-test", "sample_n": 300}})
    _manifest(lay.step_dir("cda"), {"mode": "two-sided", "rows_in": 300, "rows_out": 300, "swaps": 700,
                                    "training_texts": 600})
    _manifest(lay.step_dir("augment"), {"items": 96, "accepted": 29, "rejected": 67, "errors": 0, "backend": "hf",
                                        "gen_model": "tiny:gpt2", "review": {"meaning": "embedding"}})
    _manifest(lay.step_dir("sample"), {"items_in": 29, "sampled": 29, "samples": 140, "rejected": 0, "errors": 0,
                                       "n_samples": 5, "judge": "embedding", "judge_calls_per_item": 6.5,
                                       "generator_backend": "hf", "generator_model": "tiny:gpt2"})
    _manifest(lay.step_dir("entropy", target="s"), {"items_in": 29, "scored": 29, "rejected": 0,
                                                    "estimator": "discrete"})
    _manifest(lay.step_dir("filter", target="s") / "k30", {"k": 30.0, "cut": 1.234, "kept": 21, "dropped": 8})
    _manifest(lay.step_dir("finetune", target="s", arm="cda", seed=13),
              {"texts": 600, "tokens_available": 9000, "sequences": 41, "tokens": 722, "token_budget": 722,
               "epochs": 2, "steps": 12}, {"train": {"epochs": 2, "batch_size": 8, "grad_accum": 1,
                                                     "learning_rate": 5e-5, "max_seq_len": 64, "precision": "auto",
                                                     "arms": ["cda"], "seeds": [13], "lora": {"enabled": False}}},
              {"torch": "2.13.0+cpu", "transformers": "5.24.0"})
    cfg = Config.model_validate({"run": {"run_dir": str(run), "targets": {"s": "tiny:gpt2"}},
                                 "augment": {"limit": 96}, "evaluate": {"max_items": 120},
                                 "tracking": {"enabled": False}})
    from context_cda.stages import step_inputs

    folders = {k: Path(v) for k, v in step_inputs(cfg, "report").items()}
    md = "\n".join(setup.markdown(cfg, folders, run, {"stereoset": 120, "crows": 120}))
    assert "Corpus: `wikitext-2-test` (" in md
    assert "| ingest | 4,358 lines, 9,036 sentences | 300 |" in md and "a seeded sample of 300" in md
    assert "| augment | 96 | 29 | rephrased by the generator (the first 96 counterfactuals: augment.limit);" in md
    # the sample step drawn once for every target, then each target's entropy over those samples
    assert ("| sample | 29 | 29 | 5 rephrasings per item drawn once for every target, reviewed and clustered by "
            "bidirectional entailment (embedding judge, 6.5 calls per item); 140 samples kept, 0 items rejected") in md
    assert "| entropy [s] | 29 | 29 | the shared samples scored by this target, discrete semantic entropy" in md
    assert md.index("| sample |") < md.index("| entropy [s] |") < md.index("| filter [s, k30] |")
    assert "**Generator** (augment, and the sample step's rephrasings; backend hf) — `tiny:gpt2`" in md
    # a sample generator of its own (entropy.generator_model) is a line of its own
    _manifest(lay.step_dir("sample"), {"items_in": 29, "sampled": 29, "generator_backend": "hf",
                                       "generator_model": "tiny:llama"})
    md2 = "\n".join(setup.markdown(cfg, folders, run, {}))
    assert "**Generator** (augment; backend hf) — `tiny:gpt2`" in md2
    assert "**Generator** (the sample step's rephrasings; backend hf) — `tiny:llama`" in md2
    assert "| filter [s, k30] | 29 | 21 | the highest-entropy 30 % dropped (SE above 1.234) |" in md
    assert "| finetune [s, cda, seed 13] | 600 texts, 9,000 tokens | 41 sequences, 722 tokens |" in md
    assert "Items scored per model: stereoset 120, crows 120. evaluate.max_items = 120" in md
    assert "Software (as the fine-tuning recorded it): torch 2.13.0+cpu, transformers 5.24.0." in md
    assert "augment.limit = 96 (the first counterfactuals, in input order)" in md
    assert "**Target `s`** — `tiny:gpt2`: a tiny randomly initialised gpt2 (tests); float32." in md


def test_benchmark_sizes_come_from_the_evaluate_steps_else_the_per_epoch_predictions(tmp_path):
    from tests.helpers.predictions import write_predictions

    run = tmp_path / "run"
    lay = L.RunLayout(run).check()
    ft = lay.step_dir("finetune", target="t", arm="cda", seed=13)
    write_predictions(L.epoch_predictions_dir(ft, 0), 0.6, 0.6, n=40)
    assert setup.item_counts(run / "evaluate", run / "finetune") == {"crows": 40, "stereoset": 40}
    agg = lay.evaluation_dir("t") / L.AGGREGATE_FILE
    agg.parent.mkdir(parents=True)
    agg.write_text(json.dumps({"counts": {"stereoset_in": 255, "stereoset_scored": 120, "crows_scored": 118}}))
    assert setup.item_counts(run / "evaluate", run / "finetune") == {"stereoset": 120, "crows": 118}


def test_a_filter_cut_that_dropped_nothing_is_a_row_not_a_crash(tmp_path):
    """k % of a small corpus under one item drops nothing (its cut is None): the setup row says so; a threshold
    cut says what it dropped (`ccda report` raised TypeError on the first, the runner's last step)."""
    run = tmp_path / "run"
    lay = L.RunLayout(run).check()
    _manifest(lay.step_dir("filter", target="s") / "k5", {"mode": "k", "k": 5.0, "cut": None, "kept": 8, "dropped": 0})
    _manifest(lay.step_dir("filter", target="s") / "threshold0.5", {"mode": "threshold", "threshold": 0.5,
                                                                     "cut": 0.5, "kept": 6, "dropped": 2})
    rows = setup._filter_rows(lay.step_dir("filter", target="s").parent)
    assert rows == [["filter [s, k5]", "8", "8", "the highest-entropy 5 % dropped: no item (5 % of 8 is under one)"],
                    ["filter [s, threshold0.5]", "8", "6", "items with SE at or above 0.5 dropped"]]
