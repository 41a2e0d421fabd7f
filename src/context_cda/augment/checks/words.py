"""The words the review compares, and the gender lexicon it falls back on when the caller names none.

:func:`words` is the one tokenisation of the checks (:mod:`.text`, :mod:`.form`, :mod:`.gender`, :mod:`.groups`);
:class:`PairLexicon` is the minimal ``[male, female]`` lexicon of a review called without the run's own
(:mod:`context_cda.cda.lexicon` builds that one); :func:`parse_swaps` reads a counterfactual's ``swapped_terms``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

_WORD = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)*")


def words(text: str) -> list[str]:
    """Lower-case word tokens (letters and inner apostrophes)."""
    return [w.lower().replace("’", "'") for w in _WORD.findall(text)]


class LexiconLike(Protocol):
    male_words: set[str]
    female_words: set[str]

    def counterpart(self, word: str) -> str | None: ...


@dataclass
class PairLexicon:
    """A minimal lexicon from [male, female] pairs; used when :mod:`context_cda.cda.lexicon` is unavailable."""

    pairs: Sequence[tuple[str, str]]
    male_words: set[str] = field(init=False)
    female_words: set[str] = field(init=False)

    def __post_init__(self) -> None:
        self._map: dict[str, str] = {}
        self.male_words, self.female_words = set(), set()
        for m, f in self.pairs:
            m, f = m.lower(), f.lower()
            self.male_words.add(m)
            self.female_words.add(f)
            self._map.setdefault(m, f)
            self._map.setdefault(f, m)

    def counterpart(self, word: str) -> str | None:
        return self._map.get(word.lower())


DEFAULT_PAIRS: tuple[tuple[str, str], ...] = tuple(
    tuple(p.split("/"))  # type: ignore[misc]
    for p in (
        "he/she him/her his/her himself/herself man/woman men/women boy/girl boys/girls father/mother "
        "fathers/mothers son/daughter sons/daughters brother/sister brothers/sisters husband/wife "
        "husbands/wives king/queen kings/queens mr/mrs sir/madam uncle/aunt uncles/aunts nephew/niece "
        "gentleman/lady gentlemen/ladies boyfriend/girlfriend male/female males/females prince/princess "
        "actor/actress actors/actresses grandfather/grandmother grandson/granddaughter dad/mom daddy/mommy "
        "lord/lady duke/duchess emperor/empress monk/nun groom/bride widower/widow waiter/waitress "
        "stepfather/stepmother stepson/stepdaughter fiance/fiancee heir/heiress hero/heroine host/hostess "
        "masculine/feminine paternal/maternal manhood/womanhood brotherhood/sisterhood guy/gal guys/gals"
    ).split()
)


def default_lexicon() -> PairLexicon:
    return PairLexicon(DEFAULT_PAIRS)


def swap_terms(value: Any) -> list[str]:
    """A table cell of ``swapped_terms`` as its list of ``"from->to"`` strings: missing (None, NaN) -> ``[]``, a
    bare string -> that one term (not its characters), a list or array -> its items as strings."""
    if value is None or isinstance(value, float):
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def parse_swaps(swapped_terms: Iterable[str] | None) -> list[tuple[str, str]]:
    """``["he->she", "King->Queen"]`` -> ``[("he", "she"), ("king", "queen")]``."""
    out: list[tuple[str, str]] = []
    for s in swap_terms(swapped_terms):
        if isinstance(s, str) and "->" in s:
            a, b = s.split("->", 1)
            out.append((a.strip().lower(), b.strip().lower()))
    return out
