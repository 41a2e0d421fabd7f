"""The entropy sampler reviews its M rephrasings with the augment review (broken ones dropped, meaning kept)."""

from __future__ import annotations

from context_cda.augment import ReviewSettings, review
from context_cda.entropy.sampling import (
    REPHRASE_USER,
    sample_and_review,
    sample_rephrasings,
    sample_review_settings,
)
from context_cda.generation.base import GenerationResult

TEXT = "The queen said she would return to the capital in spring."
SAMPLES = [
    'Rephrased text: "The queen announced that she would come back to the capital in spring."',  # cleaned, kept
    "The king said he would stay in the capital all winter.",  # another meaning: kept (that is the entropy)
    "Rephrase the following text in your own words, keeping its meaning.",  # echo of this prompt: dropped
    "La reine a dit qu'elle reviendrait dans la capitale au printemps.",  # another language: dropped
    "1. The queen said she would return.\n2. The queen said she would come back in spring.",  # a list: dropped
    "  ",  # empty: dropped, and not counted as a rejection
    "<|im_start|>assistant The queen said she would be back in spring.",  # special token: dropped
]


class Gen:
    backend, model_id = "fake", "fake"

    def __init__(self):
        self.params = None

    def generate(self, prompts, params):
        self.params = params
        assert all(p[-1]["content"].startswith(REPHRASE_USER.split("\n")[0]) for p in prompts)
        return [GenerationResult(texts=list(SAMPLES)) for _ in prompts[:-1]] + [GenerationResult(error="HTTP 500")]


def test_broken_samples_are_dropped_and_meaning_changes_kept():
    got = sample_and_review(Gen(), [TEXT, "x"], 7, temperature=0.9, seed=3)
    assert got.samples[0] == ["The queen announced that she would come back to the capital in spring.",
                              "The king said he would stay in the capital all winter."]
    kinds = [r.split(":")[0] for r in got.dropped[0]]
    assert kinds == ["prompt-echo", "language", "list", "special-token"]
    assert got.errors == [None, "HTTP 500"] and got.samples[1] == [] and got.dropped[1] == []


def test_backwards_compatible_signature():
    gen = Gen()
    samples, errors = sample_rephrasings(gen, [TEXT, "x"], 7, temperature=0.9, top_p=0.8, max_tokens=40, seed=3)
    assert len(samples[0]) == 2 and errors[1] == "HTTP 500"
    p = gen.params
    assert (p.n, p.temperature, p.top_p, p.max_tokens, p.seed, p.stop) == (7, 0.9, 0.8, 40, 3, ("\n\n",))


def test_sampler_settings_are_the_review_for_samples():
    s = sample_review_settings()
    assert s == ReviewSettings.for_samples(None, prompt_texts=s.prompt_texts)
    assert REPHRASE_USER in s.prompt_texts and s.examples() == ()
    # the same function decides: what the sampler drops, review() rejects with these settings
    for text in SAMPLES:
        v = review(None, TEXT, text, settings=s)
        assert v.accepted == (text in SAMPLES[:2]), (text, v.reasons)
    # a base review's switches carry over (here: the language check off)
    off = sample_review_settings(ReviewSettings(language=False))
    assert review(None, TEXT, SAMPLES[3], settings=off).accepted
