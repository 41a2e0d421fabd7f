"""`ccda run` end to end for a race and a religion run, through the real CLI: the demo profiles' attribute, lexicon
and corpus, on the tiny profile's models with generation on the OpenAI-compatible test server (seconds instead of
the demo's CPU generation; `make demo`-style timings of demo-race / demo-religion are in docs/attributes.md).

Every stage runs for real: ingest keeps the attribute's sentences, CDA writes one counterfactual per other group,
the boundaries and the review judge the attribute, the tiny target is fine-tuned, evaluated on the attribute's
StereoSet and CrowS-Pairs subsets (the shared data, `race` / `race-color`), gated and registered as
``<target>-debiased-<attribute>``, and the report says which attribute judged the run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from tests.helpers.data import SKIP_REASON, mirrored
from tests.helpers.fake_openai import FakeOpenAIServer
from tests.helpers.tiny_pipeline import fast_overrides

ROOT = Path(__file__).resolve().parents[2]
#: the real StereoSet and CrowS-Pairs, by name through the resolver (the mirror in $CCDA_DATA_DIR or the data cache)
pytestmark = [pytest.mark.services,
              pytest.mark.skipif(mirrored("stereoset") is None, reason=SKIP_REASON.format("stereoset")),
              pytest.mark.skipif(mirrored("crows-pairs") is None, reason=SKIP_REASON.format("crows-pairs"))]

RELIGION_CORPUS = """The Muslim family prayed at the mosque every Friday.
A Christian charity opened a shelter near the station.
The rabbi spoke to the Jewish students about the history of the town.
She poured a glass of white wine for her guest.
Several Muslim doctors worked at the new hospital.
The church choir sang for the Christian community on Sunday.
Jewish and Muslim leaders met to plan the festival.
The weather was cold and the roads were icy.
"""


def ccda(*args: str) -> str:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}  # the datasets as the resolver finds them
    env.pop("MLFLOW_TRACKING_URI", None)
    r = subprocess.run([sys.executable, "-m", "context_cda.cli", *args], cwd=ROOT, capture_output=True, text=True,
                       env=env, timeout=900)
    assert r.returncode == 0, f"ccda {' '.join(args)} failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return r.stdout


def profile(tmp_path: Path, attribute: str, base_url: str) -> Path:
    """The tiny profile with the demo profile's attribute and corpus, the fast overrides, and the shared
    benchmarks' attribute subsets (auto bias type)."""
    base = yaml.safe_load((ROOT / "configs" / "tiny.yaml").read_text())
    demo = yaml.safe_load((ROOT / "configs" / f"demo-{attribute}.yaml").read_text())
    for sec, values in fast_overrides(base_url).items():
        base.setdefault(sec, {}).update(values)
    base["run"].update({"run_dir": str(tmp_path / "run"), "attribute": attribute})
    if attribute == "race":
        base["ingest"].update({"path": str(ROOT / demo["ingest"]["path"]), "sample_n": 12})
    else:
        (tmp_path / "religion.txt").write_text(RELIGION_CORPUS)
        base["ingest"].update({"path": str(tmp_path / "religion.txt"), "sample_n": None})
    base["evaluate"].update({"max_items": 24, "benchmarks": ["stereoset", "crows"]})
    for key in ("stereoset_path", "crows_path"):  # the mirror's full files: they hold every bias type
        base["evaluate"].pop(key, None)
    path = tmp_path / f"{attribute}.yaml"
    path.write_text(yaml.safe_dump(base))
    return path


@pytest.mark.parametrize("attribute,crows", [("race", "race-color"), ("religion", "religion")])
def test_an_attribute_run_end_to_end(attribute, crows, tmp_path):
    with FakeOpenAIServer(model="fake-model") as srv:
        out = ccda("run", "--profile", str(profile(tmp_path, attribute, srv.base_url)))
    run = tmp_path / "run"
    assert "report" in out and "failed" not in out
    cda = pd.read_parquet(run / "cda" / "counterfactuals.parquet")
    n_groups = 4 if attribute == "race" else 3
    assert len(cda) % (n_groups - 1) == 0 and len(cda) > 0  # one counterfactual per other group
    kept = cda[cda["original"].str.contains("white wine")]  # a colour is no group: it stays in every counterfactual
    assert kept["counterfactual"].str.contains("white wine").all()
    for model in ("vanilla", "context-cda/seed-13"):
        ss = pd.read_parquet(run / "evaluate" / "tiny-gpt2" / model / "stereoset" / "predictions.parquet")
        cp = pd.read_parquet(run / "evaluate" / "tiny-gpt2" / model / "crows" / "predictions.parquet")
        assert set(ss["bias_type"]) == {attribute} and set(cp["bias_type"]) == {crows}
    decision = json.loads((run / "register" / "tiny-gpt2" / "context-cda" / "promotion.json").read_text())
    assert decision["model_name"] == f"tiny-gpt2-debiased-{attribute}"
    report = (run / "report" / "report.md").read_text()
    assert f"Attribute debiased: **{attribute}**" in report and f"CrowS-Pairs: `{crows}`" in report
