"""The stage commands' own logic (which folder a command writes, what it counts), without running a model."""

from pathlib import Path

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
    assert label == "gpt2/cda/seed-99" and inputs == {}
    assert kw == {"model": final, "name": "gpt2/cda/seed-99", "arm": "cda", "seed": 99}  # the arm's benchmarks apply
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


def _results(cfg, errors):
    """StepResults of a run whose steps ended with ``errors[name]`` error items (the others with none)."""
    from context_cda import pipeline

    steps = {s.name: s for s in pipeline.plan(cfg)}
    return [pipeline.StepResult(steps[n], "errors" if e else "ran", 0.1, {"errors": e}) for n, e in errors.items()]


@pytest.fixture()
def two_parts(cfg_factory):
    return cfg_factory(run={"targets": {"gpt2": "tiny:gpt2"}}, pipeline={"generation_shards": 2})


def test_error_items_count_once_not_in_the_parts_and_again_in_their_merge(two_parts):
    from context_cda.pipeline import with_errors

    res = _results(two_parts, {"augment-part[part-0]": 2, "augment-part[part-1]": 1, "augment": 3,
                               "sample-part[part-0]": 0, "sample-part[part-1]": 4, "sample": 4})
    assert [r.step.name for r in with_errors(res)] == ["augment", "sample"]
    assert sum(r.errors for r in with_errors(res)) == 7
    # without their merge in the run (`--only augment-part`) the parts' errors are the ones counted
    assert sum(r.errors for r in with_errors(res[:2])) == 3


def test_run_warns_with_each_error_item_once_and_finds_the_report(two_parts, monkeypatch):
    from typer.testing import CliRunner

    from context_cda import pipeline
    from context_cda.cli import app
    from context_cda.io import write_text
    from context_cda.layout import REPORT_FILE, RunLayout

    res = _results(two_parts, {"augment-part[part-0]": 2, "augment-part[part-1]": 1, "augment": 3})
    monkeypatch.setattr(pipeline, "run_pipeline", lambda *a, **k: res)
    write_text(RunLayout.of(two_parts).report_dir / REPORT_FILE, "# report\n")
    out = CliRunner().invoke(app, ["run", "--run-dir", str(two_parts.run_dir()), "--set",
                                   "pipeline.generation_shards=2", "--set", "run.targets={gpt2: 'tiny:gpt2'}"])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "WARNING: 3 items ended as errors" in text and "augment: 3" in text
    assert "augment-part[part-0]: 2" not in text
    assert "report: " in text


def test_register_target_takes_arms_and_an_evaluation_override(cfg, monkeypatch, tmp_path):
    from context_cda.tracking import register as R

    calls = []
    monkeypatch.setattr(R, "register_inputs", lambda config, t, a, seed, folders: {"model": Path(f"/m/{a}")})
    monkeypatch.setattr(R, "run_register", lambda config, inputs, out, t, a, discover, seed: calls.append(
        (a, dict(inputs), out, seed)) or {"arm": a})
    res = R.run_register_target(cfg, {}, tmp_path / "reg", "gpt2")  # default: every arm of train.arms, in order
    assert [c[0] for c in calls] == ["cda", "context-cda"] and res["arms"] == {"cda": {"arm": "cda"},
                                                                                 "context-cda": {"arm": "context-cda"}}
    assert calls[1][2] == tmp_path / "reg" / "context-cda" and calls[0][3] == 13
    calls.clear()
    R.run_register_target(cfg, {}, tmp_path / "reg", "gpt2", arms=["context-cda"], evaluation=tmp_path / "e.json")
    assert calls == [("context-cda", {"model": Path("/m/context-cda"), "evaluation": tmp_path / "e.json"},
                      tmp_path / "reg" / "context-cda", 13)]
    with pytest.raises(ConfigError, match="exactly one arm"):
        R.run_register_target(cfg, {}, tmp_path / "reg", "gpt2", evaluation=tmp_path / "e.json")


def test_register_command_runs_the_register_step_of_each_target(cfg, monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from context_cda import publish
    from context_cda.cli import app

    seen = []

    def fake(config, inputs, out_dir, target, arms=None, evaluation=None):
        seen.append((target, arms, evaluation, out_dir))
        return {"target": target, "arms": {a: {"model_name": f"{target}-debiased", "version": 1} for a in arms}}

    monkeypatch.setattr(publish, "run_register_target", fake)  # the step of the stage table: register, then cards
    ev = tmp_path / "e.json"
    out = CliRunner().invoke(app, ["register", "--run-dir", str(cfg.run_dir()), "--set",
                                   "run.targets={gpt2: 'tiny:gpt2'}", "--target", "gpt2", "--arm", "cda",
                                   "--evaluation", str(ev)])
    assert out.exit_code == 0, out.output
    assert seen == [("gpt2", ["cda"], ev, cfg.run_dir() / "register/gpt2")]
    assert "gpt2-debiased v1 (cda): refused - kept as candidate" in out.output


def test_run_help_lists_every_stage_in_order():
    from typer.testing import CliRunner

    from context_cda.cli import app

    text = " ".join(CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "250"}).output.split())
    assert ("ingest → cda → validate → augment → validate → sample → entropy → validate → filter → finetune → "
            "evaluate → register → report") in text
