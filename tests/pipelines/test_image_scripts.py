"""The image scripts' doors without an engine (the default suite): each bad setting is one clear line and a
non-zero exit, before anything is built. With an engine, tests/images/ builds and runs the images for real."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"


def _script(name: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, **env}
    return subprocess.run(["bash", str(SCRIPTS / name), *args], capture_output=True, text=True, env=full,
                          timeout=120, cwd=ROOT)


def _last_line(proc: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines, proc.stdout
    assert "Traceback" not in proc.stderr
    return lines[-1]


@pytest.mark.parametrize("script", sorted(SCRIPTS.glob("*.sh")), ids=lambda p: p.name)
def test_scripts_are_valid_bash(script: Path):
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    assert os.access(script, os.X_OK), f"{script.name} is not executable"


def test_an_unknown_image_is_named_with_the_known_ones():
    proc = _script("build-images.sh", "gpu")
    assert proc.returncode == 2
    line = _last_line(proc)
    assert line.startswith("build-images: unknown image 'gpu'") and all(k in line for k in ("cpu", "train", "mlflow"))


def test_no_daemon_is_one_line_that_says_how_to_start_one(tmp_path):
    proc = _script("build-images.sh", "cpu", CCDA_ENGINE="docker", DOCKER_HOST=f"unix://{tmp_path}/none.sock")
    if shutil.which("docker") is None:
        assert "docker: not installed (apt-get install docker.io)" in _last_line(proc)
    else:
        assert _last_line(proc) == (f"build-images: no container engine can run here: docker: no daemon answers at "
                                    f"unix://{tmp_path}/none.sock (start one: scripts/engine.sh start)")
    assert proc.returncode == 2


@pytest.mark.skipif(shutil.which("podman") is not None, reason="podman is installed here")
def test_no_engine_at_all_is_one_line():
    proc = _script("build-images.sh", "cpu", CCDA_ENGINE="podman")
    assert proc.returncode == 2
    assert _last_line(proc) == ("build-images: no container engine can run here: podman: not installed "
                                "(apt-get install podman runc)")
    status = _script("engine.sh", "status", CCDA_ENGINE="podman")
    assert status.returncode == 2 and "podman: not installed" in _last_line(status)


def test_a_ca_bundle_or_wheel_folder_that_is_not_there(tmp_path):
    proc = _script("build-images.sh", "cpu", CA_BUNDLE=str(tmp_path / "proxy-ca.pem"))
    assert proc.returncode == 2 and _last_line(proc) == (
        f"build-images: CA_BUNDLE={tmp_path / 'proxy-ca.pem'} is not a file (a PEM bundle, or CA_BUNDLE=none)")
    proc = _script("build-images.sh", "cpu", CA_BUNDLE="none", TORCH_WHEEL_DIR=str(tmp_path / "wheels"))
    assert proc.returncode == 2 and _last_line(proc) == (
        f"build-images: TORCH_WHEEL_DIR={tmp_path / 'wheels'} is not a folder")


def test_engine_stop_leaves_a_daemon_it_did_not_start_alone(tmp_path):
    """`scripts/engine.sh stop` only stops the dockerd its own `start` recorded (a stale pid file is dropped)."""
    (tmp_path / "dockerd.pid").write_text(str(os.getpid()))  # this pytest process: not a dockerd
    proc = _script("engine.sh", "stop", CCDA_DOCKERD_DIR=str(tmp_path))
    assert proc.returncode == 0 and not (tmp_path / "dockerd.pid").exists()


def test_a_free_space_floor_that_is_not_a_number_is_refused_before_the_engine():
    proc = _script("build-images.sh", "cpu", MIN_FREE_GB="8GB")
    assert proc.returncode == 2
    assert _last_line(proc) == "build-images: MIN_FREE_GB=8GB: a whole number of GB (0 to skip the check)"
