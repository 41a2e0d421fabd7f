"""The pipeline tests' shared fixtures: the fake generator, and the doors check's probe and runner door
(tests/helpers/doors.py), made once per test module that asks for them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HELPERS = Path(__file__).resolve().parents[1] / "helpers"
if str(HELPERS) not in sys.path:
    sys.path.insert(0, str(HELPERS))

import doors  # noqa: E402
from fake_openai import FakeOpenAIServer  # noqa: E402


@pytest.fixture(scope="module")
def fake_llm():
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def excluded(fake_llm, tmp_path_factory) -> dict[str, str]:
    """boundary -> the id a reviewer excluded there (picked from a probe run)."""
    return doors.probe_exclusions(fake_llm.base_url, tmp_path_factory.mktemp("probe") / "run")


@pytest.fixture(scope="module")
def runner_door(fake_llm, excluded, tmp_path_factory) -> Path:
    """The local runner's run folder of the doors check: the ids every other door must train on."""
    from context_cda.pipeline import run_pipeline

    run = tmp_path_factory.mktemp("runner") / "run"
    run_pipeline(doors.door_config(fake_llm.base_url, run, excluded))
    return run
