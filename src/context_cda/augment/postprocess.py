"""The one-reason view of the review, kept for callers of the old interface.

:func:`check` answers '' when :func:`context_cda.augment.review` accepts an output, else its first reason. Cleaning
(:mod:`.checks.cleanup`) and the word and lexicon helpers (:mod:`.checks.words`) live under the review they serve.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .checks import ReviewSettings, review
from .checks.words import LexiconLike


@dataclass(frozen=True)
class CheckSettings:
    min_length_ratio: float = 0.8
    max_length_ratio: float = 4.0


def check(output: str, source: str, swaps: Sequence[tuple[str, str]] = (), lexicon: LexiconLike | None = None,
          settings: CheckSettings = CheckSettings(), direction: str | None = None) -> str:
    """'' when :func:`~context_cda.augment.review` accepts ``output`` as a rephrasing of ``source``, else its first
    reason (every check at its default; ``direction`` is not needed: the swaps' genders say it)."""
    del direction
    rs = ReviewSettings(min_length_ratio=settings.min_length_ratio, max_length_ratio=settings.max_length_ratio)
    verdict = review(None, source, output, lexicon=lexicon, settings=rs, swaps=list(swaps))
    return verdict.reasons[0] if verdict.reasons else ""
