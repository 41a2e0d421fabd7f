"""Kill `ccda augment` mid-run (SIGKILL), run it again, and compare with an uninterrupted run.

The generator is the openai backend against the fake server (tests/helpers/fake_openai.py), which answers
deterministically, so the two runs' tables must be identical; the server is slowed down a little so the
kill lands mid-run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))

from cda_table import write_cda_table  # noqa: E402
from fake_openai import FakeOpenAIServer  # noqa: E402

N = 24


def _cmd(run_dir: Path, src: Path, url: str) -> list[str]:
    sets = ["augment.shard_size=3", "augment.batch_size=3", "augment.few_shot=false", "augment.max_retries=2",
            "augment.openai.timeout_s=2", "augment.openai.backoff_base_s=0.01", "augment.openai.concurrency=3"]
    cmd = [sys.executable, "-m", "context_cda.cli", "augment", "--run-dir", str(run_dir), "--input", str(src),
           "--backend", "openai", "--model", "fake-model", "--base-url", url, "--no-progress"]
    for s in sets:
        cmd += ["--set", s]
    return cmd


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    env.pop("CCDA_PARAMS", None)
    return env


def test_killed_run_resumes_exactly_once(tmp_path):
    src = write_cda_table(tmp_path / "cda.parquet", N, {4: "[FLAKY]", 9: "[REFUSE]", 20: "[F500]", 21: "[DROP]"})
    with FakeOpenAIServer(delay_s=0.04) as srv:
        ref = subprocess.run(_cmd(tmp_path / "ref", src, srv.base_url), cwd=tmp_path, env=_env(tmp_path),
                             capture_output=True, text=True, timeout=120)
        assert ref.returncode == 0, ref.stderr[-2000:]
        ref_requests = len(srv.log)

        run_dir = tmp_path / "run"
        shards = run_dir / "augment-parts" / "part-0" / "shards"  # the one generation part's checkpoints
        proc = subprocess.Popen(_cmd(run_dir, src, srv.base_url), cwd=tmp_path, env=_env(tmp_path),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while time.time() < deadline and len(list(shards.glob("*/shard-*.parquet"))) < 3:
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        n_shards = len(list(shards.glob("*/shard-*.parquet")))  # shards/<fingerprint>/
        assert 3 <= n_shards < N // 3, "the kill must land mid-run"
        assert not (run_dir / "augment" / "augmented.parquet").exists()

        sent_before = len(srv.log)
        again = subprocess.run(_cmd(run_dir, src, srv.base_url), cwd=tmp_path, env=_env(tmp_path),
                               capture_output=True, text=True, timeout=120)
        assert again.returncode == 0, again.stderr[-2000:]
        resumed_requests = len(srv.log) - sent_before

    for name in ("augmented.parquet", "rejected.parquet"):
        a = pd.read_parquet(tmp_path / "ref" / "augment" / name)
        b = pd.read_parquet(run_dir / "augment" / name)
        pd.testing.assert_frame_equal(a, b)
    aug = pd.read_parquet(run_dir / "augment" / "augmented.parquet")
    rej = pd.read_parquet(run_dir / "augment" / "rejected.parquet")
    assert aug["cda_id"].is_unique and len(aug) + len(rej) == N
    assert set(rej["cda_id"]) == {"cda0009"}
    # finished shards were not redone: the resumed run sent fewer requests than a full run
    assert resumed_requests < ref_requests


@pytest.mark.parametrize("bad", ["http://127.0.0.1:9/v1"])
def test_cli_server_down_is_one_line_exit_2(tmp_path, bad):
    src = write_cda_table(tmp_path / "cda.parquet", 2)
    r = subprocess.run(_cmd(tmp_path / "r", src, bad) + ["--set", "augment.openai.max_attempts=1"], cwd=tmp_path,
                       env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "Cannot reach the OpenAI-compatible server" in r.stderr and "Traceback" not in r.stderr
