"""The work exact scoring does: the shared-prefix plan's counts (hand-computed), the passes' FLOPs against torch's
own count, rows packed with little padding, and seq2seq targets sharing their encoder pass and decoder prefixes
(batched == one at a time on every item)."""

from __future__ import annotations

import pytest

TEXTS = [
    "The man said that she was tired.",
    "The man said that he was tired.",
    "The man said that he was tired.",  # a duplicate
    "The woman went home early.",
    "She wrote to the doctor because she was ill and the doctor wrote back at once.",
    "A",
]


def test_plan_of_a_prefix_tree_hand_computed():
    """Nodes once each, every node attending to its depth, the output layer where a node is read."""
    from context_cda.scoring.flops import Costs, Ledger
    from context_cda.scoring.packed import build_tree

    seqs = [[1, 2, 3, 4], [1, 2, 5], [1, 2, 3, 4], [7]]
    reads = [[(d, s[d], 0) for d in range(1, len(s))] for s in seqs]  # the distribution after s[:d], at s[d]
    tree = build_tree(seqs, reads)
    ledger = Ledger()
    ledger.add_tree(tree)
    # nodes (1), (1, 2), (1, 2, 3): [1, 2, 5] and the duplicate share them, a last token is never read from and
    # [7] has nothing to read; depths 1 + 2 + 3, each node read
    assert len(tree.tok) == 3
    assert (ledger.needed.base_tokens, ledger.needed.attention_pairs, ledger.needed.head_rows) == (3, 6, 3)
    ledger.add_pass(rows=2, width=4, read=3)
    assert (ledger.done.base_tokens, ledger.done.attention_pairs, ledger.done.head_rows) == (8, 32, 3)
    summary = ledger.summary(Costs(base=10.0, attention=1.0, head=100.0))
    assert summary["needed"]["flops"] == {"base": 30.0, "attention": 6.0, "head": 300.0, "total": 336.0}
    assert summary["done_over_needed"] == pytest.approx((80 + 32 + 300) / 336)


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_ledger_counts_the_matrix_products_run(arch, monkeypatch):
    """The ledger's done base + head FLOPs equal a count of the matrix products the run makes (every linear call,
    GPT-2's Conv1D layers included; torch's FlopCounterMode gives the same but imports the compiler: seconds),
    done >= needed, and shared prefixes need fewer positions than the sentences have tokens."""
    import torch
    from transformers.pytorch_utils import Conv1D

    from context_cda.scoring import causal, load_scorer
    from context_cda.scoring.flops import Costs

    monkeypatch.setattr(causal, "PACK_WIDTH", 16)
    monkeypatch.setattr(causal, "PACK_TOKENS_PER_SEQ", 4)  # several passes
    sc = load_scorer(f"tiny:{arch}", device="cpu", batch_size=8)
    seqs = sc.encode(TEXTS, add_special_tokens=False)
    sc.two_pass_logprobs(seqs)  # probes and the start pass out of the way
    del sc.ledger
    counted = [0]
    linear = torch.nn.functional.linear

    def counting(x, w, b=None):
        counted[0] += 2 * x.numel() // x.shape[-1] * w.shape[0] * w.shape[1]
        return linear(x, w, b)

    monkeypatch.setattr(torch.nn.functional, "linear", counting)
    hooks = [m.register_forward_pre_hook(lambda m, a: counted.__setitem__(0, counted[0] + 2 * a[0].numel() *
                                                                          m.weight.shape[1]))
             for m in sc.model.modules() if isinstance(m, Conv1D)]
    try:
        sc.two_pass_logprobs(seqs)
    finally:
        for h in hooks:
            h.remove()
    summary = sc.ledger.summary(Costs.of(sc.model))
    done, need = summary["done"], summary["needed"]
    assert done["flops"]["base"] + done["flops"]["head"] == counted[0] > 0
    assert done["base_tokens"] >= need["base_tokens"] and done["attention_pairs"] >= need["attention_pairs"]
    assert need["base_tokens"] < sum(len(s) - 1 for s in seqs)  # shared prefixes and the duplicate once
    assert need["head_rows"] == done["head_rows"] == need["base_tokens"]  # every node read, projected once
    ref = sc.reference()
    ref.two_pass_logprobs(seqs)
    assert ref.ledger.done.base_tokens == sum(len(s) for s in seqs if len(s) > 1)  # a whole pass per sentence


