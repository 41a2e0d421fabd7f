"""`ccda plan`: the work counts and their prices, on a hand-made throughput table."""

from __future__ import annotations

import json

import pytest

from context_cda.config import load_config
from context_cda.errors import ConfigError, InputError
from context_cda.tools.costs import (
    Assumptions,
    _attempts,
    benchmark_tokens,
    load_throughput,
    model_family,
    plan_costs,
    priced_rates,
    rate,
    wall_hours,
)
from context_cda.train.epochs import evaluated_epochs

TABLE = {
    "about": "test",
    "gpu": {"name": "G", "peak_flops": 1e12, "mfu": {"train": 0.5, "score": 0.5, "judge": 0.5, "generate": 0.5},
            "prefill_speedup": 4.0},
    "models": {"gen": {"params": 1e9}, "tgt": {"params": 1e8, "family": "causal"}, "judge": {"params": 1e8}},
    "rates": {"generate": {"gen": {"per_s": 100.0, "source": "measured"}}, "train": {}, "score": {}, "judge": {}},
}


def cfg(tmp_path, **over):
    base = {
        "run": {"run_dir": str(tmp_path / "run"), "targets": {"t": "tgt"}},
        "ingest": {"corpus": "path", "sample_n": 100},
        "augment": {"model": "gen", "max_retries": 1, "backend": "vllm"},
        "entropy": {"n_samples": 4, "judge_model": "judge", "generator_model": None},
        "filter": {"k": [25.0]},
        "train": {"arms": ["cda", "context-cda"], "k": 25.0, "seeds": [1, 2], "epochs": 3, "token_budget": 1000},
        "evaluate": {"after_training": False},
    }
    for k, v in over.items():
        base.setdefault(k, {}).update(v)
    return load_config(None, base, params_file=None)


def test_rates_measured_or_estimated_from_size():
    assert rate(TABLE, "generate", "gen") == (100.0, "measured")
    per_s, src = rate(TABLE, "train", "tgt")  # 0.5 * 1e12 / (6 * 1e8)
    assert per_s == pytest.approx(1e12 * 0.5 / 6e8) and src.startswith("estimate")
    with pytest.raises(ConfigError, match="no score throughput for 'nope'"):
        rate(TABLE, "score", "nope")


def test_the_plan_lists_every_rate_it_used_measured_or_assumed(tmp_path):
    used = {(r.op, r.model): r for r in priced_rates(cfg(tmp_path), TABLE)}
    assert set(used) == {("generate", "gen"), ("judge", "judge"), ("score", "tgt"), ("train", "tgt")}
    assert used[("generate", "gen")].measured and used[("generate", "gen")].per_s == 100.0
    assumed = used[("train", "tgt")]
    assert not assumed.measured and assumed.per_s == pytest.approx(1e12 * 0.5 / 6e8)
    assert "6N FLOPs per token at assumed 50% of 1 TFLOP/s" in assumed.source
    measured_mfu = {**TABLE, "gpu": {**TABLE["gpu"], "mfu_measured": ["score"]}}
    assert "at measured 50%" in {(r.op, r.model): r for r in priced_rates(cfg(tmp_path), measured_mfu)}[
        ("score", "tgt")].source
    assert "_rates_priced" not in TABLE  # the table itself is left as it was


