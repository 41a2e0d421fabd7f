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
