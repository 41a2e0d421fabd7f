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
    # max_pad: a batch also ends before a row that would be padded by more than that fraction
    assert list(length_sorted_batches([10, 9, 8, 10, 5], 8, max_pad=0.1)) == [[0, 3, 1], [2], [4]]


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


# ------------------------------------------------------------------------------------------------ batched engine


def test_gather_logprobs_chunks_and_repeated_rows():
    import torch

    from context_cda.scoring.base import gather_logprobs

    torch.manual_seed(0)
    logits = torch.randn(70, 50) * 30  # large logits: exp underflows, as in real vocabularies
    rows = torch.tensor([0, 0, 5, 31, 32, 32, 69])
    targets = torch.tensor([1, 2, 3, 4, 5, 6, 7])
    want = torch.log_softmax(logits.double(), -1)[rows, targets].float()
    for chunk in (1, 8, 32, 100):
        assert torch.allclose(gather_logprobs(logits, targets, rows=rows, chunk=chunk), want, atol=1e-5)
    perm = torch.tensor([6, 2, 0, 4, 1, 5, 3])  # rows in any order
    assert torch.allclose(gather_logprobs(logits, targets[perm], rows=rows[perm]), want[perm], atol=1e-5)
    # without rows: (..., V) logits and targets of the leading shape
    t2 = torch.randint(0, 50, (7, 10))
    got = gather_logprobs(logits[:70].reshape(7, 10, 50), t2)
    assert got.shape == (7, 10)
    assert torch.allclose(got, torch.log_softmax(logits.reshape(7, 10, 50), -1).gather(-1, t2[..., None])[..., 0])


@pytest.mark.parametrize("bias", [False, True])
def test_linear_logprobs_equals_the_log_softmax_of_the_projection(bias):
    import torch

    from context_cda.scoring.base import linear_logprobs

    torch.manual_seed(0)
    h = torch.randn(9, 16)
    w = torch.randn(1000, 16) * 3  # logits of +-50: the running maximum matters
    b = torch.randn(1000) if bias else None
    rows = torch.tensor([0, 0, 3, 8, 5])
    targets = torch.tensor([1, 999, 500, 0, 1])
    full = torch.nn.functional.linear(h.double(), w.double(), None if b is None else b.double())
    want = torch.log_softmax(full, -1)[rows, targets]
    for chunk in (1, 7, 1000, 4096):
        got = linear_logprobs(h, w, b, targets, rows, chunk=chunk)
        assert got.dtype == torch.float32 and torch.allclose(got.double(), want, atol=2e-5)


def test_fused_head_is_used_once_the_first_pass_agrees():
    """Through the model's own forward (hooks; here a causal model taken off the base-stack path): the first
    batched pass checks the fused head against the output layer; later passes skip the output layer (it sees no
    positions at all) and give the same values as the reference."""
    from context_cda.scoring import load_scorer

    sc = load_scorer("tiny:gpt2", device="cpu", batch_size=8)
    sc.__dict__["decomposable"] = False
    assert sc._fused_head() is None
    seqs = sc.encode(_TREE_TEXTS, add_special_tokens=False)
    first = sc.token_logprobs(seqs)
    assert sc._fused_head() is True
    seen: list[int] = []
    hook = sc.model.get_output_embeddings().register_forward_hook(lambda m, a, o: seen.append(a[0].shape[1]))
    second = sc.token_logprobs(seqs)
    hook.remove()
    assert seen and set(seen) == {0}
    for a, b, c in zip(first, second, sc.reference().token_logprobs(seqs), strict=True):
        assert a == pytest.approx(c, abs=1e-5) and b == pytest.approx(c, abs=1e-5)