def test_the_cpu_calibration_is_a_dated_table_of_measured_rates():
    """resources/throughput.json names the CPU calibration (benchmarks/gpu/run.py --cpu-calibration): a table of
    its own, dated, its device named, its peak and MFU measured, that prices the demo in CPU-hours."""
    packaged = load_throughput()
    assert packaged["calibrations"]["cpu"].endswith(".json")
    cpu = load_throughput("cpu")
    assert cpu["gpu"]["kind"] == "cpu" and cpu["gpu"]["date"] and "cores" in cpu["gpu"]["name"]
    assert cpu["gpu"]["peak_flops_source"].startswith("measured") and cpu["gpu"]["mfu_measured"]
    for op in ("train", "score", "generate"):
        assert cpu["rates"][op], op
        for entry in cpu["rates"][op].values():
            assert entry["per_s"] > 0 and entry["source"].startswith("measured: benchmarks/gpu/run.py --cpu-calibration")
    demo = load_config("demo")
    used = priced_rates(demo, cpu)
    assert any(r.measured for r in used) and all(r.per_s > 0 for r in used)
    assert sum(c.gpu_hours for c in plan_costs(demo, cpu)) > sum(c.gpu_hours for c in plan_costs(demo, packaged))


def test_expected_attempts_follow_the_acceptance_rate():
    assert _attempts(0.5, 0) == 1 and _attempts(0.5, 2) == pytest.approx(1 + 0.5 + 0.25)


def test_augment_entropy_and_finetune_by_hand(tmp_path):
    a = Assumptions(gendered_share=1.0, acceptance=0.5, prompt_tokens=40, completion_tokens=10, sentence_tokens=5,
                    judge_share=0.5, rephrase_prompt_tokens=110, rephrase_shared_tokens=70)
    costs = {c.step: c for c in plan_costs(cfg(tmp_path), TABLE, a)}
    # 100 items x 1.5 attempts = 150 generations of 10 tokens at 100 tok/s, prompts 40 tokens at 400 tok/s
    assert costs["augment"].gpu_hours == pytest.approx((150 * 10 / 100 + 150 * 40 / 400) / 3600)
    # accepted after one retry: 75 items; once for every target, one request of 4 samples each at 100 tok/s (the
    # prompt's 40 item-own tokens per item, its 70 shared ones once, at 400 tok/s), 75*16*0.5 judge calls of 2*5
    # tokens; the target scores 75*4 samples of 2*5 tokens
    judge = 1e12 * 0.5 / 2e8
    prompt = (75 * 40 + 70) / 400
    assert costs["sample"].gpu_hours == pytest.approx((prompt + 75 * 4 * 10 / 100 + 75 * 16 * 0.5 * 10 / judge) / 3600)
    assert costs["sample"].detail["samples"] == 300 and costs["sample"].detail["judge_calls"] == 600
    assert costs["entropy"].gpu_hours == pytest.approx(75 * 4 * 10 / judge / 3600)
    # 2 arms x 2 seeds, 1000 tokens x 3 epochs each; epochs 1, 2, 3 evaluated by each run, epoch 0 once
    train = 1e12 * 0.5 / 6e8
    assert costs["finetune"].detail["train_hours"] == pytest.approx(4 * 3000 / train / 3600)
    assert costs["finetune"].detail["evaluations_per_target"] == {"t": 4 * 3 + 1}
    per_eval = benchmark_tokens(a, "causal") / judge / 3600  # score rate = judge rate here (same size, same MFU)
    assert costs["finetune"].detail["per_epoch_eval_hours"] == pytest.approx(13 * per_eval)
    assert costs["finetune"].tasks == 4 and "evaluate" not in costs  # evaluate.after_training is off


def test_a_second_target_adds_only_its_scoring(tmp_path):
    """The samples and their clusters are drawn once for every target: a second target adds only the scoring."""
    one = {c.step: c for c in plan_costs(cfg(tmp_path), TABLE, Assumptions(gendered_share=1.0))}
    two = {c.step: c for c in plan_costs(cfg(tmp_path, run={"targets": {"t": "tgt", "u": "tgt"}}), TABLE,
                                         Assumptions(gendered_share=1.0))}
    assert two["sample"].gpu_hours == pytest.approx(one["sample"].gpu_hours) and two["sample"].tasks == 1
    assert two["entropy"].gpu_hours == pytest.approx(2 * one["entropy"].gpu_hours) and two["entropy"].tasks == 2


