"""The baseline arms' library: arm table, bias-bench's sentence selection, INLP and SentenceDebias math, the
projection hook, Self-Debias scoring, dropout settings (tiny models, hand-made cases)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from context_cda import arms as A
from context_cda.baselines import learn
from context_cda.baselines.selection import _gender_of, bias_bench_pairs, inlp_sentences
from context_cda.errors import ConfigError, InputError, ModelError

PAIRS = [("he", "she"), ("his", "her"), ("man", "woman"), ("father", "mother")]


def ONE(line: str) -> list[str]:  # noqa: N802 - a line is one sentence (bias-bench's punkt is tested with -m biasbench)
    return [line.rstrip("\n")]


# ------------------------------------------------------------------------------------------------ arms


def test_arm_kinds_and_labels():
    assert A.parse("cda").kind == "trained" and A.parse("dropout").corpus == "original"
    assert A.parse("context-cda-k20").k == 20.0 and A.parse("context-cda", 30).k == 30.0
    assert A.parse("inlp").kind == "projection" and A.parse("sentence-debias").artifact.endswith(".safetensors")
    assert A.parse("self-debias").kind == "scoring" and A.parse("self-debias").families == ("masked", "causal")
    assert A.parse("mabel", published={"mabel": "x"}).kind == "published" and A.label("mabel") == "MABEL"
    assert [A.label(a) for a in ("vanilla", "inlp", "sentence-debias", "self-debias", "dropout")] == [
        "Vanilla", "INLP", "SentenceDebias", "Self-Debias", "Dropout"]
    with pytest.raises(ConfigError, match="unknown arm 'nope'"):
        A.parse("nope")
    assert A.of_kinds(["cda", "inlp", "dropout", "self-debias"], ("trained",)) == ["cda", "dropout"]


def test_an_arm_its_family_cannot_take_is_one_clear_error():
    A.check_family("inlp", "causal", "gpt2")
    A.check_family("dropout", "seq2seq", "t5")
    with pytest.raises(ConfigError, match=r"arm self-debias on target t5: .*masked and causal.*seq2seq.*Drop"):
        A.check_family("self-debias", "seq2seq", "t5")


def test_arms_per_target_follow_baselines_targets_and_published(cfg_factory):
    cfg = cfg_factory(run={"targets": {"a": "tiny:gpt2", "b": "tiny:bert"}},
                      train={"arms": ["cda", "dropout", "inlp", "self-debias"]},
                      baselines={"targets": ["a"], "published": {"b": {"mabel": "princeton-nlp/mabel-bert-base-uncased"}}})
    assert A.for_target(cfg, "a") == ["cda", "dropout", "inlp", "self-debias"]
    assert A.for_target(cfg, "b") == ["cda", "mabel"]
    from context_cda import stages as T

    assert [k for k in T.step_keys(cfg, T.get("evaluate-posthoc"))] == [
        {"target": "a", "arm": "inlp"}, {"target": "a", "arm": "self-debias"}, {"target": "b", "arm": "mabel"}]
    assert T.step_keys(cfg, T.get("debias")) == [{"target": "a", "arm": "inlp"}]
    assert [k["arm"] for k in T.step_keys(cfg, T.get("finetune")) if k["target"] == "b"] == ["cda"]


def test_published_names_and_targets_are_checked(cfg_factory):
    with pytest.raises(ConfigError, match="baselines.published names target"):
        cfg_factory(baselines={"published": {"nope": {"mabel": "x"}}})
    with pytest.raises(ConfigError, match="has the name of an arm"):
        cfg_factory(baselines={"published": {"smollm2-135m": {"inlp": "x"}}})


# ------------------------------------------------------------------------------------------------ selection


def test_inlp_selection_is_bias_benchs_algorithm():
    """A hand-run of bias-bench's _load_gender_data on four lines with seed 0 (same shuffle, same random cuts)."""
    lines = ["He said that he was tired today", "She said that her mother was tired", "The cat sat on the mat",
             "He and she went home together now", "the dog ran far away from here"]
    got = inlp_sentences(lines, PAIRS, 10, seed=0, mode="bias-bench", split=ONE)
    rng = random.Random(0)
    order = list(range(len(lines)))
    rng.shuffle(order)
    want = {"male": [], "female": [], "neutral": []}
    for i in order:
        tokens = lines[i].lower().split(" ")
        kind, idx = _gender_of(tokens, {m for m, _ in PAIRS}, {f for _, f in PAIRS}, "bias-bench")
        if kind == "neutral":
            want["neutral"].append(" ".join(tokens[: rng.randint(4, len(tokens))]))
        elif kind is not None:
            want[kind].append(" ".join(tokens[: rng.randint(idx, len(tokens)) + 1]))
    assert got.classes == want
    assert len(got.classes["male"]) == 1 and len(got.classes["female"]) == 1 and len(got.classes["neutral"]) == 2
    assert all(s == s.lower() for v in got.classes.values() for s in v)  # bias-bench lower-cases


