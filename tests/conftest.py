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


# ---- the container engine and the project's images (tests marked `images`: make test-images) ----------------

_ENGINES: list = []  # the session's engine, for the closing summary of build times and sizes


@pytest.fixture(scope="session")
def container_engine():
    """docker or podman, started for the session when none runs (and stopped after); skips the image tests
    with the reason when no engine can run here."""
    sys.path.insert(0, str(ROOT / "tests" / "helpers"))
    from container_images import NoEngine, engine_session

    try:
        with engine_session() as engine:
            _ENGINES.append(engine)
            yield engine
    except NoEngine as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def project_images(container_engine) -> dict[str, str]:
    """cpu, train (CPU torch) and mlflow, built once per session with scripts/build-images.sh: name -> tag."""
    from container_images import build_images, tag

    names = ("cpu", "train", "mlflow")
    proc = build_images(container_engine, names)
    if proc.returncode == 3:  # a base image can't be had: the script's line says which build arg fixes it
        pytest.skip(proc.stderr.strip().splitlines()[-1])
    assert proc.returncode == 0, f"scripts/build-images.sh failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return {n: tag(n) for n in names}


def pytest_terminal_summary(terminalreporter):
    for engine in _ENGINES:
        if engine.built:
            terminalreporter.section("container images")
            for name, info in sorted(engine.built.items()):
                if name != "_total":
                    terminalreporter.write_line(f"{info['tag']}: built in {info['seconds']} s, {info['size_mb']} MB")
            terminalreporter.write_line(f"scripts/build-images.sh took {engine.built['_total']['seconds']} s "
                                        f"in all ({engine.name}; load average {os.getloadavg()[0]:.1f})")


#: test folders whose files run long (end-to-end runs, servers, subprocesses): collected first, so that on several
#: workers (make test: pytest-xdist, a file per worker) the long files start early and the short unit files fill in
#: around them, instead of one long file running alone at the end
_LONG_FIRST = ("integration", "services", "pipelines")


def pytest_collection_modifyitems(items):
    def rank(item) -> int:
        parts = item.path.parts
        return next((i for i, name in enumerate(_LONG_FIRST) if name in parts), len(_LONG_FIRST))

    items.sort(key=rank)  # stable: the order within a folder is kept