def test_wall_time_spreads_each_step_over_its_parallel_tasks(tmp_path):
    costs = plan_costs(cfg(tmp_path), TABLE, Assumptions(gendered_share=1.0))
    total = sum(c.gpu_hours for c in costs)
    assert wall_hours(costs, 1) == pytest.approx(total)
    ft = next(c for c in costs if c.step == "finetune")
    assert wall_hours(costs, 4) == pytest.approx(total - ft.gpu_hours + ft.gpu_hours / 4)


def test_counts_come_from_the_run_folder_when_the_steps_ran(tmp_path):
    from context_cda.io import write_json
    from context_cda.layout import RunLayout
    from context_cda.steps import Counts

    c = cfg(tmp_path)
    write_json(RunLayout.of(c).step_dir("cda") / "manifest.json", {"counts": vars(Counts(items_in=12, out=10))})
    costs = {k.step: k for k in plan_costs(c, TABLE, Assumptions(acceptance=1.0, gendered_share=1.0))}
    assert costs["augment"].work.endswith("(10 items)")


def test_post_hoc_arms_are_priced_as_a_fit_or_scoring_and_dropout_as_training(tmp_path):
    """inlp / sentence-debias: a projection fit (forward passes) and one evaluation each; self-debias: scoring only
    (two passes per position, StereoSet and CrowS); dropout: one more trained arm; none of them a fine-tuning run
    beyond dropout. baselines.targets limits them to some targets."""
    a = Assumptions(gendered_share=1.0, sentence_tokens=5)
    arms = ["cda", "context-cda", "dropout", "inlp", "sentence-debias", "self-debias"]
    over = {"train": {"arms": arms}, "evaluate": {"after_training": True, "benchmarks": ["stereoset", "crows"]},
            "baselines": {"inlp": {"max_per_class": 30, "neutral_lines": 20}}}
    base = {c.step: c for c in plan_costs(cfg(tmp_path, evaluate={"after_training": True,
                                                                  "benchmarks": ["stereoset", "crows"]}), TABLE, a)}
    full = {c.step: c for c in plan_costs(cfg(tmp_path, **over), TABLE, a)}
    train = 1e12 * 0.5 / 6e8
    score = 1e12 * 0.5 / 2e8
    # 3 trained arms x 2 seeds: dropout trains like the CDA arms, the others add no finetune run
    assert full["finetune"].tasks == 6 and base["finetune"].tasks == 4
    assert full["finetune"].detail["train_hours"] == pytest.approx(6 * 3000 / train / 3600)
    assert full["evaluate"].tasks == 1 + 6
    # the fit: INLP 2 x 30 gendered (100 cda rows: capped) + 20 neutral sentences, SentenceDebias 2 x 100 sentences
    assert full["debias"].tasks == 2 and full["debias"].detail["sentences"] == (60 + 20) + 200
    assert full["debias"].gpu_hours == pytest.approx(280 * 5 / score / 3600)
    one = benchmark_tokens(a, "causal") / score / 3600
    assert full["evaluate-posthoc"].tasks == 3
    assert full["evaluate-posthoc"].gpu_hours == pytest.approx(one + one + 2 * one)
    assert full["evaluate"].gpu_hours == pytest.approx(one)  # the fine-tuned models' scores: their last epoch's
    two = {**over, "run": {"targets": {"t": "tgt", "u": "tgt"}},
           "baselines": {**over["baselines"], "targets": ["t"]}}
    only = {c.step: c for c in plan_costs(cfg(tmp_path, **two), TABLE, a)}
    assert only["finetune"].tasks == 6 + 4 and only["debias"].tasks == 2 and only["evaluate-posthoc"].tasks == 3
    assert "debias" not in base and "evaluate-posthoc" not in base


