"""`ccda run --profile tiny` inside the CPU image, the run folder on a mounted volume, against the same run in the
venv: the same tables with the same row counts and ids, the same metrics within float noise.

Both runs get the same flags (the tiny profile made fast as in tests/helpers/tiny_pipeline.py: generation from the
OpenAI-compatible test server on 127.0.0.1, which the container reaches through host networking), the same
environment and fresh model caches. The image's user (uid 10001) writes the run folder through the mount.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

HELPERS = Path(__file__).resolve().parents[1] / "helpers"
sys.path.insert(0, str(HELPERS))

from container_images import IMAGE_UID, ROOT, RUN_ENV, set_flags, writable_by_image_user  # noqa: E402
from fake_openai import FakeOpenAIServer  # noqa: E402
from tiny_pipeline import FIXTURES, fast_overrides  # noqa: E402

pytestmark = [pytest.mark.images, pytest.mark.services, pytest.mark.timeout(3600)]


def _flags(base_url: str, folder: Path) -> list[str]:
    overrides = fast_overrides(base_url)
    overrides["run"] = {"run_dir": str(folder / "run")}
    overrides["ingest"] = {"path": str(FIXTURES / "corpus" / "tiny_corpus.txt")}
    return set_flags(overrides)


@pytest.fixture(scope="module")
def two_runs(container_engine, project_images, tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("run-in-image")
    venv_dir, image_dir = base / "venv", writable_by_image_user(base / "image")
    venv_dir.mkdir()
    with FakeOpenAIServer(model="fake-model") as srv:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
        env.update(RUN_ENV, CCDA_PARAMS=str(ROOT / "params.yaml"), CCDA_MODEL_CACHE=str(venv_dir / "models"),
                   HF_HOME=str(venv_dir / "hf"))
        venv = subprocess.Popen([str(Path(sys.executable).parent / "ccda"), "run", "--profile", "tiny",
                                 *_flags(srv.base_url, venv_dir)], cwd=venv_dir, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        image = container_engine.container(
            project_images["cpu"], "ccda", "run", "--profile", "tiny", *_flags(srv.base_url, image_dir),
            env=RUN_ENV, volumes=[(image_dir, image_dir, "rw"), (FIXTURES, FIXTURES, "ro")], check=False,
            timeout=2400)
        out, _ = venv.communicate(timeout=2400)
    assert venv.returncode == 0, f"ccda run in the venv failed:\n{out[-4000:]}"
    assert image.returncode == 0, f"ccda run in the image failed:\n{image.stdout[-4000:]}\n{image.stderr[-4000:]}"
    return venv_dir / "run", image_dir / "run"


#: resumable shards are named by when and by which process they were written; their contents must still agree
SHARD_NAME = re.compile(r"shard-\d+-\d+-(\d+)\.parquet$")
#: throughput and timing fields of the summaries: measurements of the machine, not results
TIMING = re.compile(r"(per_s|seconds|_s$|elapsed|duration|time)")


def _tables(run: Path) -> dict[str, pd.DataFrame]:
    return {SHARD_NAME.sub(r"shard-\1.parquet", str(p.relative_to(run))): pd.read_parquet(p)
            for p in sorted(run.rglob("*.parquet"))}


def test_the_container_wrote_the_run_folder_on_the_mount(two_runs):
    _, image_run = two_runs
    assert (image_run / "layout.json").is_file()
    owners = {p.stat().st_uid for p in image_run.rglob("*") if p.is_file()}
    assert owners == {IMAGE_UID}, owners
    assert (image_run / "report" / "report.md").is_file()


def test_same_tables_row_counts_and_ids(two_runs):
    venv_run, image_run = two_runs
    venv_tables, image_tables = _tables(venv_run), _tables(image_run)
    assert set(venv_tables) == set(image_tables)
    assert {"ingest/sentences.parquet", "augment/augmented.parquet"} <= set(venv_tables)
    for name, a in venv_tables.items():
        b = image_tables[name]
        assert len(a) == len(b), (name, len(a), len(b))
        assert list(a.columns) == list(b.columns), name
        if "id" in a.columns:
            assert list(a["id"]) == list(b["id"]), name
    train = [n for n in venv_tables if n.endswith("train_rows.parquet")]
    assert len(train) == 2  # both arms trained
    print("run in the image: " + ", ".join(f"{n}: {len(venv_tables[n])} rows" for n in train))


def _numbers(value, key=""):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _numbers(v, f"{key}.{k}" if key else k)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield key, float(value)


def test_same_metrics_within_float_noise(two_runs):
    venv_run, image_run = two_runs
    csvs = sorted(p.relative_to(venv_run) for p in venv_run.rglob("metrics.csv"))
    assert csvs
    for rel in csvs:
        a, b = pd.read_csv(venv_run / rel), pd.read_csv(image_run / rel)
        assert list(a.columns) == list(b.columns) and len(a) == len(b), rel
        num = a.select_dtypes("number").columns
        pd.testing.assert_frame_equal(a[num], b[num], check_exact=False, rtol=1e-4, atol=1e-6)
    aggregates = sorted(p.relative_to(venv_run) for p in venv_run.rglob("aggregate.json"))
    for rel in aggregates:
        a = dict(_numbers(json.loads((venv_run / rel).read_text())))
        b = dict(_numbers(json.loads((image_run / rel).read_text())))
        assert a.keys() == b.keys(), rel
        for k in (k for k in a if not TIMING.search(k)):
            assert b[k] == pytest.approx(a[k], rel=1e-4, abs=1e-6), (rel, k)