def test_rows_come_longest_first_and_passes_stay_in_budget(monkeypatch):
    from context_cda.scoring import causal, load_scorer
    from context_cda.scoring.packed import build_tree, pack

    sc = load_scorer("tiny:llama", device="cpu", batch_size=4)
    seqs = sc.encode(TEXTS * 3 + ["Hi there", "A dog barked at the cat."], add_special_tokens=False)
    reads = [[(p + 1, s[p + 1], 0) for p in range(len(s) - 1)] for s in seqs]
    tree = build_tree(seqs, reads)
    packed = pack(tree, seqs, 24)
    lengths = [len(r) for r in packed.rows]
    assert lengths == sorted(lengths, reverse=True) and sum(packed.done) == sum(1 for s in seqs if len(s) > 1)
    passes = list(sc._packed_passes(tree, packed, len(seqs), "test", tokens=40))
    assert all(kw["input_ids"].numel() <= 40 or kw["input_ids"].shape[0] == 1 for kw, _r, _s in passes)
    monkeypatch.setattr(causal, "PACK_WIDTH", 24)
    got = sc.token_logprobs(seqs)
    for a, b in zip(got, sc.reference().token_logprobs(seqs), strict=True):
        assert a == pytest.approx(b, abs=1e-5)


def test_seq2seq_targets_share_the_encoder_pass_and_decoder_prefixes():
    """StereoSet's shape: three one-word fills of one gapped context run one encoder row and one decoder row;
    a longer fill and other contexts get their own; every value equals the one-at-a-time reference's."""
    from context_cda.scoring import load_scorer

    sc = load_scorer("tiny:t5", device="cpu", batch_size=8)
    assert sc.shares_encoder
    gap = sc.gap_token
    texts = [f"The nurse said {gap} was tired."] * 3 + [f"The nurse said {gap} was tired.", f"He {gap}.", ""]
    enc = sc.encode(texts, add_special_tokens=True)
    s0 = sc.sentinel_ids[0]
    words = sc.encode(["she", "he", "it", "the doctor", "left", "she"], add_special_tokens=False)
    dec = [[s0, w[0]] for w in words[:3]] + [[s0, *words[3]], [s0, *words[4]], [s0, *words[5]]]
    rows_seen: list[tuple[int, int]] = []
    enc_hook = sc.model.get_encoder().register_forward_hook(lambda m, a, o: rows_seen.append(("enc", o[0].shape[0])))
    dec_hook = sc.model.get_decoder().register_forward_hook(lambda m, a, o: rows_seen.append(("dec", o[0].shape[0])))
    try:
        got = sc.target_logprobs(enc, dec)
    finally:
        enc_hook.remove()
        dec_hook.remove()
    # 3 distinct encoder inputs, each encoded once; 3 decoder rows: the one-word fills' [start, s0] is a prefix of
    # the longer fill's decoder input under the same encoder input
    assert sum(n for kind, n in rows_seen if kind == "enc") == 3
    assert sum(n for kind, n in rows_seen if kind == "dec") == 3
    want = sc.reference().target_logprobs(enc, dec)
    for a, b in zip(got, want, strict=True):
        assert len(a) == len(b) and a == pytest.approx(b, abs=1e-5)


def test_seq2seq_without_a_decoder_start_token_pairs_each_target():
    from context_cda.scoring import load_scorer

    sc = load_scorer("tiny:t5", device="cpu", batch_size=8)
    sc.__dict__["decoder_start_id"] = None
    assert not sc.shares_encoder
    enc = sc.encode(["The man went home.", "The man went home."], add_special_tokens=True)
    dec = sc.encode(["he left", "she left"], add_special_tokens=False)
    for a, b in zip(sc.target_logprobs(enc, dec), sc.reference().target_logprobs(enc, dec), strict=True):
        assert a == pytest.approx(b, abs=1e-5)