def test_logits_changed_after_the_output_layer_keep_the_full_head():
    """A model that rescales its logits after the output layer (as logit-scale or soft-capping models do)
    fails the first-pass check and keeps computing through the model."""
    from context_cda.models import load_lm
    from context_cda.scoring import scorer_for

    model, tok, _ = load_lm("tiny:gpt2", device="cpu")
    forward = model.forward

    def scaled(*a, **kw):
        out = forward(*a, **kw)
        out.logits = out.logits * 2.0
        return out

    model.forward = scaled
    sc = scorer_for(model, tok, batch_size=8)
    seqs = sc.encode(_TREE_TEXTS, add_special_tokens=False)
    fast = sc.token_logprobs(seqs)
    assert sc.decomposable is False and sc._fused_head() is False
    for a, b in zip(fast, sc.reference().token_logprobs(seqs), strict=True):
        assert a == pytest.approx(b, abs=1e-5)


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_passes_from_the_base_stack_side_by_side_equal_the_reference(arch, monkeypatch):
    """A model whose logits are its output layer on the base stack's hidden states: batched passes run the base
    stack and project only the positions read (the output layer never sees a whole pass), two passes at a time in
    threads of one torch thread each (the thread count restored), with the reference's values."""
    import torch

    from context_cda.scoring import causal, load_scorer

    monkeypatch.setattr(causal, "PACK_WIDTH", 8)
    monkeypatch.setattr(causal, "PACK_TOKENS_PER_SEQ", 2)  # several passes
    sc = load_scorer(f"tiny:{arch}", device="cpu", batch_size=8)
    assert sc.decomposable and sc.packable  # (the probes run whole passes)
    seqs = sc.encode(_TREE_TEXTS, add_special_tokens=False)
    ref = sc.reference().token_logprobs(seqs)
    seen: list[int] = []
    hook = sc.model.get_output_embeddings().register_forward_hook(lambda m, a, o: seen.append(a[0].dim()))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert sc._workers() == 2
        got = sc.token_logprobs(seqs)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
        hook.remove()
    assert all(d == 2 for d in seen)  # never a whole pass: (N, hidden) at most (a CPU reads the weights itself)
    for a, b in zip(got, ref, strict=True):
        assert a == pytest.approx(b, abs=1e-5)


def test_head_at_flat_positions_equals_full_logits():
    import torch

    from context_cda.models import load_lm
    from context_cda.scoring.base import _HeadAtPositions

    model, tok, _ = load_lm("tiny:gpt2", device="cpu")
    ids = torch.tensor([tok("The man said that she was", add_special_tokens=False)["input_ids"]] * 2)
    rows, cols = torch.tensor([0, 1, 1]), torch.tensor([3, 0, 5])
    with torch.inference_mode():
        full = model(input_ids=ids).logits
        with _HeadAtPositions(model, width=ids.shape[1], rows=rows, cols=cols, batch=2) as head:
            flat = model(input_ids=ids).logits
    assert head.applied and flat.shape == (1, 3, full.shape[-1])
    assert torch.allclose(flat[0], full[rows, cols], atol=1e-5)


_TREE_TEXTS = [
    "The man said that she was tired.",
    "The man said that he was tired.",
    "The man said that he was tired.",  # a duplicate
    "The man said",  # a prefix of the others
    "The woman went home early.",
    "Hi",
    "A",  # one token: nothing to score
    "She wrote to the doctor because she was ill and the doctor wrote back at once to her.",
]


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
@pytest.mark.parametrize("width", [8, 128])
def test_packed_prefix_tree_equals_padded_and_reference(arch, width, monkeypatch):
    """The packed prefix-tree path (rows split at ``width`` tokens, repeating ancestors) gives the padded path's
    and the one-at-a-time reference's log-probabilities."""
    from context_cda.scoring import causal, load_scorer

    monkeypatch.setattr(causal, "PACK_WIDTH", width)
    monkeypatch.setattr(causal, "PACK_TOKENS_PER_SEQ", 2)  # several forward passes
    sc = load_scorer(f"tiny:{arch}", device="cpu", batch_size=8)
    assert sc.packable
    seqs = sc.encode(_TREE_TEXTS, add_special_tokens=False)
    packed = sc.token_logprobs(seqs)
    ref = sc.reference().token_logprobs(seqs)
    padded = sc.with_batch_size(8)
    padded.__dict__["packable"] = False
    plain = padded.token_logprobs(seqs)
    assert [len(x) for x in packed] == [max(len(s) - 1, 0) for s in seqs] == [len(x) for x in ref]
    for a, b, c in zip(packed, ref, plain, strict=True):
        assert a == pytest.approx(b, abs=1e-5) and c == pytest.approx(b, abs=1e-5)
    assert packed[1] == packed[2] and packed[3] == packed[0][: len(packed[3])]


