"""The hf generator on tiny random models (tiny:llama with a chat template, tiny:gpt2 without one), and its
sampling step and prefix helper on hand-made inputs."""

from __future__ import annotations

import pytest

from context_cda.augment import build_messages
from context_cda.generation import SamplingParams, make_generator

SENTS = ["She thanked her mother.", "The queen said she would visit the city in the spring.", "His brother worked."]


@pytest.fixture(scope="module")
def gen():
    pytest.importorskip("torch")
    g = make_generator("hf", "tiny:llama", device="cpu", batch_size=2)
    yield g
    g.close()


@pytest.fixture(scope="module")
def gpt2():
    pytest.importorskip("torch")
    g = make_generator("hf", "tiny:gpt2", device="cpu", batch_size=3)
    yield g
    g.close()


def _sharpened(ref: str):
    """A tiny model whose weights are re-drawn with a large spread, so that its greedy continuation depends on
    every prompt token and its position (the stock tiny models repeat one token whatever the prompt)."""
    import torch

    from context_cda.models import load_lm

    model, tok, _ = load_lm(ref, device="cpu")
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim > 1:
                p.normal_(0.0, 0.35)
    return make_generator("hf", ref, loaded=(model, tok), batch_size=3)


@pytest.fixture(scope="module", params=["tiny:llama", "tiny:gpt2"])
def sharp(request):
    pytest.importorskip("torch")
    g = _sharpened(request.param)
    yield g
    g.close()


def test_n_completions_and_token_counts(gen):
    res = gen.generate([build_messages(s, few_shot=False) for s in SENTS],
                       SamplingParams(n=3, temperature=1.0, max_tokens=8, seed=1))
    assert len(res) == 3
    for r in res:
        assert r.ok and len(r.texts) == 3 and len(r.finish_reasons) == 3
        assert 3 <= r.completion_tokens <= 24 and r.prompt_tokens > 0


def test_batched_greedy_matches_one_at_a_time(sharp):
    convs = [build_messages(s, few_shot=False) for s in SENTS]
    p = SamplingParams(temperature=0.0, max_tokens=12, stop=())
    batched = [r.texts for r in sharp.generate(convs, p)]
    single = [sharp.generate([c], p)[0].texts for c in convs]
    assert batched == single
    assert len({t[0] for t in batched}) == len(SENTS)  # each prompt has its own continuation


def test_greedy_matches_transformers_generate(sharp):
    """The decoding loop (shared prefix, middle padding, static cache, dropped rows) gives transformers' own
    greedy continuation for every prompt of a batch."""
    import torch

    from context_cda.generation.hf import format_chat

    g = sharp
    convs = [build_messages(s, few_shot=False) for s in SENTS]
    ours = g.generate(convs, SamplingParams(temperature=0.0, max_tokens=10, stop=()))
    for conv, r in zip(convs, ours, strict=True):
        enc = g.tokenizer(format_chat(g.tokenizer, conv), return_tensors="pt", add_special_tokens=not g._chat)
        with torch.inference_mode():
            out = g.model.generate(**enc, max_new_tokens=10, do_sample=False, pad_token_id=g.tokenizer.pad_token_id,
                                   eos_token_id=g._eos_ids(())[0])
        ref = out[0, enc["input_ids"].shape[1]:].tolist()
        assert r.completion_tokens == len(ref)
        assert r.texts[0] == g.tokenizer.decode(ref, skip_special_tokens=True)


def test_seeded_samples_do_not_depend_on_the_batch(gpt2):
    convs = [build_messages(s, few_shot=False) for s in SENTS]
    p = SamplingParams(n=2, temperature=1.0, top_p=0.9, max_tokens=8, seed=3)
    together = [r.texts for r in gpt2.generate(convs, p)]
    alone = [gpt2.generate([c], p)[0].texts for c in convs]
    reversed_order = [r.texts for r in gpt2.generate(convs[::-1], p)][::-1]
    assert together == alone == reversed_order
    assert all(a != b for a, b in together)  # the two samples of a prompt have their own streams
    other_seed = [r.texts for r in gpt2.generate(convs, SamplingParams(n=2, temperature=1.0, top_p=0.9,
                                                                        max_tokens=8, seed=4))]
    assert other_seed != together


