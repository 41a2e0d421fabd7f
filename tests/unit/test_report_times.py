"""The report's "Time per step" table (report/setup.py): seconds summed per stage from the manifests, the share of
each, the wall time from the first start to the last end; the report's own manifest and old manifests without
timings are left out."""

from __future__ import annotations

import json
from pathlib import Path

from context_cda.report.setup import step_times, time_lines


def _manifest(folder: Path, stage: str, name: str, seconds, start: str, end: str) -> None:
    folder.mkdir(parents=True)
    timings = {"load": 1.0, "total": seconds} if seconds is not None else {}
    (folder / "manifest.json").write_text(json.dumps({
        "stage": stage, "name": name, "timings": timings,
        "started": f"2026-12-03T10:{start}+00:00", "finished": f"2026-12-03T10:{end}+00:00"}))


def test_seconds_per_stage_share_and_wall_time(tmp_path):
    _manifest(tmp_path / "ingest", "ingest", "ingest", 10.0, "00:00", "00:10")
    _manifest(tmp_path / "finetune" / "t" / "cda" / "13", "finetune", "finetune@t-cda-13", 30.0, "00:10", "00:40")
    _manifest(tmp_path / "finetune" / "t" / "ccda" / "13", "finetune", "finetune@t-ccda-13", 50.0, "00:40", "01:30")
    _manifest(tmp_path / "evaluate" / "t", "evaluate_vanilla", "evaluate_vanilla@t", 10.0, "01:30", "01:40")
    _manifest(tmp_path / "report", "report", "report", 99.0, "01:40", "03:19")  # the report itself: not counted
    _manifest(tmp_path / "old", "cda", "cda", None, "00:00", "00:01")  # older manifest without timings
    assert [s["name"] for s in step_times(tmp_path)] == [
        "ingest", "finetune@t-cda-13", "finetune@t-ccda-13", "evaluate_vanilla@t"]
    lines = time_lines(tmp_path)
    assert "| ingest | 1 | 10.0 | 10.0 % |" in lines
    assert "| finetune | 2 | 80.0 | 80.0 % |" in lines
    assert "| evaluate_vanilla | 1 | 10.0 | 10.0 % |" in lines
    assert "| all steps | 4 | 100.0 | 100 % |" in lines
    assert lines.index("| ingest | 1 | 10.0 | 10.0 % |") < lines.index("| finetune | 2 | 80.0 | 80.0 % |")
    assert "Wall time from the first step's start to the last step's end: 100 s." in lines


def test_no_manifests_no_table(tmp_path):
    assert time_lines(tmp_path) == []
    bad = tmp_path / "x"
    bad.mkdir()
    (bad / "manifest.json").write_text(json.dumps({"stage": "x", "timings": {"total": 1.0}, "started": "soon"}))
    assert time_lines(tmp_path) == []


def test_the_training_lines_name_every_arm_and_seed_of_the_run(tmp_path):
    """A fine-tuning's manifest holds the config of its own arm and seed; the setup names the run's."""
    from context_cda import layout as L
    from context_cda.config import load_config
    from context_cda.report.setup import training_lines

    cfg = load_config("demo", {"train": {"arms": ["cda", "context-cda", "cda-4k"], "seeds": [13, 14, 15],
                                         "epochs": 1}})
    step = tmp_path / "finetune" / "t" / "cda" / "seed-13"
    step.mkdir(parents=True)
    (step / "manifest.json").write_text(json.dumps({
        "stage": "finetune", "config": {"train": {**cfg.train.model_dump(mode="json"), "arms": ["cda"],
                                                  "seeds": [13]}}}))
    folders = {"finetune": tmp_path / "finetune"}
    assert list(L.discover(folders["finetune"], "finetune")), "the manifest is where the report looks"
    lines = training_lines(cfg, folders)
    assert lines[0] == ("- Arms: cda, context-cda, cda-4k (and vanilla, the target untouched, as epoch 0); "
                        "seeds 13, 14, 15.")
    assert lines[1].startswith("- 1 epoch, batch ")
