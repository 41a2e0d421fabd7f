"""The stage commands' own logic (which folder a command writes, what it counts), without running a model."""

import pytest

from context_cda.commands.evaluate import _jobs
from context_cda.errors import ConfigError


@pytest.fixture()
def cfg(cfg_factory):
    return cfg_factory(run={"targets": {"gpt2": "tiny:gpt2"}}, train={"arms": ["cda", "context-cda"], "seeds": [13, 99]})


def test_evaluate_model_with_arm_writes_the_arms_folder_not_the_vanilla_baseline(cfg):
    rd = cfg.run_dir()
    final = str(rd / "finetune/gpt2/cda/seed-99/final")
    [(label, inputs, dest, kw)] = _jobs(cfg, final, "gpt2", None, "cda", 99, None)
    assert dest == rd / "evaluate/gpt2/cda/seed-99"
    assert label == "gpt2/cda/seed-99" and kw == {"model": final, "name": "gpt2/cda/seed-99"} and inputs == {}
    [(_, _, dest, _)] = _jobs(cfg, final, "gpt2", None, "cda", None, None)  # the seed defaults to train.seeds[0]
    assert dest == rd / "evaluate/gpt2/cda/seed-13"


def test_evaluate_model_alone_is_the_model_as_it_is(cfg):
    rd = cfg.run_dir()
    [(label, _, dest, kw)] = _jobs(cfg, "tiny:bert", "bert", None, "vanilla", None, None)
    assert dest == rd / "evaluate/bert/vanilla" and label == "bert"
    # the target's own reference under its own name is its vanilla baseline
    [(_, _, dest, _)] = _jobs(cfg, "tiny:gpt2", "gpt2", None, "vanilla", None, None)
    assert dest == rd / "evaluate/gpt2/vanilla"


def test_evaluate_model_refuses_ambiguous_combinations(cfg, tmp_path):
    final = str(cfg.run_dir() / "finetune/gpt2/cda/seed-13/final")
    with pytest.raises(ConfigError, match="vanilla baseline.*--arm ARM"):  # would overwrite the target's baseline
        _jobs(cfg, final, "gpt2", None, "vanilla", None, None)
    with pytest.raises(ConfigError, match="--seed is the training seed.*add --arm"):
        _jobs(cfg, final, "other", None, "vanilla", 99, None)
    with pytest.raises(ConfigError, match="--model and --target"):
        _jobs(cfg, final, None, ["gpt2"], "cda", None, None)
    # an explicit --out-dir names where the results go: no baseline is touched
    [(_, _, dest, _)] = _jobs(cfg, final, "gpt2", None, "vanilla", None, tmp_path / "x")
    assert dest == tmp_path / "x"
