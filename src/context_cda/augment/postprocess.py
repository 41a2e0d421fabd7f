"""Clean a generated rephrasing, and the word and lexicon helpers the review (:mod:`.checks`) builds on.

:func:`clean` strips what chat models wrap around an answer (preambles such as "Here is the rephrased
sentence:", quotes, markdown, trailing notes, leaked end-of-turn tokens). Whether the cleaned text is acceptable
is decided by :func:`context_cda.augment.review` only; :func:`check` is its one-reason view, kept for callers of
the old interface.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..generation.base import SPECIAL_STOP_TOKENS

_WORD = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)*")

_PREAMBLE = re.compile(
    r"^\s*(?:(?:sure|certainly|of course|okay|ok|absolutely)[!,.]?\s*)?"
    r"(?:(?:here(?:'s| is| are)|this is|below is)\b[^:\n]{0,80}[:\n]"
    r"|(?:rephrased|rephrasing|paraphrased?|rewritten|revised|new|output|answer|result|contextual|sentence|text)"
    r"[^:\n]{0,30}:)\s*",
    re.IGNORECASE,
)
_LEADING_ACK = re.compile(r"^\s*(?:sure|certainly|of course|okay|absolutely)[!.,]\s*", re.IGNORECASE)
_TRAILING_NOTE = re.compile(
    r"\s*(?:\(|\[)?\b(?:note|explanation|this (?:rephrased|rewritten|revised|sentence|version)|i (?:have|kept|added|"
    r"changed|made|hope)|the (?:rephrased|rewritten|revised) sentence)\b.*$",
    re.IGNORECASE | re.DOTALL,
)
_MARKDOWN = re.compile(r"(\*\*|__|`+|^#+\s*|^\s*[-*•]\s+|^\s*\d+[.)]\s+)", re.MULTILINE)
_BOUNDARY = re.compile(r"(?<=[.!?\"”])\s+(?=[(\[A-Z])")
_QUOTES = "\"'“”‘’«»"


def words(text: str) -> list[str]:
    """Lower-case word tokens (letters and inner apostrophes)."""
    return [w.lower().replace("’", "'") for w in _WORD.findall(text)]


def clean(text: str) -> str:
    """Strip preambles, quotes, markdown, leaked special tokens and trailing commentary; keep one paragraph."""
    t = text or ""
    for tok in SPECIAL_STOP_TOKENS:
        t = t.replace(tok, "\n\n")
    t = t.strip()
    t = _LEADING_ACK.sub("", t) if not _PREAMBLE.match(t) else t
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", t) if p.strip()]
    # a lead-in paragraph ("To make it more vivid, I'll rephrase it:") is not the answer: skip to the next one
    while len(paragraphs) > 1 and (paragraphs[0].endswith(":") or not _PREAMBLE.sub("", paragraphs[0]).strip()):
        paragraphs.pop(0)
    t = _PREAMBLE.sub("", paragraphs[0], count=1).strip() if paragraphs else ""
    t = t.split("\n\n")[0]
    t = _MARKDOWN.sub("", t)
    t = " ".join(t.split())
    # a note after the sentence ("... spring. Note: I kept ...", "... spring. (I added ...)")
    for m in _BOUNDARY.finditer(t):
        if _TRAILING_NOTE.match(t[m.end():]):
            t = t[: m.start()]
            break
    return _strip_quotes(t.strip())


def _strip_quotes(t: str) -> str:
    """'"Text."' -> 'Text.'; '"Text".' -> 'Text.'; inner quotes stay."""
    while len(t) >= 2 and t[0] in _QUOTES:
        if t[-1] in _QUOTES:
            t = t[1:-1].strip()
        elif len(t) >= 3 and t[-1] in ".!?" and t[-2] in _QUOTES:
            t = (t[1:-2] + t[-1]).strip()
        else:
            break
    return t


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


@dataclass(frozen=True)
class CheckSettings:
    min_length_ratio: float = 0.8
    max_length_ratio: float = 4.0


def check(output: str, source: str, swaps: Sequence[tuple[str, str]] = (), lexicon: LexiconLike | None = None,
          settings: CheckSettings = CheckSettings(), direction: str | None = None) -> str:
    """'' when :func:`~context_cda.augment.review` accepts ``output`` as a rephrasing of ``source``, else its first
    reason (every check at its default; ``direction`` is not needed: the swaps' genders say it)."""
    from .checks import ReviewSettings, review

    del direction
    rs = ReviewSettings(min_length_ratio=settings.min_length_ratio, max_length_ratio=settings.max_length_ratio)
    verdict = review(None, source, output, lexicon=lexicon, settings=rs, swaps=list(swaps))
    return verdict.reasons[0] if verdict.reasons else ""
