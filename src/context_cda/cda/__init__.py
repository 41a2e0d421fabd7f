"""Counterfactual swapping: the lexicons (gender pairs, race and religion groups) and the ``cda`` stage.
May import: the run contract, data, evaluate (decontamination).
"""

from __future__ import annotations

from .lexicon import DEFAULT_PAIRS, PRONOUNS, Lexicon, LexiconIssue, Pair, build_lexicon, load_lexicon
from .swap import Swapper, SwapResult

__all__ = [
    "DEFAULT_PAIRS", "PRONOUNS", "Lexicon", "LexiconIssue", "Pair", "SwapResult", "Swapper", "build_lexicon",
    "load_lexicon", "run_cda", "training_rows",
]


def __getattr__(name: str):
    if name in ("run_cda", "training_rows"):
        from . import stage

        return getattr(stage, name)
    raise AttributeError(name)
