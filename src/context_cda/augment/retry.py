"""Retries that aim: what the next attempt changes, from the reasons the last one was rejected for.

* the prompt: one feedback sentence per failed check (:data:`~context_cda.augment.prompts.FEEDBACK`, with the
  input's language or the dropped words filled in), placed in the last user turn above the sentence;
* the sampling: a cut-off answer gets 50 % more tokens; an unchanged copy a hotter temperature (+0.3, at most
  1.3); an answer in another script or language, with a list, an echo, meta text, special tokens or a changed
  fact a cooler one (x0.7, at least 0.2): closer to the instruction and the input;
* the seed: ``sampling.seed + attempt``, as before, so every attempt is reproducible and cached on its own.

When the answer was broken as a whole (empty, a refusal, another language, a list, an echo, meta text, special
tokens, cut off, an unchanged copy), only that is addressed: the content reasons that follow from it (every
name "missing" from a refusal) would be noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..generation.base import SamplingParams
from .checks.script import language_name
from .prompts import FEEDBACK

_COOLER = frozenset({"script", "language", "list", "prompt-echo", "meta", "special-token", "number-missing", "number-added",
                     "entity-missing", "content-missing", "negation-added", "negation-removed",
                     "gender-contradiction", "gender-missing", "group-contradiction", "group-added",
                     "group-missing", "gendered-word-left", "meaning", "too-long"})
_BROKEN = ("empty", "refusal", "script", "language", "list", "prompt-echo", "meta", "special-token", "truncated",
           "identical")
_MAX_FEEDBACK = 3


def _kind(reason: str) -> str:
    return reason.split(":", 1)[0].strip()


def addressed(reasons: Sequence[str]) -> list[str]:
    """The reasons a retry addresses: the whole-answer ones when there are any, else all."""
    broken = [r for r in reasons if _kind(r) in _BROKEN]
    return broken or list(reasons)


def feedback(reasons: Sequence[str], source: str) -> str:
    """The note for the next attempt (at most three sentences, in the order the reasons came)."""
    out: list[str] = []
    for r in addressed(reasons):
        _, _, detail = r.partition(":")
        template = FEEDBACK.get(_kind(r))
        if template is None:
            continue
        text = template.format(language=language_name(source) if "{language}" in template else "",
                               detail=detail.strip())
        if text not in out:
            out.append(text)
        if len(out) == _MAX_FEEDBACK:
            break
    return " ".join(out)


def next_params(reasons: Sequence[str], previous: SamplingParams, seed: int | None) -> SamplingParams:
    """Sampling for the next attempt (with ``seed``) after ``previous`` was rejected for ``reasons``."""
    kinds = {_kind(r) for r in addressed(reasons)}
    p = previous.with_seed(seed)
    if "truncated" in kinds:
        p = replace(p, max_tokens=int(p.max_tokens * 1.5))
    if p.greedy:
        return p
    if "identical" in kinds:
        return replace(p, temperature=min(1.3, round(p.temperature + 0.3, 3)))
    if kinds & _COOLER:
        return replace(p, temperature=max(0.2, round(p.temperature * 0.7, 3)))
    return p