def test_the_packaged_table_prices_the_paper_profile():
    table = load_throughput()
    assert table["gpu"]["peak_flops"] == 9.89e14
    paper = load_config("paper")
    costs = plan_costs(paper, table)
    assert {c.step for c in costs} >= {"augment", "sample", "entropy", "finetune"}
    assert all(c.gpu_hours > 0 for c in costs)
    by = {c.step: c.gpu_hours for c in costs}
    # generate once, score per target: the paper profile is well under half of the per-target figure (17.1)
    assert sum(by.values()) < 17.1 / 2 and max(by, key=by.get) != "entropy"


def test_bad_throughput_file(tmp_path):
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"gpu": {}}))
    with pytest.raises(InputError, match="rates"):
        load_throughput(p)
    p.write_text("{")
    with pytest.raises(InputError, match="not a readable throughput table"):
        load_throughput(p)


def test_plan_command_prints_the_steps_and_the_total(capsys):
    from context_cda.cli import main

    assert main(["plan", "--profile", "paper", "--gpus", "2"]) == 0
    out = capsys.readouterr().out
    assert "sample" in out and "entropy" in out and "total" in out and "dominant step" in out
    assert "GPU-hours" in out and "rates: 0 measured" in out and "ASSUMED  train" in out
    assert "CPU calibration:" in out and "--throughput cpu" in out
    assert main(["plan", "--profile", "demo", "--throughput", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "CPU-hours" in out and "measured score" in out


def test_the_evaluated_epochs_are_the_loops():
    assert evaluated_epochs(3, 2) == [0, 2, 3]  # every 2nd epoch and the last
    assert evaluated_epochs(3, 2, vanilla=False) == [2, 3]
    assert evaluated_epochs(4, 2) == [0, 2, 4]  # the last is an eval_every-th: counted once
    assert evaluated_epochs(100, 1) == list(range(101))
    assert evaluated_epochs(0, 5) == [0]
    with pytest.raises(ValueError, match="eval_every"):
        evaluated_epochs(3, 0)


def test_finetune_counts_the_last_epoch_when_eval_every_skips_it(tmp_path):
    c = cfg(tmp_path, train={"epochs": 3, "eval_every": 2})  # epochs 2 and 3 per run, epoch 0 once: 4 x 2 + 1
    ft = next(k for k in plan_costs(c, TABLE, Assumptions(gendered_share=1.0)) if k.step == "finetune")
    assert ft.detail["evaluations_per_target"] == {"t": 9}
    c = cfg(tmp_path, train={"epochs": 100, "eval_every": 1})
    ft = next(k for k in plan_costs(c, TABLE, Assumptions(gendered_share=1.0)) if k.step == "finetune")
    assert ft.detail["evaluations_per_target"] == {"t": 4 * 100 + 1}


def test_benchmark_tokens_follow_the_scorers_by_hand():
    a = Assumptions(stereoset_items=10, crows_items=5, stereoset_tokens=8, blank_word_tokens=2, crows_tokens=12,
                    crows_differing_tokens=3)
    # masked, nangia: StereoSet 3 x 10 sentences, one 8-token pass per subword of the BLANK word (2);
    # CrowS 2 x 5 sentences, one 12-token pass per shared non-special token (12 - 2 specials - 3 differing = 7)
    assert benchmark_tokens(a, "masked") == 3 * 10 * 2 * 8 + 2 * 5 * 7 * 12 == 1320
    assert benchmark_tokens(a, "masked", "bias-bench") == 480 + 2 * 5 * 3 * 12  # the 3 differing tokens
    assert benchmark_tokens(a, "masked", "lm-eval") == 480 + 2 * 5 * 10 * 12  # every non-special token
    # causal: one pass per sentence plus the one-token start pass
    assert benchmark_tokens(a, "causal") == 3 * 10 * 9 + 2 * 5 * 13 == 400
    # seq2seq (auto = bias-bench): StereoSet context + sentinel + word; CrowS a pass per differing token, the
    # decoder holding the sentinel and the token
    assert benchmark_tokens(a, "seq2seq") == 3 * 10 * (8 + 1 + 2) + 2 * 5 * 3 * 14
    with pytest.raises(ConfigError, match="nangia"):
        benchmark_tokens(a, "causal", "nangia")


def test_a_models_family_comes_from_the_table_else_the_packaged_one():
    assert model_family(TABLE, "tgt") == "causal"
    assert model_family(TABLE, "bert-base-uncased") == "masked"  # the packaged table's models
    assert model_family(TABLE, "t5-base") == "seq2seq"
    assert model_family(TABLE, "unknown/model") == "masked"  # the dearest to evaluate


def test_plan_prints_hours_and_seconds_under_36():
    """A step under a minute shows its seconds (a post-hoc arm's 0.2 s is not rounded to "0.0 min")."""
    from context_cda.commands.plan import _hours

    assert _hours(0.2 / 3600) == "0.2 s"
    assert _hours(16.5 / 3600) == "16.5 s"
    assert _hours(35.9 / 3600) == "35.9 s" and _hours(36 / 3600) == "0.01"
    assert _hours(0.31) == "0.31" and _hours(1234.5) == "1,234.50"


def test_a_fine_tuning_spreads_over_the_gpus_its_runs_leave_and_a_large_one_needs_several():
    from context_cda.tools.costs import StepCost, efficiency, least_gpus, step_wall

    a = Assumptions()
    ft = StepCost("finetune", 2, "", 10.0, spread=True)
    assert step_wall(ft, 1, a) == (pytest.approx(10.0), 1, 1)
    assert step_wall(ft, 2, a) == (pytest.approx(5.0), 2, 1)
    wall, side, per = step_wall(ft, 16, a)  # two runs side by side, 8 GPUs each inside a node
    assert (side, per) == (2, 8) and wall == pytest.approx(5.0 / (8 * a.within_node_efficiency))
    wall, _, per = step_wall(StepCost("finetune", 1, "", 10.0, spread=True), 16, a)  # one run across two nodes
    assert per == 16 and wall == pytest.approx(10.0 / (16 * a.across_nodes_efficiency))
    big = StepCost("finetune", 1, "", 10.0, gpus_per_task=2, spread=True)
    assert step_wall(big, 1, a)[0] == float("inf")
    assert step_wall(big, 2, a)[0] == pytest.approx(10.0 / (2 * a.within_node_efficiency))
    fixed = StepCost("augment", 1, "", 4.0)  # one generation part: more GPUs do not help
    assert step_wall(fixed, 16, a)[0] == pytest.approx(4.0) and efficiency(1, a) == 1.0
    table = {"gpu": {"memory_bytes": 80e9}}
    assert least_gpus(8.03e9, a.train_state_bytes, table, a) == 3  # 128 GB of AdamW state over 64 GB usable each
    assert least_gpus(8.03e9, a.weight_bytes, table, a) == 1  # its bf16 weights fit one GPU
    assert least_gpus(1.24e8, a.train_state_bytes, table, a) == 1


def test_plan_prices_the_paper_and_the_8b_profiles_on_1_8_and_16_gpus(capsys):
    from context_cda.cli import main

    assert main(["plan", "--profile", "paper-8b", "--gpus", "1,8,16"]) == 0
    out = capsys.readouterr().out
    assert out.count("(estimate)") == 3 and "does not fit" in out
    assert "on 1 GPU(s): finetune does not fit: one run needs at least 2 GPUs" in out
    assert "on 16 GPU(s): finetune: 2 run(s), 2 side by side, torchrun over 8 GPUs each" in out
    assert "on 8 GPU(s): augment: 8 vLLM engine(s) side by side" in out
    assert main(["plan", "--profile", "paper", "--gpus", "1,8,16"]) == 0
    out = capsys.readouterr().out
    assert out.count("(estimate)") == 3 and "on 16 GPU(s): finetune: 12 run(s), 12 side by side" in out
    assert "pipeline.generation_shards=1: 16 would use every GPU" in out
