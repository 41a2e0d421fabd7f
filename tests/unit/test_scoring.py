"""Scorer backends: family dispatch, conditional log-likelihoods (hand-computed and against a direct
computation), batched == one-at-a-time."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from tests.helpers import fake_lm

from context_cda.scoring import LogLik
from context_cda.scoring.base import length_sorted_batches

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "evaluate"




def test_loglik_and_batches():
    ll = LogLik.from_logprobs([-1.0, -2.0, -3.0])
    assert (ll.sum, ll.mean, ll.n_tokens) == (-6.0, -2.0, 3)
    assert LogLik.from_logprobs([]) == LogLik(0.0, 0.0, 0)
    assert list(length_sorted_batches([3, 9, 5, 9], 2)) == [[1, 3], [2, 0]]
    assert list(length_sorted_batches([3, 9], 1)) == [[0], [1]]


def test_import_is_light():
    import subprocess
    import sys

    code = "import sys, context_cda.scoring, context_cda.evaluate, context_cda.cli; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"


def test_causal_conditional_loglik_hand_computed():
    fake = fake_lm
    from context_cda.scoring import scorer_for
    from context_cda.scoring.causal import CausalScorer

    model, tok = fake.make(masked=False)
    sc = scorer_for(model, tok, batch_size=3)
    assert isinstance(sc, CausalScorer)
    lp = fake.lp
    res = sc.conditional_loglik(["the nurse", "", "he"], ["was caring", "she was rude .", " is"])
    assert res[0].sum == pytest.approx(lp("was") + lp("caring"), abs=1e-6) and res[0].n_tokens == 2
    want = lp("she") + lp("was") + lp("rude") + lp(".")  # empty prefix: conditioned on the start token
    assert res[1].sum == pytest.approx(want, abs=1e-6) and res[1].mean == pytest.approx(want / 4, abs=1e-6)
    assert res[2].n_tokens == 1
    assert sc.sentence_loglik(["she was rude ."])[0].sum == pytest.approx(want, abs=1e-6)


def test_masked_conditional_loglik_hand_computed():
    fake = fake_lm
    from context_cda.scoring import scorer_for
    from context_cda.scoring.masked import MaskedScorer

    model, tok = fake.make(masked=True)
    sc = scorer_for(model, tok, batch_size=8)
    assert isinstance(sc, MaskedScorer)
    lp = fake.lp
    res = sc.conditional_loglik(["the nurse", ""], ["was caring", "she was caring ."])
    # prefix is the first segment and is never masked; continuation tokens masked one at a time
    assert res[0].n_tokens == 2 and res[0].sum == pytest.approx(lp("was") + lp("caring"), abs=1e-6)
    # "she" masked -> default p(she); the other positions still see "she" -> p(was)=0.3
    assert res[1].sum == pytest.approx(lp("she") + math.log(0.3) + lp("caring") + lp("."), abs=1e-6)


def test_causal_matches_a_direct_single_pass():
    import torch

    from context_cda.models import load_lm
    from context_cda.scoring import scorer_for

    model, tok, fam = load_lm("tiny:gpt2", device="cpu")
    sc = scorer_for(model, tok, batch_size=4)
    prefix, cont = "The man said", " that she was tired."
    got = sc.conditional_loglik([prefix], [cont])[0]
    p = tok(prefix, add_special_tokens=False)["input_ids"]
    c = tok(cont, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([p + c])
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0].double(), -1)
    want = sum(float(logp[len(p) + i - 1, t]) for i, t in enumerate(c))
    assert got.n_tokens == len(c) and got.sum == pytest.approx(want, abs=1e-4)


@pytest.mark.parametrize("arch", ["bert", "distilbert", "roberta", "gpt2", "llama", "t5"])
def test_conditional_loglik_batched_equals_one_at_a_time(arch):
    from context_cda.scoring import load_scorer

    sc = load_scorer(f"tiny:{arch}", device="cpu", batch_size=8)
    assert sc.family == {"gpt2": "causal", "llama": "causal", "t5": "seq2seq"}.get(arch, "masked")
    prefixes = ["", "The man said", "She wrote to the doctor because", "Her", "The king went to the city and"]
    conts = ["The woman was tired.", " that he was there.", " she was tired.", " house", " the queen helped him."]
    fast = sc.conditional_loglik(prefixes, conts)
    ref = sc.reference().conditional_loglik(prefixes, conts)
    for a, b in zip(fast, ref, strict=True):
        assert a.n_tokens == b.n_tokens > 0
        assert a.mean == pytest.approx(b.mean, abs=1e-5)
        assert a.sum == pytest.approx(b.sum, abs=1e-5 * a.n_tokens)
