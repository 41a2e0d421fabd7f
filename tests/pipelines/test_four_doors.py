"""The five front doors train on the same, validated rows (tests/helpers/doors.py says what is checked).

Here: the local runner and the stage commands one by one (``make test``, about a minute), and kfp.local with every
task in its container image (DockerRunner; ``images``: ``make test-images``). `dvc repro` is checked on the first
repro of tests/pipelines/test_reruns.py's DVC run and kfp.local's SubprocessRunner on the end-to-end run of
tests/pipelines/test_kfp_local.py (both ``slow``, CI's slow step): one whole-DAG run per door, read by every check
of that door.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

HELPERS = Path(__file__).resolve().parents[1] / "helpers"
sys.path.insert(0, str(HELPERS))

import tiny_pipeline as tp  # noqa: E402
from doors import TARGET, check_door, check_kfp_door, door_config, run_folder_ids  # noqa: E402

pytestmark = pytest.mark.services

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
