"""Sampling M rephrasings of each contextual counterfactual through the augment stage's ``Generator``.

This is the only place the entropy stage touches :mod:`context_cda.augment`. The prompt asks for a faithful
rephrasing (not the augmentation prompt, which asks to *add* context: that would make every sample differ in
meaning and inflate the entropy). It is versioned like the augment prompts: edit by adding a version.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..generation.base import Conversation, Generator

REPHRASE_PROMPT_VERSION = "r1"
REPHRASE_SYSTEM = (
    "You are a careful writing assistant. You rephrase text without changing what it says. You never change "
    "the gender of any person. You answer with the rephrased text only: no introduction, no quotes."
)
REPHRASE_USER = "Rephrase the following text in your own words, keeping its meaning.\n\nText: {text}"


def rephrase_messages(text: str) -> Conversation:
    return [
        {"role": "system", "content": REPHRASE_SYSTEM},
        {"role": "user", "content": REPHRASE_USER.format(text=text.strip())},
    ]


def clean_sample(text: str) -> str:
    """Strip whitespace, wrapping quotes and a leading 'Rephrased:'-style label from one sample."""
    t = text.strip()
    low = t.lower()
    for lead in ("rephrased text:", "rephrased:", "text:", "rephrasing:"):
        if low.startswith(lead):
            t = t[len(lead) :].strip()
            break
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "\"'":
        t = t[1:-1].strip()
    return " ".join(t.split())


def sample_rephrasings(
    generator: Generator,
    texts: Sequence[str],
    m: int,
    *,
    temperature: float = 1.0,
    top_p: float = 1.0,
    max_tokens: int = 96,
    seed: int | None = 0,
) -> tuple[list[list[str]], list[str | None]]:
    """``m`` sampled rephrasings per text (cleaned; empty ones removed), and a per-text error (or None)."""
    from ..generation.base import SamplingParams

    params = SamplingParams(
        n=m, temperature=temperature, top_p=top_p, max_tokens=max_tokens, seed=seed, stop=("\n\n",)
    )
    results = generator.generate([rephrase_messages(t) for t in texts], params)
    samples: list[list[str]] = []
    errors: list[str | None] = []
    for r in results:
        kept = [c for c in (clean_sample(s) for s in r.texts) if c]
        samples.append(kept)
        errors.append(r.error)
    return samples, errors