def test_inlp_selection_default_mode_keeps_case_and_reads_punctuated_words():
    lines = ["Yesterday he, the old friend, left home", "Yesterday She left her home early"]
    bb = inlp_sentences(lines, PAIRS, 10, 0, "bias-bench", split=ONE)
    ours = inlp_sentences(lines, PAIRS, 10, 0, "default")
    assert bb.counts() == {"male": 0, "female": 1, "neutral": 1}  # bias-bench: "he," is not "he"
    assert ours.counts() == {"male": 1, "female": 1, "neutral": 0}
    assert any(s.startswith("Yesterday She") for s in ours.classes["female"])


def test_bias_bench_mode_without_punkt_tables_says_how_to_get_them(monkeypatch, tmp_path):
    pytest.importorskip("nltk")
    import nltk

    from context_cda.baselines.selection import split_sentences

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
        pytest.skip("punkt tables installed here")
    except LookupError:
        pass
    with pytest.raises(InputError, match="punkt tables.*NLTK_DATA"):
        split_sentences("One. Two.", "bias-bench")


def test_gender_of_returns_the_index_of_the_last_word_found_as_bias_bench():
    tokens = "he said his father was here".split()
    assert _gender_of(tokens, {"he", "his", "father"}, {"she"}, "bias-bench") == ("male", 3)
    assert _gender_of("he and she".split(), {"he"}, {"she"}, "bias-bench")[0] is None


def test_bias_bench_pairs_one_per_word_pair_in_its_order():
    pairs = bias_bench_pairs(["He saw her father", "no gender here"], PAIRS, split=ONE)
    # bias-bench's (male_example, female_example), its names for a list it reads as [female, male]: for a pair
    # [w0, w1], a text holding w0 is the "female" side and its w0->w1 swap the "male" one, and the other way round
    assert pairs == [("she saw her father", "he saw her father"), ("he saw her father", "he saw his father"),
                     ("he saw her mother", "he saw her father")]


# ------------------------------------------------------------------------------------------------ learning


def _classes(d: int = 12, n: int = 60, seed: int = 0):
    rng = np.random.default_rng(seed)
    g = rng.normal(size=d)
    base = rng.normal(size=(3 * n, d))
    return {"male": base[:n] + 2 * g, "female": base[n:2 * n] - 2 * g, "neutral": base[2 * n:]}, g


def test_inlp_projection_is_a_projection_that_removes_what_the_classifiers_saw():
    feats, g = _classes()
    res = learn.inlp_projection(feats, 3)
    p = res.projection
    assert np.allclose(p, p.T, atol=1e-10) and np.allclose(p @ p, p, atol=1e-8)
    assert round(p.shape[0] - np.trace(p)) == 9  # 3 classifiers x 3 one-vs-rest rows
    assert np.linalg.norm(p @ g) < 0.5 * np.linalg.norm(g)  # the gender direction is mostly gone
    assert res.sizes == {"train": 88, "dev": 38, "test": 54} and len(res.accuracies) == 3
    assert res.accuracies[0] > 0.7 and res.accuracies[-1] < res.accuracies[0] - 0.2


def test_bias_subspace_finds_the_pair_direction():
    rng = np.random.default_rng(1)
    v = rng.normal(size=16)
    v /= np.linalg.norm(v)
    base = rng.normal(size=(40, 16))
    comps, ratios = learn.bias_subspace(base + 3 * v, base - 3 * v, 1)
    assert comps.shape == (1, 16) and abs(abs(float(comps[0] @ v)) - 1) < 1e-5 and ratios[0] > 0.99


# ------------------------------------------------------------------------------------------------ applying


