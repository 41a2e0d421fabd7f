"""Sampling M rephrasings of each contextual counterfactual through the augment stage's ``Generator``.

This is the only place the entropy stage touches :mod:`context_cda.augment`. The prompt asks for a faithful
rephrasing (not the augmentation prompt, which asks to *add* context: that would make every sample differ in
meaning and inflate the entropy). It is versioned like the augment prompts: edit by adding a version.

Every sample goes through the same review as the augment stage's outputs (:func:`context_cda.augment.review`),
with the sampler's settings (:meth:`~context_cda.augment.ReviewSettings.for_samples`): the cleaned text is kept,
and a *broken* sample (empty, a refusal, another script or language, a list, an echo of this prompt, meta text,
special tokens) is dropped. Samples that change the meaning stay: that spread is what semantic entropy measures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ..augment import ReviewSettings
    from ..generation.base import Conversation, Generator

REPHRASE_PROMPT_VERSION = "r1"
REPHRASE_SYSTEM = (
    "You are a careful writing assistant. You rephrase text without changing what it says. You never change "
    "the gender of any person. You answer with the rephrased text only: no introduction, no quotes."
)
#: the system prompt per attribute (gender: :data:`REPHRASE_SYSTEM`, unchanged since r1)
REPHRASE_SYSTEMS: dict[str, str] = {
    "gender": REPHRASE_SYSTEM,
    "race": REPHRASE_SYSTEM.replace("the gender of any person", "any person's race or ethnicity, nor the words for "
                                    "it"),
    "religion": REPHRASE_SYSTEM.replace("the gender of any person", "any person's or place's religion, nor the "
                                        "words for it"),
}
REPHRASE_USER = "Rephrase the following text in your own words, keeping its meaning.\n\nText: {text}"


def rephrase_messages(text: str, attribute: str = "gender") -> Conversation:
    return [
        {"role": "system", "content": REPHRASE_SYSTEMS.get(attribute, REPHRASE_SYSTEM)},
        {"role": "user", "content": REPHRASE_USER.format(text=text.strip())},
    ]


def sample_review_settings(base: ReviewSettings | None = None, attribute: str | None = None) -> ReviewSettings:
    """The sampler's review: the broken-output checks of ``base`` (default: the review's defaults), with this
    prompt (the run ``attribute``'s; default: ``base``'s) as the text a sample must not echo."""
    from dataclasses import replace

    from ..augment import ReviewSettings

    attr = attribute or (base.attribute if base is not None else "gender")
    out = ReviewSettings.for_samples(base, prompt_texts=(REPHRASE_SYSTEMS.get(attr, REPHRASE_SYSTEM), REPHRASE_USER))
    return replace(out, attribute=attr)


@dataclass
class Samples:
    """The reviewed samples per text, the generator's transient error per text, the dropped samples' reasons and
    the generator's permanent error per text (``"<kind>: <detail>"``, e.g. ``prompt-too-long``: the item is
    rejected for it, not retried)."""

    samples: list[list[str]]
    errors: list[str | None]
    dropped: list[list[str]]
    rejections: list[str | None] = field(default_factory=list)


def sample_and_review(
    generator: Generator,
    texts: Sequence[str],
    m: int,
    *,
    temperature: float = 1.0,
    top_p: float = 1.0,
    max_tokens: int = 96,
    seed: int | None = 0,
    review_settings: ReviewSettings | None = None,
    lexicon: Any = None,
) -> Samples:
    """``m`` sampled rephrasings per text, each reviewed (see the module docstring); the prompt is the review
    settings' attribute's."""
    from ..augment import review_many
    from ..generation.base import SamplingParams

    params = SamplingParams(
        n=m, temperature=temperature, top_p=top_p, max_tokens=max_tokens, seed=seed, stop=("\n\n",)
    )
    settings = review_settings or sample_review_settings()
    results = generator.generate([rephrase_messages(t, settings.attribute) for t in texts], params)
    owner = [i for i, r in enumerate(results) for _ in r.texts]
    flat = [s for r in results for s in r.texts]
    verdicts = review_many([None] * len(flat), [texts[i] for i in owner], flat, lexicon=lexicon,
                           settings=settings)
    out = Samples([[] for _ in texts], [None if r.permanent else r.error for r in results], [[] for _ in texts],
                  [r.error if r.permanent else None for r in results])
    for i, v in zip(owner, verdicts, strict=True):
        if v.accepted:
            out.samples[i].append(v.text)
        elif v.text:  # an empty sample was never a sample
            out.dropped[i].append(v.reason)
    return out


def sample_rephrasings(
    generator: Generator,
    texts: Sequence[str],
    m: int,
    *,
    temperature: float = 1.0,
    top_p: float = 1.0,
    max_tokens: int = 96,
    seed: int | None = 0,
    review_settings: ReviewSettings | None = None,
    lexicon: Any = None,
) -> tuple[list[list[str]], list[str | None]]:
    """``m`` sampled rephrasings per text (reviewed and cleaned; broken ones removed), and a per-text error,
    transient or permanent (or None)."""
    got = sample_and_review(generator, texts, m, temperature=temperature, top_p=top_p, max_tokens=max_tokens,
                            seed=seed, review_settings=review_settings, lexicon=lexicon)
    return got.samples, [e or r for e, r in zip(got.errors, got.rejections, strict=True)]