def test_sample_next_draws_inside_the_nucleus():
    torch = pytest.importorskip("torch")
    from context_cda.generation.hf import sample_next

    probs = torch.tensor([[0.05, 0.5, 0.3, 0.15]])
    logits = probs.log()
    p = SamplingParams(temperature=1.0, top_p=0.8)  # nucleus {1, 2}: 0.5 + 0.3 reaches 0.8
    picks = {int(sample_next(logits, p, torch.tensor([u]), torch)) for u in (0.0, 0.3, 0.62, 0.63, 0.99)}
    assert picks == {1, 2}
    assert int(sample_next(logits, p, torch.tensor([0.6]), torch)) == 1  # u below 0.5 / 0.8 = 0.625
    assert int(sample_next(logits, p, torch.tensor([0.65]), torch)) == 2
    full = SamplingParams(temperature=1.0, top_p=1.0)  # inverse CDF in vocabulary order
    assert [int(sample_next(logits, full, torch.tensor([u]), torch)) for u in (0.01, 0.3, 0.8, 0.9)] == [0, 1, 2, 3]
    assert int(sample_next(logits, SamplingParams(temperature=0.0), None, torch)) == 1


def test_top_p_from_the_top_candidates_equals_a_full_sort():
    """Nucleus sampling reads the top 256 tokens when they hold the nucleus, else sorts the whole vocabulary:
    both give the draw of the plain definition (sort everything, keep the smallest head reaching top_p)."""
    torch = pytest.importorskip("torch")
    from context_cda.generation.hf import sample_next

    gen = torch.Generator().manual_seed(0)
    peaked = torch.randn(6, 5000, generator=gen) * 4.0  # nucleus of a few dozen tokens
    flat = torch.randn(6, 5000, generator=gen) * 0.1  # nucleus of thousands: the full-sort path
    for logits in (peaked, flat):
        for top_p in (0.5, 0.9, 0.99):
            p = SamplingParams(temperature=0.8, top_p=top_p)
            u = torch.rand(6, generator=gen)
            probs = torch.softmax(logits / 0.8, dim=-1)
            sp, si = probs.sort(dim=-1, descending=True)
            sp = sp.masked_fill(sp.cumsum(-1) - sp >= top_p, 0.0)
            cdf = sp.cumsum(-1)
            want = si.gather(1, torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(1))).squeeze(1)
            assert torch.equal(sample_next(logits, p, u, torch), want)


def test_common_prefix_length():
    from context_cda.generation.hf import common_prefix_length

    assert common_prefix_length([[1, 2, 3, 4], [1, 2, 5], [1, 2, 3]]) == 2
    assert common_prefix_length([[1, 2, 3]]) == 2  # the last token is prefilled with the row
    assert common_prefix_length([[1, 2, 3], [1, 2, 3]]) == 2
    assert common_prefix_length([[7], [7, 8]]) == 0
    assert common_prefix_length([[1, 2], [3, 2]]) == 0


def test_seeded_sampling_is_reproducible(gen):
    convs = [build_messages(s, few_shot=False) for s in SENTS]
    p = SamplingParams(temperature=1.0, max_tokens=6, seed=7)
    assert [r.texts for r in gen.generate(convs, p)] == [r.texts for r in gen.generate(convs, p)]


def test_special_stop_token_becomes_eos(gen):
    eos, rest = gen._eos_ids(["<|im_end|>", "\n\n"])
    assert gen.tokenizer.convert_tokens_to_ids("<|im_end|>") in eos and rest == ["\n\n"]


def test_prompt_too_long_is_a_permanent_per_item_error(gen):
    long = build_messages("word " * 2000, few_shot=False)
    res = gen.generate([long, build_messages(SENTS[0], few_shot=False)], SamplingParams(max_tokens=4))
    assert res[0].error.startswith("prompt-too-long: ") and res[0].permanent and res[1].ok
    assert not res[1].permanent
    assert gen.generate([], SamplingParams(max_tokens=4)) == []


def test_vllm_backend_missing_gives_clear_error():
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here")
    from context_cda.errors import ModelError

    with pytest.raises(ModelError, match="needs the vllm package"):
        make_generator("vllm", "tiny:llama")


def test_unknown_backend():
    from context_cda.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown generator backend"):
        make_generator("nope", "x")


def test_stop_strings_end_rows_early(gen):
    stops = ("e", "a", "o", "i")
    res = gen.generate([build_messages(s, few_shot=False) for s in SENTS],
                       SamplingParams(temperature=1.0, max_tokens=40, seed=2, stop=stops))
    for r in res:
        assert not any(s in r.texts[0] for s in stops)
    assert sum(r.completion_tokens for r in res) < 3 * 40
    assert "stop" in {r.finish_reasons[0] for r in res}
