"""Pre-flight of a run: every dataset and benchmark name the planned steps need is checked before the first step,
each problem one line naming the key (or the flag) to change; a misspelt benchmark is refused before a model loads;
an --input that does not exist says so."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from tests.helpers.data import mirrored

from context_cda.config import load_config
from context_cda.data import datasets
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
    # ingest and cda read the corpus (in the mirror) and every benchmark no training text may hold
    problems = preflight_problems(cfg, select(plan(cfg), until="cda"))
    assert {p.split(" ", 1)[0] for p in problems if "(needed by decontaminate" in p} == {
        "crows-pairs", "winogender", "winobias"}
    only_stereoset = _demo(tmp_path, decontaminate={"benchmarks": ["stereoset"]})
    assert preflight_problems(only_stereoset, select(plan(only_stereoset), until="cda")) == []
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


def _tiny_run(tmp_path: Path, *sets: str) -> list[str]:
    args = ["run", "--profile", "tiny", "--params", str(ROOT / "params.yaml"), "--run-dir", str(tmp_path / "run")]
    for item in sets:
        args += ["--set", item]
    return args


@pytest.mark.parametrize(("benchmarks", "until"), [("[stereoset, crows]", "cda"), ("[stereoset, winobias]", None)])
def test_a_malformed_winobias_folder_stops_ccda_run_before_its_first_step(tmp_path, monkeypatch, capsys, benchmarks,
                                                                          until):
    """Read for decontamination (every step that makes training text: ingest first) or for evaluation: either way
    its files are parsed by the pre-flight, and the run stops before its first step with one line naming the file
    and line."""
    from test_wino import write_winobias

    from context_cda import pipeline
    from context_cda.cli import main
    from context_cda.steps import Counts, Ran

    bad = write_winobias(tmp_path / "wb")
    (bad / "anti_stereotyped_type2.txt.test").write_text("1 The nurse met the construction worker.\n")
    ran = []
    monkeypatch.setattr(pipeline.E, "run", lambda step, *a, **k: ran.append(step.name) or Ran({}, Counts()))
    monkeypatch.chdir(ROOT)
    args = _tiny_run(tmp_path, f"evaluate.winobias.path={bad}", f"evaluate.benchmarks={benchmarks}",
                     *(["tracking.enabled=false"]))
    capsys.readouterr()
    assert main([*args, *(["--until", until] if until else [])]) == 2 and ran == []
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error: ")]
    assert len(err) == 1 and "pre-flight, nothing was run" in err[0], err
    assert "anti_stereotyped_type2.txt.test:1: expected 'N sentence' with a bracketed" in err[0], err


def test_a_malformed_winogender_file_stops_the_run_and_a_good_one_passes(tmp_path, monkeypatch, capsys):
    from test_wino import write_winogender

    from context_cda import pipeline
    from context_cda.cli import main
    from context_cda.steps import Counts, Ran

    bad = write_winogender(tmp_path / "wg")
    with (bad / "all_sentences.tsv").open("a") as f:
        f.write("not-a-sentence-id\tThe nurse left.\n")
    ran = []
    monkeypatch.setattr(pipeline.E, "run", lambda step, *a, **k: ran.append(step.name) or Ran({}, Counts()))
    monkeypatch.chdir(ROOT)
    assert main([*_tiny_run(tmp_path, f"evaluate.winogender.path={bad}", "tracking.enabled=false"), "--until",
                 "ingest"]) == 2 and ran == []
    assert "all_sentences.tsv:8: expected 'OCCUPATION.PARTICIPANT.ANSWER.GENDER.txt" in capsys.readouterr().err
    assert main([*_tiny_run(tmp_path, "tracking.enabled=false"), "--until", "ingest"]) == 0 and ran == ["ingest"]
