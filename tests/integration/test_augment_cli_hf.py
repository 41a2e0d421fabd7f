"""`ccda augment` end to end with the hf backend on tiny:llama (random weights: outputs are gibberish, so the
point is the plumbing: every item ends accepted or rejected with a reason, manifest and cache written)."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))

from cda_table import write_cda_table  # noqa: E402

from context_cda.layout import RunLayout  # noqa: E402


def test_cli_hf_tiny(tmp_path):
    from context_cda.cli import main

    run_dir = tmp_path / "run"
    layout = RunLayout(run_dir).check()
    src = write_cda_table(layout.validated("cda"), 6, unapplied=1)  # augment reads the validated table
    argv = ["augment", "--run-dir", str(run_dir), "--backend", "hf", "--model", "tiny:llama", "--batch-size", "3",
            "--set", "augment.few_shot=false", "--set", "augment.sampling.max_tokens=12",
            "--set", "augment.max_retries=1", "--set", "run.device=cpu", "--set", "augment.min_length_ratio=0.1",
            "--set", "augment.retry_feedback=false"]  # tiny:llama has 512 positions: a retry's note would not fit
    assert main(argv) == 0
    out = run_dir / "augment"
    aug = pd.read_parquet(out / "augmented.parquet")
    rej = pd.read_parquet(out / "rejected.parquet")
    assert len(aug) + len(rej) == 7 and rej["reason"].str.len().gt(0).all()
    part = layout.step_dir("augment-part", shard=0)  # the one generation part: its store and cache
    assert (out / "manifest.json").is_file() and any((part / "cache").rglob("*.json"))
    assert src.is_file()
    # second run: nothing to do, no model needed
    assert main(argv) == 0
    pd.testing.assert_frame_equal(aug, pd.read_parquet(out / "augmented.parquet"))
