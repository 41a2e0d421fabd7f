"""The default local tracking store (SQLite) opened by parallel stages: the first open is done one process at a
time, so two first-time openers do not both run MLflow's schema migrations ("duplicate column name: step")."""

from __future__ import annotations

import fcntl
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mlflow")

OPEN = """
import sys
from context_cda.config import Config
from context_cda.tracking import get_client
cfg = Config.model_validate({"run": {"run_dir": sys.argv[1], "targets": {"t": "tiny:gpt2"}},
                             "tracking": {"experiment": "ccda-store-test"}})
client = get_client(cfg)
print(len(client.search_experiments()))
"""


def _open(run_dir: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", OPEN, str(run_dir)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_parallel_first_opens_of_a_new_store_all_succeed(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    procs = [_open(tmp_path / "runs" / f"r{i}") for i in range(3)]
    results = [(p.wait(timeout=300), p.stdout.read(), p.stderr.read()) for p in procs]
    assert all(rc == 0 for rc, _, _ in results), [err[-2000:] for _, _, err in results]
    assert (tmp_path / "runs" / "mlflow.db").is_file()


def test_the_first_open_waits_for_the_store_lock(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    (tmp_path / "runs").mkdir()
    with open(tmp_path / "runs" / "mlflow.db.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        proc = _open(tmp_path / "runs" / "r")
        time.sleep(6)  # mlflow imports in a few seconds; the store must not be created while we hold the lock
        assert proc.poll() is None and not (tmp_path / "runs" / "mlflow.db").exists()
        fcntl.flock(lock, fcntl.LOCK_UN)
    assert proc.wait(timeout=300) == 0, proc.stderr.read()[-2000:]
    assert (tmp_path / "runs" / "mlflow.db").is_file()