def test_projection_hook_changes_exactly_what_the_head_reads():
    import torch

    from context_cda.models import load_lm
    from context_cda.scoring.interventions import Projection, hook_module

    for ref in ("tiny:gpt2", "tiny:bert", "tiny:llama"):
        model, tok, fam = load_lm(ref, device="cpu")
        ids = tok("The doctor said that he was tired", return_tensors="pt")["input_ids"]
        with torch.inference_mode():
            hidden = model.base_model(input_ids=ids).last_hidden_state
            d = hidden.shape[-1]
            v = torch.randn(1, d, generator=torch.Generator().manual_seed(0))
            proj = Projection("bias_direction", v)
            handle = proj.attach(model)
            got = model(input_ids=ids).logits
            handle.remove()
            head = model.get_output_embeddings() if fam == "causal" else model.cls
            cleaned = hidden - (hidden @ v[0]).unsqueeze(-1) * v[0] / v[0].dot(v[0])
            want = head(cleaned)
            assert torch.allclose(got, want, atol=1e-5), ref
            assert torch.allclose((proj.apply(hidden) @ v[0]), torch.zeros(1), atol=1e-4)
            assert hook_module(model) is (model.base_model.encoder if fam == "masked" else model.base_model)


def test_a_projection_of_another_width_is_refused(tmp_path):
    import torch

    from context_cda.models import load_lm
    from context_cda.scoring.interventions import Projection

    model, _, _ = load_lm("tiny:gpt2", device="cpu")
    p = torch.eye(48)
    p[0, 0] = 0.0  # a projection that removes one dimension (the identity would be refused: it removes none)
    path = Projection("projection", p).save(tmp_path / "p.safetensors")
    with pytest.raises(ModelError, match=r"48-dimensional hidden states, and this model's are 32-dimensional"):
        Projection.load(path).attach(model)
    (tmp_path / "bad.safetensors").write_bytes(b"not a tensor file")
    with pytest.raises(InputError, match="not a safetensors projection file"):
        Projection.load(tmp_path / "bad.safetensors")


def test_debiased_distribution_is_schicks_formula():
    import torch

    from context_cda.scoring.self_debias import debiased_logprobs

    regular = torch.tensor([1.0, 2.0, 0.5])
    biased = torch.tensor([3.0, 0.0, 0.5])
    lp = debiased_logprobs(torch.stack([regular, biased]), 1, decay=50.0, epsilon=0.01)
    p, pb = regular.softmax(-1), biased.softmax(-1)
    factor = torch.clamp(torch.exp(-torch.clamp(pb - p, min=0) * 50), min=0.01)
    want = p * factor / (p * factor).sum()
    assert torch.allclose(lp.exp(), want, atol=1e-6)
    assert float(lp.exp()[0]) < float(p[0])  # the token the prefix favours loses mass


@pytest.mark.parametrize("ref", ["tiny:gpt2", "tiny:llama", "tiny:bert"])
def test_self_debias_without_decay_scores_like_the_plain_scorer(ref):
    """decay ~ 0: the debiased distribution is the regular row's, so (default mode) every StereoSet/CrowS score
    equals the plain scorer's: the prefixed rows, their padding and position ids leave the sentence as it was."""
    from context_cda.scoring import load_scorer
    from context_cda.scoring.self_debias import SelfDebiasSettings, self_debias_scorer

    scorer = load_scorer(ref, device="cpu", batch_size=1)
    sd = self_debias_scorer(scorer, SelfDebiasSettings(("The following text discriminates against people: ",), 1e-9))
    text = "The nurse said that she was tired"
    if scorer.family == "causal":
        seq = scorer.encode([text], add_special_tokens=False)
        start = scorer.start_token("auto", "bias-bench").id
        plain = scorer.two_pass_logprobs(seq, start)[0]
        got = sd.two_pass_logprobs(seq, start)[0]
    else:
        seq = scorer.encode([text], add_special_tokens=True)[0]
        plain = scorer.masked_logprobs([seq] * 3, [2, 3, 4])
        got = sd.masked_logprobs([seq] * 3, [2, 3, 4])
    assert np.allclose(got, plain, atol=1e-4), (got, plain)


@pytest.mark.parametrize("ref", ["tiny:gpt2", "tiny:llama"])
@pytest.mark.parametrize(("mode", "position"), [("default", None), ("bias-bench", None), ("bias-bench", 13),
                                              ("bias-bench", 14)])
