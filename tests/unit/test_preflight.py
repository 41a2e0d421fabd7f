"""Pre-flight of a run: every dataset and benchmark name the planned steps need is checked before the first step,
each problem one line naming the key (or the flag) to change; a misspelt benchmark is refused before a model loads;
an --input that does not exist says so."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from tests.helpers.data import mirrored

from context_cda import datasets
from context_cda.config import load_config
from context_cda.errors import ConfigError, InputError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def offline(monkeypatch, tmp_path):
    """A private empty cache and no network: every download fails at once."""
    monkeypatch.setenv("CCDA_DATA_CACHE", str(tmp_path / "cache"))

    def no_network(url, dest):
        raise ConnectionError("network disabled in tests")

    monkeypatch.setattr(datasets, "_download", no_network)


@pytest.fixture()
def partial_mirror(tmp_path, monkeypatch, offline) -> Path:
    """A mirror holding the demo's corpus and StereoSet, nothing else."""
    corpus, stereoset = mirrored("wikitext-2-test"), mirrored("stereoset")
    if corpus is None or stereoset is None:
        pytest.skip("needs wikitext-2-test and stereoset in $CCDA_DATA_DIR")
    mirror = tmp_path / "mirror"
    for name, src in (("wikitext-2-test", corpus), ("stereoset", stereoset)):
        dest = datasets.get(name).location(mirror)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
    monkeypatch.setenv("CCDA_DATA_DIR", str(mirror))
    return mirror


def _demo(tmp_path: Path, **sections):
    overrides = {"run": {"run_dir": str(tmp_path / "run")}, **sections}
    return load_config("demo", overrides, params_file=ROOT / "params.yaml")


def test_ccda_run_with_a_partial_mirror_stops_before_the_first_step(tmp_path, partial_mirror, monkeypatch, capsys):
    from context_cda import steps
    from context_cda.cli import main

    ran = []
    monkeypatch.setattr(steps, "run", lambda step, *a, **k: ran.append(step.name))
    monkeypatch.chdir(ROOT)
    code = main(["run", "--profile", "demo", "--run-dir", str(tmp_path / "run"), "--params", str(ROOT / "params.yaml")])
    err = capsys.readouterr().err
    assert code == 2 and ran == [] and "nothing was run" in err
    lines = [ln.strip() for ln in err.splitlines()]
    missing = [ln for ln in lines if "(needed by " in ln]
    names = {ln.split(" ", 1)[0] for ln in missing}
    assert {"crows-pairs", "gender-words", "glue-sst2", "biasbios-samples", "stsb", "nli-bias-words"} <= names
    assert "wikitext-2-test" not in names and "stereoset" not in names  # the mirror has those
    crows = next(ln for ln in missing if ln.startswith("crows-pairs"))
    assert "or set evaluate.crows_path to a local copy" in crows and str(partial_mirror) in crows
    assert "download from raw.githubusercontent.com failed" in crows
    hint = next(ln for ln in lines if ln.startswith("to fix:"))
    assert "ccda data fetch crows-pairs gender-words" in hint and f"--to {partial_mirror}" in hint
    assert not (tmp_path / "run" / "ingest").exists()


def test_only_the_planned_steps_datasets_are_needed(tmp_path, partial_mirror):
    from context_cda.pipeline import plan, preflight_problems, select

    cfg = _demo(tmp_path)
    assert preflight_problems(cfg, select(plan(cfg), until="cda")) == []  # the corpus is in the mirror
    per_epoch = _demo(tmp_path, evaluate={"benchmarks": ["stereoset", "glue"], "after_training": False})
    steps = select(plan(per_epoch), only=["finetune"])
    assert preflight_problems(per_epoch, steps) == []  # fine-tuning scores only the per-epoch benchmarks


def test_explicit_paths_that_do_not_exist_name_their_key(tmp_path, offline):
    from context_cda.pipeline import plan, preflight_problems

    cfg = _demo(tmp_path, ingest={"path": str(tmp_path / "nope.txt")},
                evaluate={"benchmarks": ["stereoset"], "stereoset_path": str(tmp_path / "ss.jsonl")})
    problems = preflight_problems(cfg, plan(cfg))
    assert problems[0].startswith(f"ingest.path: {tmp_path / 'nope.txt'} does not exist (needed by ingest)")
    assert problems[1].startswith(f"evaluate.stereoset_path: {tmp_path / 'ss.jsonl'} does not exist")
    assert len(problems) == 2


def test_a_misspelt_benchmark_is_one_line_naming_the_key(tmp_path, offline):
    from context_cda.pipeline import plan, preflight_problems

    cfg = _demo(tmp_path, evaluate={"benchmarks": ["stereoset", "crow", "glu"]})
    from context_cda.evaluate.registry import REGISTRY

    (line,) = preflight_problems(cfg, plan(cfg))
    assert line == ("evaluate.benchmarks: unknown benchmarks 'crow' (did you mean 'crows'?), 'glu' (did you mean "
                    f"'glue'?); known: {', '.join(REGISTRY)}.")
    assert {"stereoset", "crows", "winogender", "glue"} <= set(REGISTRY)


def test_ccda_evaluate_refuses_a_misspelt_benchmark_before_loading_anything(tmp_path, capsys):
    from context_cda.cli import main

    t0 = time.perf_counter()
    code = main(["evaluate", "--model", "tiny:gpt2", "--benchmarks", "stereoset,crow", "--run-dir",
                 str(tmp_path / "run"), "--params", str(ROOT / "params.yaml")])
    assert code == 2 and time.perf_counter() - t0 < 20
    err = capsys.readouterr().err
    assert "--benchmarks: unknown benchmark 'crow' (did you mean 'crows'?)" in err
    assert not (tmp_path / "run" / "evaluate").exists()


def test_the_library_checks_names_before_scoring(tmp_path):
    from context_cda.evaluate import check_names, evaluate_scorer

    with pytest.raises(ConfigError, match=r"evaluate\.benchmarks: unknown benchmark 'nope'"):
        evaluate_scorer(None, _demo(tmp_path, evaluate={"benchmarks": ["stereoset", "nope"]}).evaluate)
    assert check_names(["crows", "stereoset"]) == ["crows", "stereoset"]


@pytest.mark.parametrize(("command", "flag"), [
    (["cda"], "--input"), (["augment"], "--input"), (["sample"], "--input"), (["entropy"], "--samples"),
    (["validate", "--stage", "cda"], "--input"),
    (["finetune", "--target", "smollm2-135m", "--arm", "cda", "--seed", "13"], "--input")])
def test_a_missing_input_file_says_so(tmp_path, capsys, command, flag):
    from context_cda.cli import main

    missing = tmp_path / "typo.parquet"
    code = main([*command, "--profile", "demo", flag, str(missing), "--run-dir", str(tmp_path / "run"),
                 "--params", str(ROOT / "params.yaml")])
    err = capsys.readouterr().err
    assert code == 2 and f"{flag} {missing}: no such file" in err and "produces it" not in err
    assert f"leave {flag} out" in err


def test_input_error_hint_for_missing_stage_outputs_is_unchanged(tmp_path):
    from context_cda.io import read_table

    with pytest.raises(InputError, match="Run the stage that produces it first"):
        read_table(tmp_path / "absent.parquet")
