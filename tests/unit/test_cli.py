import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def ccda(*args, cwd=ROOT, check=True):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    r = subprocess.run([sys.executable, "-m", "context_cda.cli", *args], cwd=cwd, capture_output=True, text=True,
                       env=env, timeout=300)
    if check and r.returncode != 0:
        raise AssertionError(f"ccda {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


def test_help_is_fast_and_imports_no_torch():
    code = ("import sys, time; t = time.perf_counter(); from context_cda.cli import main; "
            "rc = main(['--help']); print('ELAPSED', time.perf_counter() - t); "
            "print('HEAVY', sorted(m for m in ('torch', 'transformers', 'kfp', 'great_expectations', 'mlflow') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    # fast means no heavy import (not a wall-clock bound, which a loaded machine breaks): ~0.4 s idle
    assert "HEAVY []" in r.stdout, r.stdout + r.stderr
    for cmd in ("ingest", "cda", "validate", "config"):
        assert cmd in r.stdout


def test_config_show_profile():
    r = ccda("config", "show", "--profile", "demo", "--section", "ingest")
    assert "sample_n: 200" in r.stdout


def test_user_errors_are_one_line_not_tracebacks(tmp_path):
    r = ccda("ingest", "--path", str(tmp_path / "missing.txt"), "--run-dir", str(tmp_path), check=False)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and "no such file" in r.stderr
    r = ccda("config", "show", "--set", "ingest.min_words=abc", check=False)
    assert r.returncode == 2 and "ingest.min_words" in r.stderr


def test_ingest_cda_validate_on_wikitext(tmp_path, wikitext):
    run = tmp_path / "run"
    r = ccda("ingest", "--path", str(wikitext), "--run-dir", str(run), "--sample-n", "300")
    assert "rows_out" in r.stdout and "no-gender-term" in r.stdout
    r = ccda("cda", "--run-dir", str(run))
    assert "top_swapped_terms.he->she" in r.stdout
    r = ccda("validate", "--stage", "cda", "--run-dir", str(run))
    assert "rows_quarantined" in r.stdout
    for f in ("ingest/sentences.parquet", "cda/counterfactuals.parquet", "validate/cda/results.json"):
        assert (run / f).is_file()


@pytest.mark.parametrize("args", [["cda", "--mode", "sideways"], ["validate", "--stage", "nope"]])
def test_bad_flags(tmp_path, args):
    r = ccda(*args, "--run-dir", str(tmp_path), check=False)
    assert r.returncode != 0 and "Traceback" not in r.stderr