def test_self_debias_in_batches_scores_as_one_sentence_at_a_time(ref, mode, position, monkeypatch):
    """Batched = bias-bench's one sentence per pass, in both modes, for two_pass_logprobs and token_logprobs, in
    the order given: through the prefix tree with the prefixes encoded once (a cached prefix; packed rows split
    at 8 tokens, several passes), and in whole-row batches (right-padded after the left-padded prefixes) for a
    model that cannot continue a cached prefix. bias-bench mode's fixed read position may fall inside the
    prefix (13 of this tokenizer's longer prefix), at its end, or one past it."""
    from context_cda.scoring import causal, load_scorer
    from context_cda.scoring.self_debias import SelfDebiasCausalScorer, SelfDebiasSettings

    monkeypatch.setattr(causal, "PACK_WIDTH", 8)
    scorer = load_scorer(ref, device="cpu", batch_size=1)
    prefix = "The following text discriminates against people because of their gender: "
    n_prefix = len(scorer.tokenizer(prefix)["input_ids"])
    at = {None: None, 13: 13, 14: n_prefix + 1}[position] if mode == "bias-bench" else None
    settings = SelfDebiasSettings((prefix,), mode=mode, position=at)
    texts = ["He was tired", "The nurse said that she would help the doctor with his work today", "She laughed",
             "My uncle and my aunt saw the children at the big old house near the river", "It", "He was tired",
             "The nurse said that he would"]
    seqs = scorer.encode(texts, add_special_tokens=False)
    one = SelfDebiasCausalScorer(scorer.model, scorer.tokenizer, settings, batch_size=1)
    cached = SelfDebiasCausalScorer(scorer.model, scorer.tokenizer, settings, batch_size=3)
    rows = SelfDebiasCausalScorer(scorer.model, scorer.tokenizer, settings, batch_size=3)
    rows.__dict__["_context"] = None
    assert cached._context is not None
    start = scorer.start_token("auto", "bias-bench").id
    want = one.two_pass_logprobs(seqs, start)
    for many in (cached, rows):
        for a, b in zip(want, many.two_pass_logprobs(seqs, start), strict=True):
            assert len(a) == len(b) and np.allclose(a, b, atol=1e-5), (a, b)
        for a, b in zip(one.token_logprobs(seqs), many.token_logprobs(seqs), strict=True):
            assert len(a) == len(b) and np.allclose(a, b, atol=1e-5), (a, b)
        assert many.token_logprobs([seqs[4][:1]]) == [[]]


def test_self_debias_without_a_cached_prefix_when_the_probe_disagrees():
    """A model whose continuation of a cached prefix differs from the whole rows (here: it drops the cache) fails
    the probe and is scored in whole-row batches, with the same values."""
    from context_cda.models import load_lm
    from context_cda.scoring import scorer_for
    from context_cda.scoring.self_debias import SelfDebiasSettings, self_debias_scorer

    model, tok, _ = load_lm("tiny:gpt2", device="cpu")
    forward = model.transformer.forward  # the base stack (what the batched passes call)

    def no_cache(input_ids=None, attention_mask=None, position_ids=None, cache=None, **kw):
        if cache is not None and attention_mask is not None and attention_mask.dim() == 4:
            attention_mask = attention_mask[..., -input_ids.shape[1]:]  # the prefix's columns dropped with it
        return forward(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, **kw)

    model.transformer.forward = no_cache
    settings = SelfDebiasSettings(("The following text discriminates against people: ",))
    sd = self_debias_scorer(scorer_for(model, tok, batch_size=4), settings)
    assert sd._context is None
    seqs = sd.encode(["He was tired", "The nurse laughed at the doctor"], add_special_tokens=False)
    ref = self_debias_scorer(scorer_for(model, tok, batch_size=1), settings)
    for a, b in zip(sd.two_pass_logprobs(seqs), ref.two_pass_logprobs(seqs), strict=True):
        assert np.allclose(a, b, atol=1e-5), (a, b)


def test_masked_self_debias_in_batches_scores_as_one_sequence_at_a_time():
    """Masked LMs: distinct sequences of different lengths in one pass (right-padded after their prefixed rows,
    repeated sequences and positions once) = bias-bench's one sequence per pass."""
    from context_cda.scoring import load_scorer
    from context_cda.scoring.self_debias import SelfDebiasSettings, self_debias_scorer

    settings = SelfDebiasSettings(("The following text discriminates against people because of their gender: ",))
    one = self_debias_scorer(load_scorer("tiny:bert", device="cpu", batch_size=1), settings)
    many = self_debias_scorer(load_scorer("tiny:bert", device="cpu", batch_size=3), settings)
    seqs = one.encode(["The nurse said that she was tired", "He laughed", "My aunt saw the children at the house"],
                      add_special_tokens=True)
    reqs = [(s, p) for s in seqs for p in range(1, len(s) - 1)] + [(seqs[1], 1), (seqs[0], 2)]
    a = one.masked_logprobs([s for s, _ in reqs], [p for _, p in reqs])
    b = many.masked_logprobs([s for s, _ in reqs], [p for _, p in reqs])
    assert many.batch_size == 3 and np.allclose(a, b, atol=1e-5), (a, b)
    assert b[-2] == b[len(seqs[0]) - 2] and b[-1] == b[1]


