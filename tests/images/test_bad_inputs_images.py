"""Bad input at the image doors is one clear line: a base image that can't be pulled (naming the build arg that
fixes it), a data folder that was not mounted, a run folder the container's user can't write. (No engine at all:
tests/pipelines/test_image_scripts.py, which needs none.)"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))
from container_images import IMAGE_UID, RUN_ENV, build_images  # noqa: E402
from tiny_pipeline import FIXTURES  # noqa: E402

pytestmark = [pytest.mark.images, pytest.mark.timeout(900)]


def _one_error_line(proc) -> str:
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    return errors[0]


def test_a_base_image_that_cant_be_pulled_names_the_build_arg(container_engine):
    proc = build_images(container_engine, ["cpu"], BASE="pull", PYTHON_IMAGE="registry.invalid/python:3.11.0-slim")
    assert proc.returncode == 3
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("build-images: base image registry.invalid/python:3.11.0-slim can't be pulled")
    assert "build arg PYTHON_IMAGE" in line and "scripts/make-debian-base.sh" in line


def test_a_data_folder_that_was_not_mounted(container_engine, project_images):
    proc = container_engine.container(project_images["cpu"], "ccda", "ingest", "--profile", "demo",
                                      env={**RUN_ENV, "CCDA_DATA_DIR": "/data/mirror"}, check=False)
    line = _one_error_line(proc)
    assert "$CCDA_DATA_DIR=/data/mirror: no such folder (in a container: is the data folder mounted?)" in line


def test_a_corpus_path_outside_the_mounts(container_engine, project_images):
    proc = container_engine.container(project_images["cpu"], "ccda", "ingest", "--profile", "tiny",
                                      "--set", "ingest.path=/data/corpus.txt", env=RUN_ENV, check=False)
    assert _one_error_line(proc) == "error: /data/corpus.txt: no such file. Check --path (or ingest.path in the config)."


def test_a_run_folder_the_container_user_cannot_write(container_engine, project_images, tmp_path):
    run = tmp_path / "runs"
    run.mkdir()
    run.chmod(0o755)  # the host's user (root here) owns it; the image's user is 10001
    proc = container_engine.container(
        project_images["cpu"], "ccda", "ingest", "--profile", "tiny", "--set",
        f"ingest.path={FIXTURES / 'corpus' / 'tiny_corpus.txt'}", "--run-dir", str(run / "tiny"),
        env=RUN_ENV, volumes=[(run, run, "rw"), (FIXTURES, FIXTURES, "ro")], check=False)
    line = _one_error_line(proc)
    assert f"{run / 'tiny'}: cannot write here (Permission denied" in line
    assert f"{run} belongs to uid {run.stat().st_uid}, this process runs as uid {IMAGE_UID}" in line


def test_too_little_free_space_is_refused_before_building(container_engine):
    proc = build_images(container_engine, ["mlflow"], MIN_FREE_GB="1000000")
    assert proc.returncode == 1
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("build-images: only ") and "GB free under /" in line
    assert "MIN_FREE_GB=0 to try anyway" in line and "building context-cda" not in proc.stderr


def test_a_rebuild_removes_the_image_its_tag_pointed_at_before(container_engine, project_images, tmp_path):
    """Each rebuild of cpu/train would otherwise leave a 2 GB untagged image behind (CI's disk filled up so)."""
    tag = project_images["mlflow"]
    (tmp_path / "Dockerfile").write_text(f"FROM {tag}\nLABEL test.stale={tmp_path.name}\n")
    container_engine.run("build", "-q", "-t", tag, str(tmp_path))
    stale = container_engine.run("image", "inspect", "--format", "{{.Id}}", tag).stdout.strip()
    proc = build_images(container_engine, ["mlflow"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"removed the image {tag} pointed at before ({stale.removeprefix('sha256:')}" in proc.stderr
    assert container_engine.run("image", "inspect", stale, check=False).returncode != 0
    assert container_engine.run("image", "inspect", "--format", "{{.Id}}", tag).stdout.strip() != stale
