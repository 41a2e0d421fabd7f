"""The doors check: the tiny DAG, with one row forced into quarantine at each validation boundary
(``validate.exclude_ids``: a reviewer's exclusions, checked by the great-expectations suite of the boundary where the
id appears), must leave each excluded id out of everything downstream of its boundary, and every door's fine-tuning
corpora (``train_rows.parquet`` of each (arm, seed)) must hold exactly the ids the local runner's do.

The doors: the runner and the stage commands (tests/pipelines/test_four_doors.py), `dvc repro` (its first repro in
tests/pipelines/test_reruns.py), kfp.local's SubprocessRunner (the end-to-end run of tests/pipelines/test_kfp_local.py)
and kfp.local's DockerRunner (test_four_doors.py, in the image suite). The fixtures that make the probe and the
runner door are in tests/pipelines/conftest.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import tiny_pipeline as tp

from context_cda import layout as L
from context_cda.config import Config
from context_cda.validation import EXCLUDED

TARGET = "tiny-gpt2"
ARMS = ("cda", "context-cda")


def door_config(base_url: str, run_dir: Path | str, exclude: dict[str, str], absolute: bool = True) -> Config:
    """The tiny pipeline without the registry and the after-training evaluation (not what the doors check)."""
    cfg = tp.tiny_config(base_url, run_dir=run_dir, absolute=absolute)
    exclude_rows(cfg, exclude)
    cfg.tracking.enabled = False
    cfg.evaluate.after_training = False
    cfg.train.max_steps = 1
    return cfg


def exclude_rows(cfg: Config, exclude: dict[str, str]) -> Config:
    """``cfg`` with one reviewer's exclusion per boundary (boundary -> id)."""
    cfg.validate_.exclude_ids = {boundary: [rid] for boundary, rid in exclude.items()}
    return cfg


def probe_exclusions(base_url: str, run: Path) -> dict[str, str]:
    """One id per boundary, picked from a probe run: a counterfactual, an augmented row of another sentence, and
    a third row that reaches the entropy boundary."""
    from context_cda.pipeline import run_pipeline

    run_pipeline(door_config(base_url, run, {}), until="validate-augment")
    layout = L.RunLayout(run)
    cda_id = pd.read_parquet(layout.validated("cda"))["id"].iloc[0]
    aug = pd.read_parquet(layout.validated("augment"))
    others = aug[aug["cda_id"] != cda_id]["id"].tolist()
    assert len(others) >= 2, "the tiny corpus needs at least three augmented sentences"
    return {"cda": cda_id, "augment": others[0], "entropy": others[1]}


def train_ids(folders: dict[str, Path]) -> dict[str, set[str]]:
    """arm -> the ids of its fine-tuning corpus (``train_rows.parquet``), from each arm's step folder."""
    return {arm: set(pd.read_parquet(d / L.TRAIN_ROWS_FILE)["id"]) for arm, d in folders.items()}


def run_folder_ids(run: Path) -> dict[str, set[str]]:
    layout = L.RunLayout(run)
    return train_ids({arm: layout.step_dir("finetune", target=TARGET, arm=arm, seed=13) for arm in ARMS})


def check_door(run: Path, excluded: dict[str, str]) -> dict[str, set[str]]:
    """Every excluded id is quarantined at its boundary and absent from everything after it (a run folder)."""
    layout = L.RunLayout(run)
    for boundary, rid in excluded.items():
        q = pd.read_parquet(layout.validate_dir(boundary, TARGET if boundary == "entropy" else None)
                            / L.QUARANTINE_FILE)
        assert rid in set(q["id"]) and EXCLUDED in q.set_index("id").loc[rid, "reason"], (boundary, rid)
    assert excluded["cda"] not in set(pd.read_parquet(layout.validated("cda"))["id"])
    augmented = pd.read_parquet(layout.augmented)
    assert excluded["cda"] not in set(augmented["cda_id"]), "augment read a quarantined counterfactual"
    assert excluded["augment"] in set(augmented["id"])  # it reached its boundary, and stopped there
    assert excluded["augment"] not in set(pd.read_parquet(layout.scores(TARGET))["id"])
    assert excluded["entropy"] in set(pd.read_parquet(layout.scores(TARGET))["id"])
    corpus = set(pd.read_parquet(layout.filtered(TARGET, 30))["id"])
    assert not corpus & {excluded["augment"], excluded["entropy"]}, "filter read a quarantined row"
    ids = run_folder_ids(run)
    assert excluded["cda"] not in ids["cda"]
    assert not ids["context-cda"] & set(excluded.values())
    return ids


def check_kfp_door(root: Path, excluded: dict[str, str], runner_door: Path) -> dict[str, set[str]]:
    """The finetune tasks' checkpoint artifacts under a kfp.local pipeline run's folder trained on the runner
    door's ids, and every excluded id sits in a quarantine table."""
    folders = {}
    for rows in root.rglob(L.TRAIN_ROWS_FILE):  # each finetune task's checkpoint artifact
        manifest = json.loads((rows.parent / "manifest.json").read_text())
        folders[manifest["keys"]["arm"]] = rows.parent
    assert set(folders) == set(ARMS)
    quarantined = {}
    for table in root.rglob(L.QUARANTINE_FILE):
        q = pd.read_parquet(table)
        quarantined.update(zip(q["id"], q["reason"], strict=True))
    for rid in excluded.values():
        assert EXCLUDED in quarantined[rid], rid
    ids = train_ids(folders)
    assert not ids["context-cda"] & set(excluded.values()) and excluded["cda"] not in ids["cda"]
    assert ids == run_folder_ids(runner_door)
    return ids
