"""Shared fixtures. Benchmark data is read in place from the mirror named by $CCDA_DATA_DIR (`.ci/run` points it at
the workspace's benchmark folder), by dataset name through the resolver (tests/helpers/data.py) or as the mirror
folder itself (the ``shared_data`` fixture); tests that need it skip when it is not set."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_MIRROR = os.environ.get("CCDA_DATA_DIR", "")
SHARED_DATA = Path(_MIRROR) if _MIRROR and not _MIRROR.startswith("s3:") else None

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# tiny models gain nothing from threads, and a loaded CI box loses a lot to oversubscription
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The benchmark mirror folder ($CCDA_DATA_DIR), or skip the test when it is not set or not there."""
    if SHARED_DATA is None or not SHARED_DATA.is_dir():
        pytest.skip(f"no benchmark mirror folder (CCDA_DATA_DIR={_MIRROR or 'not set'}; set it to a mirror folder)")
    return SHARED_DATA


@pytest.fixture()
def data_mirror(shared_data: Path, monkeypatch, tmp_path: Path) -> Path:
    """Datasets by name from the benchmark mirror (CCDA_DATA_DIR), with a private, empty data cache."""
    monkeypatch.setenv("CCDA_DATA_DIR", str(shared_data))
    monkeypatch.setenv("CCDA_DATA_CACHE", str(tmp_path / "data-cache"))
    return shared_data


@pytest.fixture(scope="session")
def wikitext() -> Path:
    from tests.helpers.data import SKIP_REASON, mirrored

    p = mirrored("wikitext-2-test")
    if p is None:
        pytest.skip(SKIP_REASON.format("wikitext-2-test"))
    return p


@pytest.fixture()
def cfg_factory(tmp_path: Path):
    """Build a Config with a run dir in tmp and optional overrides, ignoring any params.yaml on disk."""
    from context_cda.config import load_config

    def make(profile: str | None = None, **sections):
        overrides = {"run": {"run_dir": str(tmp_path / "run")}}
        for sec, values in sections.items():
            overrides.setdefault(sec, {}).update(values)
        params = ROOT / "params.yaml"
        return load_config(profile, overrides, params_file=params if params.is_file() else None)

    return make


@pytest.fixture(scope="session")
def python() -> str:
    return sys.executable