def test_bias_bench_mode_reads_its_fixed_position_and_says_when_the_tokenizer_cannot():
    from context_cda.scoring import load_scorer
    from context_cda.scoring.self_debias import SelfDebiasSettings, self_debias_scorer

    scorer = load_scorer("tiny:gpt2", device="cpu", batch_size=1)
    prefix = "The following text discriminates against people because of their gender: "
    default = self_debias_scorer(scorer, SelfDebiasSettings((prefix,)))
    assert default.prefix_length == len(scorer.tokenizer(prefix)["input_ids"])
    bb = self_debias_scorer(scorer, SelfDebiasSettings((prefix,), mode="bias-bench", position=13))
    assert bb.prefix_length == 13  # bias-bench's number (GPT-2's count), whatever this tokenizer gives
    seq = scorer.encode(["He was tired"], add_special_tokens=False)
    assert all(math.isfinite(v) for v in bb.two_pass_logprobs(seq)[0])
    too_far = self_debias_scorer(scorer, SelfDebiasSettings(("short: ",), mode="bias-bench", position=13))
    with pytest.raises(ModelError, match="use baselines.mode=default"):
        too_far.two_pass_logprobs(seq)


# ------------------------------------------------------------------------------------------------ dropout


def test_dropout_arm_raises_every_dropout_setting_of_the_config(cfg_factory):
    from transformers import AutoConfig

    from context_cda.models import resolve_pretrained
    from context_cda.train.finetune import dropout_overrides

    cfg = cfg_factory()
    bert = AutoConfig.from_pretrained(resolve_pretrained("tiny:bert"))
    assert dropout_overrides(bert, "masked", cfg, "b") == {"hidden_dropout_prob": 0.2,
                                                           "attention_probs_dropout_prob": 0.15}
    gpt2 = AutoConfig.from_pretrained(resolve_pretrained("tiny:gpt2"))
    assert dropout_overrides(gpt2, "causal", cfg, "g") == {"resid_pdrop": 0.15, "embd_pdrop": 0.15, "attn_pdrop": 0.15}
    llama = AutoConfig.from_pretrained(resolve_pretrained("tiny:llama"))
    assert dropout_overrides(llama, "causal", cfg, "l") == {"attention_dropout": 0.15}
    cfg.baselines.dropout.hidden = 0.3
    assert dropout_overrides(bert, "masked", cfg, "b")["hidden_dropout_prob"] == 0.3

    class NoDropout:
        pass

    with pytest.raises(ConfigError, match="arm dropout on target x: its model config has no dropout"):
        dropout_overrides(NoDropout(), "causal", cfg, "x")


def test_dropout_arm_trains_on_the_originals(tmp_path):
    import pandas as pd

    from context_cda.train.corpus import arm_corpus, load_arm_rows

    table = tmp_path / "valid.parquet"
    pd.DataFrame({"id": ["a", "b", "c"], "original": ["He ran.", "She sat.", "He ran."],
                  "counterfactual": ["She ran.", "He sat.", "She ran."]}).to_parquet(table)
    kind, path = arm_corpus({"cda": table, "augmented": table, "filtered": tmp_path}, "dropout", 30)
    assert (kind, path) == ("original", table)
    assert load_arm_rows(kind, path)["text"].tolist() == ["He ran.", "She sat."]
    with pytest.raises(InputError, match="inlp is not fine-tuned"):
        arm_corpus({"cda": table}, "inlp", 30)


def test_debiased_target_logprobs_are_the_full_distributions_entries():
    """The blockwise, read-only form gives the full debiased distribution's entries exactly (same operations)."""
    import torch

    from context_cda.scoring.self_debias import debiased_logprobs, debiased_target_logprobs

    torch.manual_seed(0)
    logits = torch.randn(3, 21, 50) * 4
    rows = [0, 5, 5, 20, 9, 3, 17]
    targets = [1, 2, 49, 0, 7, 7, 30]
    full = debiased_logprobs(logits, 2, decay=50.0, epsilon=0.01)
    got = debiased_target_logprobs(logits, rows, targets, 2, decay=50.0, epsilon=0.01, chunk=4)
    assert torch.equal(got, full[torch.tensor(rows), torch.tensor(targets)])
