"""The tiny profile made fast enough for whole-pipeline smoke runs (kfp.local, dvc repro) in tests.

On top of ``configs/tiny.yaml`` (tiny random target models, the fixture corpus): generation goes to the fake
OpenAI-compatible server (tests/helpers/fake_openai.py) on 127.0.0.1, entropy samples 3 rephrasings judged by a
tiny NLI model, training takes two optimizer steps per arm, and the benchmarks read the tiny fixtures.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"

def fast_overrides(base_url: str, fixtures: Path = FIXTURES) -> dict[str, dict[str, Any]]:
    return {
        "augment": {
            "backend": "openai",
            "model": "fake-model",
            "openai": {"base_url": base_url, "max_attempts": 2, "timeout_s": 10.0},
        },
        "entropy": {"n_samples": 3, "max_tokens": 16, "judge": "nli", "judge_model": "tiny:nli", "limit": 12},
        "train": {"epochs": 1, "max_steps": 2, "batch_size": 4, "max_seq_len": 32},
        "evaluate": {
            "stereoset_path": str(fixtures / "evaluate" / "stereoset_tiny.json"),
            "crows_path": str(fixtures / "evaluate" / "crows_tiny.csv"),
            "winogender": {"path": str(fixtures / "evaluate" / "winogender_tiny")},
            "winobias": {"path": str(fixtures / "evaluate" / "winobias_tiny")},
            "max_items": 8,
        },
    }


def tiny_config(base_url: str, run_dir: Path | str | None = None, fixtures: Path = FIXTURES, absolute: bool = True):
    """The resolved tiny config with the fast overrides (ingest.path made absolute unless ``absolute=False``)."""
    from context_cda.config import load_config

    overrides = fast_overrides(base_url, fixtures)
    if run_dir is not None:
        overrides["run"] = {"run_dir": str(run_dir)}
    cfg = load_config("tiny", overrides, params_file=ROOT / "params.yaml")
    if absolute and cfg.ingest.path and not Path(cfg.ingest.path).is_absolute():
        cfg.ingest.path = str(ROOT / cfg.ingest.path)
    return cfg


def ccda_bin() -> Path:
    import sys

    exe = Path(sys.executable).parent / "ccda"
    return exe if exe.exists() else Path(shutil.which("ccda") or "ccda")
