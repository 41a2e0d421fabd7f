"""The hf generator on a tiny random Llama (tiny:llama, with a chat template)."""

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


def test_n_completions_and_token_counts(gen):
    res = gen.generate([build_messages(s, few_shot=False) for s in SENTS],
                       SamplingParams(n=3, temperature=1.0, max_tokens=8, seed=1))
    assert len(res) == 3
    for r in res:
        assert r.ok and len(r.texts) == 3 and len(r.finish_reasons) == 3
        assert 3 <= r.completion_tokens <= 24 and r.prompt_tokens > 0


def test_batched_greedy_matches_one_at_a_time(gen):
    convs = [build_messages(s, few_shot=False) for s in SENTS]
    p = SamplingParams(temperature=0.0, max_tokens=6, stop=())
    batched = [r.texts for r in gen.generate(convs, p)]
    single = [gen.generate([c], p)[0].texts for c in convs]
    assert batched == single


def test_seeded_sampling_is_reproducible(gen):
    convs = [build_messages(s, few_shot=False) for s in SENTS]
    p = SamplingParams(temperature=1.0, max_tokens=6, seed=7)
    assert [r.texts for r in gen.generate(convs, p)] == [r.texts for r in gen.generate(convs, p)]


def test_special_stop_token_becomes_eos(gen):
    eos, rest = gen._eos_ids(["<|im_end|>", "\n\n"])
    assert gen.tokenizer.convert_tokens_to_ids("<|im_end|>") in eos and rest == ["\n\n"]


def test_prompt_too_long_is_a_per_item_error(gen):
    long = build_messages("word " * 2000, few_shot=False)
    res = gen.generate([long, build_messages(SENTS[0], few_shot=False)], SamplingParams(max_tokens=4))
    assert res[0].error and "too long" in res[0].error and res[1].ok


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
