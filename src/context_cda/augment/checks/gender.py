"""Genders: what the CDA swap flipped survives the rephrasing, and nothing flips back.

Words are compared lower-case ("In 1998 she was elected" keeps the flipped "She"). With the swaps (``from->to``
pairs, given or read off the original beside the counterfactual) and the gender lexicon:

* ``gender-contradiction`` (a flip back): the output holds a swapped-from word, or the counterpart of a
  swapped-to word, that the counterfactual does not hold (``mother`` back to ``father``);
* ``gender-contradiction`` (an unattached other gender): the output adds a gendered word of a gender that no
  word of the counterfactual has ("She thanked her mother" -> "... her dad", "... told him");
* an added *pronoun* is fine when it agrees with a gendered person of that gender present in the counterfactual
  ("He called his sister" -> "He called his sister to tell her the news"), unless it also pushes out the
  pronouns of the flipped-to gender (fewer of those than in the counterfactual: "She called his sister");
* ``gender-missing``: no word of a flipped-to gender survives, or fewer than ``min_kept`` of the flipped words
  survive literally (``min_kept=0``: a word of their gender is enough, so "mom" may stand for "mother").

Without swaps (no original given) the counterfactual's own gendered words stand in for the flipped ones.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .words import words

PRONOUNS = frozenset({"he", "she", "him", "her", "his", "hers", "himself", "herself"})


@dataclass(frozen=True)
class GenderIndex:
    """The lexicon's word sets, built once per lexicon (its properties build new sets on every access)."""

    male: frozenset[str]
    female: frozenset[str]
    lexicon: Any
    all: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        object.__setattr__(self, "all", self.male | self.female)

    def gender(self, word: str) -> str | None:
        return "male" if word in self.male else "female" if word in self.female else None

    def of(self, gender: str) -> frozenset[str]:
        return self.male if gender == "male" else self.female

    def counterpart(self, word: str) -> str | None:
        return self.lexicon.counterpart(word)

    def problems(self, output: str, output_words: Sequence[str], counterfactual: str, source_words: Sequence[str],
                 swaps: Sequence[tuple[str, str]], min_kept: float = 0.0) -> list[str]:
        """The gender reasons (the review's attribute check for gender)."""
        return gender_problems(output_words, source_words, swaps, self, min_kept)

    def swaps_from_texts(self, original: str, counterfactual: str) -> list[tuple[str, str]]:
        return swaps_from_texts(original, counterfactual, self)


_INDEX: dict[int, tuple[Any, GenderIndex]] = {}


def gender_index(lexicon: Any) -> GenderIndex:
    hit = _INDEX.get(id(lexicon))
    if hit is not None and hit[0] is lexicon:
        return hit[1]
    idx = GenderIndex(frozenset(w.lower() for w in lexicon.male_words) | {"he", "him", "his", "himself"},
                      frozenset(w.lower() for w in lexicon.female_words) | {"she", "her", "hers", "herself"},
                      lexicon)
    if len(_INDEX) > 64:
        _INDEX.clear()
    _INDEX[id(lexicon)] = (lexicon, idx)
    return idx


def swaps_from_texts(original: str, counterfactual: str, idx: GenderIndex) -> list[tuple[str, str]]:
    """The (from, to) word pairs where the counterfactual differs from the original in a gendered word."""
    a, b = _bases(words(original)), _bases(words(counterfactual))
    out: list[tuple[str, str]] = []
    sm = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op != "replace" or i2 - i1 != j2 - j1:
            continue
        for x, y in zip(a[i1:i2], b[j1:j2], strict=True):
            gx, gy = idx.gender(x), idx.gender(y)
            if gx and gy and gx != gy:
                out.append((x, y))
    return list(dict.fromkeys(out))


def gender_problems(output_words: Sequence[str], source: Sequence[str], swaps: Sequence[tuple[str, str]],
                    idx: GenderIndex, min_kept: float = 0.0) -> list[str]:
    """Every gender reason (see the module docstring) for the output's and the counterfactual's word lists."""
    source = _bases(source)
    output_words = _bases(output_words)
    source_words = frozenset(source)
    src_g = {"male": source_words & idx.male, "female": source_words & idx.female}
    if swaps:
        flipped, forbidden = _swap_sets(tuple(swaps), idx)
    else:  # no swaps known: the counterfactual's gendered words are what must survive
        flipped, forbidden = tuple(w for g in ("male", "female") for w in sorted(src_g[g])), frozenset()
    out_set = set(output_words)
    gendered = out_set & idx.all
    if not gendered and not flipped:
        return []
    reasons = []
    bad = sorted(w for w in (gendered & forbidden) - source_words if not _agrees(w, idx, src_g, source, output_words))
    other = sorted(w for w in gendered - source_words - forbidden if not src_g[idx.gender(w)] and w not in bad)
    if bad or other:
        reasons.append("gender-contradiction: " + ", ".join(bad + other))
    to_genders = {g for b in flipped if (g := idx.gender(b))}
    missing = [g for g in to_genders if not gendered & idx.of(g)]
    distinct = set(flipped)
    kept = sum(b in out_set for b in distinct) / max(1, len(distinct))
    if missing or (flipped and kept < min_kept):
        lost = sorted(b for b in distinct if b not in out_set)
        reasons.append("gender-missing: " + ", ".join(lost or sorted(distinct)))
    return reasons


_CLITIC = re.compile(r"'(?:s|ll|d|re|ve|m)$")


def _bases(ws: Sequence[str]) -> list[str]:
    """``goddess's`` -> ``goddess``, ``she'll`` -> ``she`` (the lexicon holds the bare words)."""
    return [_CLITIC.sub("", w) for w in ws]


_SWAP_SETS: dict[tuple[int, int, tuple[tuple[str, str], ...]], tuple[tuple[str, ...], frozenset[str]]] = {}


def _swap_sets(swaps: tuple[tuple[str, str], ...], idx: GenderIndex) -> tuple[tuple[str, ...], frozenset[str]]:
    """(the flipped-to gendered words, the flip-back words) of ``swaps``, computed once per swap list."""
    key = (hash(idx.male), hash(idx.female), swaps)  # frozensets keep their hash
    hit = _SWAP_SETS.get(key)
    if hit is None:
        flipped = tuple(b for _, b in swaps if idx.gender(b))
        forbidden = {a for a, _ in swaps} | {c for _, b in swaps if (c := idx.counterpart(b))}
        hit = (flipped, frozenset(forbidden - {b for _, b in swaps}))
        if len(_SWAP_SETS) > 4096:
            _SWAP_SETS.clear()
        _SWAP_SETS[key] = hit
    return hit


def _agrees(word: str, idx: GenderIndex, src_g: dict[str, set[str]], source: Sequence[str],
            output_words: Sequence[str]) -> bool:
    """An added pronoun that refers to a gendered person of its gender already in the counterfactual."""
    g = idx.gender(word)
    if word not in PRONOUNS or g is None:
        return False
    nouns = src_g[g] - PRONOUNS
    if not nouns:
        return False
    other = "female" if g == "male" else "male"
    def pronouns(ws: Sequence[str]) -> int:
        return sum(1 for w in ws if w in PRONOUNS and idx.gender(w) == other)

    return pronouns(output_words) >= pronouns(source)
