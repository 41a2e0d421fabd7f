"""The five front doors train on the same, validated rows.

The tiny DAG runs through the local runner, the stage commands one by one, `dvc repro`, `kfp.local` in this venv
(SubprocessRunner) and `kfp.local` with every task in its container image (DockerRunner), with one row forced into
quarantine at each validation boundary (``validate.exclude_ids``: a reviewer's exclusions, checked by the
great-expectations suite of the boundary where the id appears). Every door must leave each excluded id out of
everything downstream of its boundary, and the doors' fine-tuning corpora (``train_rows.parquet`` of each
(arm, seed)) must hold exactly the same ids.

The runner and the stage commands run in ``make test`` (about a minute); `dvc repro` and `kfp.local` need the
whole DAG in a git repository or in component subprocesses, so they are marked ``slow`` and run in CI's slow step;
the container door needs the images and an engine: ``images`` (``make test-images``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

HELPERS = Path(__file__).resolve().parents[1] / "helpers"
sys.path.insert(0, str(HELPERS))

import tiny_pipeline as tp  # noqa: E402
from fake_openai import FakeOpenAIServer  # noqa: E402

from context_cda import layout as L  # noqa: E402
from context_cda.config import Config  # noqa: E402
from context_cda.pipeline import run_pipeline  # noqa: E402
from context_cda.validation import EXCLUDED  # noqa: E402

pytestmark = pytest.mark.services
TARGET = "tiny-gpt2"
ARMS = ("cda", "context-cda")


def door_config(base_url: str, run_dir: Path | str, exclude: dict[str, str], absolute: bool = True) -> Config:
    """The tiny pipeline without the registry and the after-training evaluation (not what this test checks)."""
    cfg = tp.tiny_config(base_url, run_dir=run_dir, absolute=absolute)
    cfg.validate_.exclude_ids = {boundary: [rid] for boundary, rid in exclude.items()}
    cfg.tracking.enabled = False
    cfg.evaluate.after_training = False
    cfg.train.max_steps = 1
    return cfg


@pytest.fixture(scope="module")
def fake_llm():
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def excluded(fake_llm, tmp_path_factory) -> dict[str, str]:
    """One id per boundary, picked from a probe run: a counterfactual, an augmented row of another sentence, and
    a third row that reaches the entropy boundary."""
    probe = tmp_path_factory.mktemp("probe") / "run"
    run_pipeline(door_config(fake_llm.base_url, probe, {}), until="validate-augment")
    layout = L.RunLayout(probe)
    cda_id = pd.read_parquet(layout.validated("cda"))["id"].iloc[0]
    aug = pd.read_parquet(layout.validated("augment"))
    others = aug[aug["cda_id"] != cda_id]["id"].tolist()
    assert len(others) >= 2, "the tiny corpus needs at least three augmented sentences"
    return {"cda": cda_id, "augment": others[0], "entropy": others[1]}


@pytest.fixture(scope="module")
def runner_door(fake_llm, excluded, tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("runner") / "run"
    run_pipeline(door_config(fake_llm.base_url, run, excluded))
    return run


def train_ids(folders: dict[str, Path]) -> dict[str, set[str]]:
    """arm -> the ids of its fine-tuning corpus (``train_rows.parquet``), from each arm's step folder."""
    return {arm: set(pd.read_parquet(d / L.TRAIN_ROWS_FILE)["id"]) for arm, d in folders.items()}


def run_folder_ids(run: Path) -> dict[str, set[str]]:
    layout = L.RunLayout(run)
    return train_ids({arm: layout.step_dir("finetune", target=TARGET, arm=arm, seed=13) for arm in ARMS})


def check_door(run: Path, excluded: dict[str, str]) -> dict[str, set[str]]:
    """Every excluded id is quarantined at its boundary and absent from everything after it."""
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


def test_runner_trains_on_validated_rows_only(runner_door, excluded):
    ids = check_door(runner_door, excluded)
    assert ids["cda"] and ids["context-cda"]


def test_stage_commands_one_by_one_train_on_the_same_rows(fake_llm, excluded, runner_door, tmp_path, monkeypatch):
    from context_cda.cli import main

    run = tmp_path / "run"
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(door_config(fake_llm.base_url, run, excluded).to_dict()))
    monkeypatch.chdir(tmp_path)
    base = ["--params", str(params)]
    for argv in (["ingest"], ["cda"], ["validate", "--stage", "cda"], ["augment", "--no-progress"],
                 ["validate", "--stage", "augment"], ["sample", "--no-progress"], ["entropy", "--target", TARGET],
                 ["validate", "--stage", "entropy", "--target", TARGET], ["filter", "--target", TARGET],
                 ["finetune", "--target", TARGET]):
        assert main([*argv, *base]) == 0, argv
    assert check_door(run, excluded) == run_folder_ids(runner_door)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_dvc_repro_trains_on_the_same_rows(fake_llm, excluded, runner_door, tmp_path):
    pytest.importorskip("dvc")
    from dvc_project import RUN_DIR, Project

    params = door_config(fake_llm.base_url, RUN_DIR, excluded, absolute=False).to_dict()
    proj = Project(tmp_path / "proj", fake_llm.base_url, params)
    proj.repro()
    assert check_door(proj.root / RUN_DIR, excluded) == run_folder_ids(runner_door)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_kfp_local_trains_on_the_same_rows(fake_llm, excluded, runner_door, tmp_path, monkeypatch):
    pytest.importorskip("kfp")
    if str(tp.ROOT) not in sys.path:
        sys.path.insert(0, str(tp.ROOT))
    from kfp import local

    from pipelines import build_pipeline

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tp.ROOT), os.environ.get("PYTHONPATH")])))
    root = tmp_path / "pipeline_root"
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(root), raise_on_error=True)
    build_pipeline("cpu", door_config(fake_llm.base_url, tmp_path / "run", excluded),
                   last_stage="finetune")()
    check_kfp_door(root, excluded, runner_door)


