"""Masked LMs' last encoder layer computed only at the masked positions: exact, and only where it is checked."""

from __future__ import annotations

import pytest

SENTENCES = [
    "The man was a doctor at the hospital.",
    "She is nice.",
    "A nurse said hello to everyone here today, and he smiled.",
    "He",
]


def _scorer(arch: str, attn: str | None = None):
    from context_cda.models import load_lm
    from context_cda.scoring import scorer_for

    model, tok, _ = load_lm(f"tiny:{arch}", device="cpu")
    if attn is not None:
        model.set_attn_implementation(attn)
    return scorer_for(model, tok, batch_size=8)


class _Spy:
    """Counts the rows the last layer's query projection sees, per call."""

    def __init__(self, module):
        self.rows: list[int] = []
        self.handle = module.register_forward_hook(lambda m, a, out: self.rows.append(a[0].shape[:-1].numel()))


@pytest.mark.parametrize("arch", ["bert", "distilbert", "roberta"])
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_cut_last_layer_equals_the_full_pass(arch, attn):
    from context_cda.scoring.last_layer import find_last_layer

    sc = _scorer(arch, attn)
    assert sc.last_layer_at_positions
    layer, (q_lin, *_), _finish = find_last_layer(sc.model)
    spy = _Spy(q_lin)
    fast = sc.sentence_loglik(SENTENCES)
    spy.handle.remove()
    ref = sc.reference().sentence_loglik(SENTENCES)
    for a, b in zip(fast, ref, strict=True):
        assert a.n_tokens == b.n_tokens and a.sum == pytest.approx(b.sum, abs=1e-5 * a.n_tokens)
    n_masked = sum(x.n_tokens for x in fast)
    # the query projection saw one row per masked copy, never the whole padded batch
    assert sum(spy.rows) == n_masked
    assert "forward" not in layer.__dict__  # the class's forward is back
    assert sc._fused_head() is True  # and the head computed from the cut layer's output agreed


def test_several_positions_of_one_sequence_and_equal_lengths():
    """Requests that share a sequence (one forward row, several positions read) and batches without padding
    (the encoder passes no mask) give the reference values."""
    sc = _scorer("bert")
    ids = sc.encode(["The doctor said that the nurse was tired.", "The nurse said that the doctor was tired."], True)
    assert len(ids[0]) == len(ids[1])
    m = [list(s) for s in ids]
    m[0][2] = m[1][3] = sc.mask_id
    seqs = [m[0], m[0], m[0], m[1]]
    positions = [2, 2, 5, 3]
    targets = [ids[0][2], 7, ids[0][5], ids[1][3]]
    fast = sc.logprobs_at(seqs, positions, targets)
    ref = sc.reference().logprobs_at(seqs, positions, targets)
    assert fast == pytest.approx(ref, abs=1e-5)


def test_a_wrong_layout_fails_the_probe_and_runs_in_full(monkeypatch):
    """If the layout's idea of the layer is wrong (here: it forgets the feed-forward block), the probe sees the
    logits differ and the scorer keeps the full pass, with the same values as the reference."""
    from context_cda.scoring import last_layer

    def no_ffn(layer):
        got = last_layer._bert_layout(layer)
        if got is None:
            return None
        return got[0], lambda layer, ctx, x: layer.attention.output(ctx, x)

    monkeypatch.setattr(last_layer, "LAYOUTS", (no_ffn,))
    sc = _scorer("bert")
    assert last_layer.find_last_layer(sc.model) is not None
    assert not sc.last_layer_at_positions
    for a, b in zip(sc.sentence_loglik(SENTENCES), sc.reference().sentence_loglik(SENTENCES), strict=True):
        assert a.sum == pytest.approx(b.sum, abs=1e-5 * a.n_tokens)


@pytest.mark.parametrize("arch", ["gpt2", "llama", "t5"])
def test_only_bidirectional_encoders_are_cut(arch):
    from context_cda.models import load_lm
    from context_cda.scoring.last_layer import find_last_layer

    model, _tok, _ = load_lm(f"tiny:{arch}", device="cpu")
    assert find_last_layer(model) is None


def test_an_instance_level_forward_is_restored():
    """Hooks that replace a module's forward on the instance (accelerate's device maps) survive the cut."""
    import torch

    from context_cda.scoring.last_layer import LastLayerAtPositions, find_last_layer

    sc = _scorer("bert")
    layer = find_last_layer(sc.model)[0]
    calls = []
    cls_forward = layer.forward

    def wrapped(*a, **kw):
        calls.append(1)
        return cls_forward(*a, **kw)

    layer.forward = wrapped
    ids, att = sc._pad(sc.encode(SENTENCES[:2], True))
    rows, cols = torch.tensor([0, 1]), torch.tensor([1, 2])
    with torch.inference_mode(), LastLayerAtPositions(sc.model, rows, cols, *ids.shape) as cut:
        out = sc.model(input_ids=ids, attention_mask=att).logits
    assert cut.applied and out.shape[:2] == (1, 2) and not calls
    assert layer.__dict__["forward"] is wrapped
    with torch.inference_mode(), LastLayerAtPositions(sc.model, rows, cols, 3, ids.shape[1]) as cut:
        sc.model(input_ids=ids, attention_mask=att)  # another batch shape than announced: run in full
    assert not cut.applied and calls == [1]
