"""No finished work is redone, whichever door runs the step: a tiny run, then an arm added (a post-hoc one:
SentenceDebias; the tiny corpus has too few sentences per class for INLP), then a seed added, through the runner,
the stage commands, `dvc repro` and kfp.local (with its task cache: on the end-to-end run of test_kfp_local.py). A
fine-tuning depends on its own arm's corpus, its seed, its budget group's token budget and its training settings:
adding the arm reruns none, adding a seed runs only that seed's. Every door leaves the same up-to-date marker:
`ccda finetune` for one arm, then `ccda run`, does not train it again. A step no configured arm reads is not
planned (train.arms=[cda]: no LLM stages).

The runner and the stage commands run in ``make test``; `dvc repro` is ``slow`` (its first repro is also the doors
check's `dvc repro` door, tests/helpers/doors.py).
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

HELPERS = Path(__file__).resolve().parents[1] / "helpers"
sys.path.insert(0, str(HELPERS))

import tiny_pipeline as tp  # noqa: E402
from doors import check_door, exclude_rows, run_folder_ids  # noqa: E402

from context_cda import layout as L  # noqa: E402
from context_cda.pipeline import plan, run_pipeline  # noqa: E402

pytestmark = pytest.mark.services
TARGET = "tiny-gpt2"
ARMS = ["cda", "context-cda"]
POSTHOC = "sentence-debias"


def rerun_config(base_url: str, run_dir: Path | str, arms=ARMS, seeds=(13,), absolute: bool = True):
    cfg = tp.tiny_config(base_url, run_dir=run_dir, absolute=absolute)
    cfg.tracking.enabled = False
    cfg.evaluate.after_training = True
    cfg.train.max_steps = 1
    cfg.train.arms = list(arms)
    cfg.train.seeds = list(seeds)
    cfg.baselines.sentence_debias.min_pairs = 2
    return cfg


def ran(results) -> Counter:
    return Counter(r.step.row.step for r in results if r.status != "skipped")


def weights(run: Path) -> dict[str, float]:
    """(arm, seed) -> the mtime of its final weights (a retrained model is written again)."""
    return {str(p.relative_to(run / "finetune")): p.stat().st_mtime
            for p in (run / "finetune").rglob(f"{L.FINAL_DIR}/model.safetensors")}


def test_the_runner_retrains_nothing_for_an_added_arm_and_only_the_new_seed(fake_llm, tmp_path):
    run = tmp_path / "run"
    first = ran(run_pipeline(rerun_config(fake_llm.base_url, run)))
    assert first["finetune"] == 2 and first["budget"] == 2
    before = weights(run)
    arm = ran(run_pipeline(rerun_config(fake_llm.base_url, run, [*ARMS, POSTHOC])))
    assert arm == {"debias": 1, "evaluate-posthoc": 1, "report": 1}, arm  # no fine-tuning, no budget, no evaluation
    assert weights(run) == before
    seed = ran(run_pipeline(rerun_config(fake_llm.base_url, run, [*ARMS, POSTHOC], (13, 14))))
    assert seed == {"finetune": 2, "evaluate": 2, "report": 1}, seed  # the new seed's, and the report
    assert {k: v for k, v in weights(run).items() if "seed-13" in k} == before
    print(f"runner: base {dict(first)}; +{POSTHOC} {dict(arm)}; +seed {dict(seed)}")


def test_a_fine_tuning_done_by_its_stage_command_is_not_redone_by_the_runner(fake_llm, tmp_path, monkeypatch):
    from context_cda.cli import main

    run = tmp_path / "run"
    cfg = rerun_config(fake_llm.base_url, run)
    run_pipeline(cfg, until="filter")
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(cfg.to_dict()))
    monkeypatch.chdir(tmp_path)
    assert main(["finetune", "--params", str(params), "--target", TARGET, "--arm", "cda"]) == 0
    done = weights(run)
    results = run_pipeline(cfg)
    status = {r.step.name: r.status for r in results}
    assert status[f"finetune[{TARGET}/cda/seed-13]"] == status[f"budget[{TARGET}/cda]"] == "skipped"
    assert status[f"finetune[{TARGET}/context-cda/seed-13]"] == "ran"
    assert {k: v for k, v in weights(run).items() if k.startswith(f"{TARGET}/cda")} == done
    print(f"by hand: ccda finetune --arm cda, then ccda run: {dict(ran(results))}")


def test_the_stage_commands_retrain_nothing_for_an_added_arm(fake_llm, tmp_path, monkeypatch, capsys):
    from context_cda.cli import main

    run = tmp_path / "run"
    monkeypatch.chdir(tmp_path)

    def commands(arms, seeds=(13,)) -> None:
        params = tmp_path / "params.yaml"
        params.write_text(yaml.safe_dump(rerun_config(fake_llm.base_url, run, arms, seeds).to_dict()))
        base = ["--params", str(params)]
        for argv in (["ingest"], ["cda"], ["validate", "--stage", "cda"], ["augment", "--no-progress"],
                     ["validate", "--stage", "augment"], ["sample", "--no-progress"], ["entropy"],
                     ["validate", "--stage", "entropy"], ["filter"], ["finetune"]):
            assert main([*argv, *base]) == 0, argv

    commands(ARMS)
    before = weights(run)
    capsys.readouterr()
    commands([*ARMS, POSTHOC])
    out = capsys.readouterr().out
    assert weights(run) == before
    text = " ".join(out.split())
    assert text.count("up to date, skipped") >= 12, text[-3000:]  # every step of every command
    assert all(f"{s}[{TARGET}/{a}{x}]: up to date, skipped" in text for a in ARMS
               for s, x in (("budget", ""), ("finetune", "/seed-13"))), text[-3000:]
    commands([*ARMS, POSTHOC], (13, 14))
    after = weights(run)
    assert {k: v for k, v in after.items() if "seed-13" in k} == before and len(after) == 4


def test_a_step_no_arm_reads_is_not_planned_and_the_cda_arm_trains_without_it(fake_llm, tmp_path, monkeypatch):
    from context_cda.cli import main

    cfg = rerun_config(fake_llm.base_url, tmp_path / "run", ["cda"])
    steps = {s.row.step for s in plan(cfg)}
    assert not steps & {"augment-part", "augment", "validate-augment", "sample-part", "sample", "entropy",
                        "validate-entropy", "filter"}
    assert {"budget", "finetune", "evaluate", "report"} <= steps
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(cfg.to_dict()))
    monkeypatch.chdir(tmp_path)
    for argv in (["ingest"], ["cda"], ["validate", "--stage", "cda"], ["finetune", "--arm", "cda"]):
        assert main([*argv, "--params", str(params)]) == 0, argv
    assert (tmp_path / "run" / "finetune" / TARGET / "cda" / "seed-13" / L.FINAL_DIR / "model.safetensors").is_file()
    results = {r.step.name: r.status for r in run_pipeline(cfg)}
    assert results[f"finetune[{TARGET}/cda/seed-13]"] == "skipped" and results["report"] == "ran"


# ------------------------------------------------------------------------------------------------ dvc repro


def _dvc_params(base_url: str, arms, seeds=(13,), tracking: bool = False, exclude: dict | None = None) -> dict:
    from dvc_project import RUN_DIR

    cfg = rerun_config(base_url, RUN_DIR, arms, seeds, absolute=False)
    cfg.tracking.enabled = tracking
    return exclude_rows(cfg, exclude or {}).to_dict()


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_dvc_repro_runs_every_stage_once_then_retrains_nothing_for_an_added_arm_and_only_the_new_seed(
        fake_llm, excluded, runner_door, tmp_path):
    """The whole dvc.yaml on the tiny profile (registry and report included): the first repro runs every stage,
    and is the `dvc repro` door of the doors check (tests/helpers/doors.py: a row excluded at each validation
    boundary, the same fine-tuning ids as the runner's); a second does nothing; then the arm and the seed are
    added."""
    pytest.importorskip("dvc")
    from dvc_project import BIN, RUN_DIR, Project

    def params(arms, seeds=(13,)) -> dict:
        return _dvc_params(fake_llm.base_url, arms, seeds, tracking=True, exclude=excluded)

    proj = Project(tmp_path / "proj", fake_llm.base_url, params(ARMS))
    stages = set(proj.dvc("stage", "list", "--name-only").stdout.split())
    assert {s.split("@")[0] for s in stages} >= {"ingest", "augment", "entropy", "finetune", "evaluate", "register",
                                                  "report"}
    first_ran = proj.repro()
    assert first_ran == stages
    assert proj.repro() == set()
    assert (proj.root / RUN_DIR / "report" / "report.md").is_file()
    assert "epoch" in proj.dvc("plots", "show", "--json").stdout
    assert check_door(proj.root / RUN_DIR, excluded) == run_folder_ids(runner_door)
    first = Counter(s.split("@")[0] for s in first_ran)

    def regenerate(params: dict) -> None:  # as a user does after editing params.yaml (`make dvc`)
        proj.set_params(params)
        (proj.root / "dvc.yaml").write_text(proj.run(str(BIN / "ccda"), "config", "dvc", "--params",
                                                     "params.yaml").stdout)

    run = proj.root / RUN_DIR
    before = weights(run)
    regenerate(params([*ARMS, POSTHOC]))
    arm = Counter(s.split("@")[0] for s in proj.repro())
    assert "finetune" not in arm and weights(run) == before, arm
    regenerate(params([*ARMS, POSTHOC], (13, 14)))
    seed = Counter(s.split("@")[0] for s in proj.repro())
    assert seed["finetune"] == 2 and {k: v for k, v in weights(run).items() if "seed-13" in k} == before, seed
    print(f"dvc repro: base {dict(first)}; +{POSTHOC} {dict(arm)}; +seed {dict(seed)}")


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_dvc_repro_killed_during_finetune_resumes_from_the_last_epoch(fake_llm, tmp_path):
    """`dvc repro` killed (SIGKILL to it and its stage command) while a fine-tuning trains: DVC leaves the finetune
    stage's outs (``persist``) and its resume state (``checkpoints/`` is no out), so the next `dvc repro` resumes
    from the last finished epoch instead of starting over."""
    import signal
    import subprocess
    import time

    pytest.importorskip("dvc")
    from dvc_project import DVC, RUN_DIR, Project

    params = _dvc_params(fake_llm.base_url, ["cda"])
    params["train"].update(epochs=3, max_steps=None)
    proj = Project(tmp_path / "proj", fake_llm.base_url, params)
    env = {**proj.env, "CCDA_TEST_SLOW": "finetune:2.0",  # each epoch's evaluation takes 2 s more (the window)
           "PYTHONPATH": os.pathsep.join([str(HELPERS / "slow_stages"), str(tp.ROOT / "src")])}
    step = proj.root / RUN_DIR / "finetune" / TARGET / "cda" / "seed-13"
    killed = subprocess.Popen([DVC, "repro"], cwd=proj.root, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 900
    while time.time() < deadline and killed.poll() is None and not list(step.glob("checkpoints/epoch-*/state.json")):
        time.sleep(0.05)
    assert killed.poll() is None, "dvc repro finished before the fine-tuning could be killed"
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait(timeout=60)
    epochs = sorted(int(d.name.split("-")[1]) for d in step.glob("checkpoints/epoch-*") if (d / "state.json").is_file())
    assert epochs and not (step / L.FINAL_DIR).exists()
    again = proj.dvc("repro")
    log = again.stdout + again.stderr
    resumed = Path(RUN_DIR) / "finetune" / TARGET / "cda" / "seed-13" / "checkpoints" / f"epoch-{epochs[-1]}"
    assert f"resumed from {resumed}" in log, log[-3000:]  # (DVC runs the stage in the project folder)
    assert (step / L.FINAL_DIR / "model.safetensors").is_file()
    print(f"dvc repro killed during finetune at epoch {epochs[-1]} of 3; the next dvc repro resumed from it")
