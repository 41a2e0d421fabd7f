"""A throwaway git + DVC repository with the project's code, the tiny params and dvc.yaml generated for them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import tiny_pipeline as tp
import yaml

ROOT = tp.ROOT
BIN = Path(sys.executable).parent
DVC = str(BIN / "dvc") if (BIN / "dvc").exists() else (shutil.which("dvc") or "dvc")
RUN_DIR = "runs/tiny"
BUCKET = "ccda-dvc-test"


class Project:
    """A throwaway git + DVC repository with the project's dvc.yaml and the tiny params."""

    def __init__(self, root: Path, base_url: str, params: dict | None = None):
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
        self.set_params(params or self.tiny_params(base_url))
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
