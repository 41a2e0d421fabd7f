"""The vLLM image: linted by hadolint in the default suite (tests/pipelines/test_dockerfiles.py); built here when
its base (the official vLLM OpenAI-server image, CUDA) can be pulled, else the test says so and which build arg
points it at a base you have."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))
from container_images import build_images, tag  # noqa: E402

pytestmark = [pytest.mark.images, pytest.mark.timeout(3600)]


def test_vllm_image_builds_when_its_base_can_be_had(container_engine):
    proc = build_images(container_engine, ["vllm"])
    if proc.returncode == 3:
        line = proc.stderr.strip().splitlines()[-1]
        assert "can't be pulled" in line and "VLLM_IMAGE" in line, line
        pytest.skip(line)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    image = tag("vllm")
    user = container_engine.run("image", "inspect", "--format", "{{.Config.User}}", image).stdout.strip()
    assert user == "10001:10001"
    entry = container_engine.run("image", "inspect", "--format", "{{json .Config.Entrypoint}}", image).stdout
    assert "ccda-vllm-serve" in entry