def test_model_ignoring_the_tree_mask_is_not_packed():
    """A model that drops position ids / 4-D masks fails the probe and gets the padded path (same values)."""
    from context_cda.models import load_lm
    from context_cda.scoring import scorer_for

    model, tok, _ = load_lm("tiny:gpt2", device="cpu")
    forward = model.forward

    def no_tree(input_ids=None, attention_mask=None, position_ids=None, **kw):
        if attention_mask is not None and attention_mask.dim() == 4:
            attention_mask = None
        return forward(input_ids=input_ids, attention_mask=attention_mask, **kw)

    model.forward = no_tree
    sc = scorer_for(model, tok, batch_size=8)
    assert not sc.packable
    seqs = sc.encode(_TREE_TEXTS, add_special_tokens=False)
    for a, b in zip(sc.token_logprobs(seqs), sc.reference().token_logprobs(seqs), strict=True):
        assert a == pytest.approx(b, abs=1e-5)


def test_sliding_window_shorter_than_the_text_is_not_packed():
    from context_cda.scoring import load_scorer

    sc = load_scorer("tiny:llama", device="cpu", batch_size=8)
    assert sc._can_pack(64)
    before = getattr(sc.model.config, "sliding_window", None)
    sc.model.config.sliding_window = 4
    try:
        assert not sc._can_pack(5) and sc._can_pack(4)
    finally:
        sc.model.config.sliding_window = before


# ------------------------------------------------------------------------------------------------ start token


def test_start_token_rules_per_tokenizer():
    """auto: bias-bench's literal <|endoftext|> where it is one token (GPT-2), else BOS (Llama-style), else EOS;
    lm-eval's auto: the tokenizer's own leading tokens, else BOS; bos / eos / a literal on request."""
    from context_cda.errors import ConfigError
    from context_cda.scoring import load_scorer

    gpt2 = load_scorer("tiny:gpt2", device="cpu")
    st = gpt2.start_token("auto", "bias-bench")
    assert (st.text, st.id) == ("<|endoftext|>", gpt2.tokenizer.convert_tokens_to_ids("<|endoftext|>"))
    llama = load_scorer("tiny:llama", device="cpu")
    st = llama.start_token("auto", "bias-bench")
    assert st.text == "<s>" and st.id == llama.tokenizer.bos_token_id and "bos" in st.rule
    lm = llama.start_token("auto", "lm-eval")
    assert lm.id is None and lm.text == "<s>"  # the tokenizer adds <s> itself: the default context
    assert llama.start_token("eos", "bias-bench").text == "<|im_end|>"
    assert llama.start_token("<|im_start|>", "lm-eval").id == llama.tokenizer.convert_tokens_to_ids("<|im_start|>")
    with pytest.raises(ConfigError, match="not one"):
        llama.start_token("two words", "bias-bench")
    model, tok = fake_lm.make(masked=False)  # WordLevel: <|endoftext|> would be [UNK], not a token of its own
    from context_cda.scoring import scorer_for

    assert scorer_for(model, tok).start_token("auto", "bias-bench").text == "<eos>"


def test_start_token_changes_the_first_token_only():
    """The two-pass scores under two start tokens differ only in the first token's log-probability, which is
    the start pass's; lm-eval's empty context with an explicit start token equals a prefix of that token."""
    from context_cda.scoring import load_scorer

    sc = load_scorer("tiny:llama", device="cpu", batch_size=4)
    seq = sc.encode(["The nurse said that she was tired."], add_special_tokens=False)[0]
    bos, other = sc.tokenizer.bos_token_id, sc.tokenizer.convert_tokens_to_ids("<|im_start|>")
    a, b = sc.two_pass_logprobs([seq], bos)[0], sc.two_pass_logprobs([seq], other)[0]
    assert a[1:] == pytest.approx(b[1:], abs=1e-6) and abs(a[0] - b[0]) > 1e-6
    assert a[0] == pytest.approx(sc.first_token_logprobs([seq[0]], bos)[0], abs=1e-6)
    ll = sc.sentence_loglik(["The nurse said that she was tired."], start_id=other)[0]
    ref = sc.reference().token_logprobs([[other, *seq]])[0]
    assert ll.sum == pytest.approx(sum(ref), abs=1e-4) and ll.n_tokens == len(seq)