def check_kfp_door(root: Path, excluded: dict[str, str], runner_door: Path) -> dict[str, set[str]]:
    """The finetune tasks' checkpoint artifacts under the pipeline root trained on the runner door's ids, and
    every excluded id sits in a quarantine table."""
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


def _compiled_images(pipeline_func, tmp_path: Path) -> dict[str, str]:
    """executor label -> the image the compiled package names for it."""
    from kfp import compiler

    package = tmp_path / "pipeline.yaml"
    compiler.Compiler().compile(pipeline_func, package_path=str(package))
    execs = yaml.safe_load(package.read_text())["deploymentSpec"]["executors"]
    return {label: spec["container"]["image"] for label, spec in execs.items()}


@pytest.mark.images
@pytest.mark.timeout(3600)
def test_kfp_local_in_the_images_trains_on_the_same_rows(fake_llm, excluded, runner_door, container_engine,
                                                         project_images, tmp_path):
    """The fifth door: kfp.local's DockerRunner, every task in the image the compiled pipeline names for it (the
    CPU image, the train image on CPU torch for the GPU steps), ingest to register; the containers reach the test
    server on 127.0.0.1 through host networking, read the fixtures from a read-only mount and share a model
    cache (the PVC on a cluster); MLflow's store sits on a mounted folder, where register leaves its versions."""
    pytest.importorskip("kfp")
    if container_engine.name != "docker":
        pytest.skip(f"kfp.local.DockerRunner talks to the Docker API; the engine here is {container_engine.name}")
    if str(tp.ROOT) not in sys.path:
        sys.path.insert(0, str(tp.ROOT))
    import docker
    from container_images import RUN_ENV, writable_by_image_user
    from kfp import local

    from pipelines import build_pipeline

    root = writable_by_image_user(tmp_path / "pipeline_root")
    tracking = writable_by_image_user(tmp_path / "tracking")  # run_dir's parent: mlflow.db + mlartifacts
    cache = writable_by_image_user(tmp_path / "models")
    cfg = door_config(fake_llm.base_url, tracking / "run", excluded)
    cfg.tracking.enabled = True
    cfg.evaluate.after_training = True
    cfg.pipeline.cpu_image, cfg.pipeline.image = project_images["cpu"], project_images["train"]
    pipeline = build_pipeline("cpu", cfg, last_stage="register")
    images = _compiled_images(pipeline, tmp_path)
    assert set(images.values()) == {project_images["cpu"], project_images["train"]}, images
    assert images["exec-finetune"] == project_images["train"] and images["exec-ingest"] == project_images["cpu"]

    # the store's tables exist before the parallel finetune tasks open it (as a tracking server's would): two
    # first-time openers of one SQLite file would both run MLflow's schema migrations
    container_engine.container(project_images["cpu"], "python3", "-c",
                               f"from mlflow import MlflowClient; MlflowClient('sqlite:///{tracking}/mlflow.db')"
                               ".search_experiments()", volumes=[(tracking, tracking, "rw")])
    mounts = [docker.types.Mount(str(p), str(p), type="bind", read_only=ro)
              for p, ro in ((tp.FIXTURES, True), (tracking, False))]
    mounts.append(docker.types.Mount("/models/cache", str(cache), type="bind"))
    local.init(runner=local.DockerRunner(network_mode="host", mounts=mounts, environment=dict(RUN_ENV)),
               pipeline_root=str(root), raise_on_error=True)
    pipeline()

    ids = check_kfp_door(root, excluded, runner_door)
    print("five doors, train ids per arm: " + ", ".join(f"{arm}: {len(v)}" for arm, v in sorted(ids.items())))
    owners = {p.stat().st_uid for p in root.rglob("*") if p.is_file()}
    assert owners == {10001}, owners  # every task ran as the images' user
    decisions = [json.loads(p.read_text()) for p in root.rglob("promotion.json")]
    assert decisions and {d["model_name"] for d in decisions} == {f"{TARGET}-debiased"}
    assert all(d["version"] for d in decisions), decisions  # registered, in the mounted store
    assert (tracking / "mlflow.db").is_file() and any((tracking / "mlartifacts").rglob("*.safetensors"))
