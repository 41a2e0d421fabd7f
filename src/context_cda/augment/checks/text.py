"""What the checks read from a text: words, numbers, names, content words, negations (pure, cached per input).

Everything here is rule-based and English-centred (the pipeline's corpora are English); the language check
(:mod:`.script`) makes sure an output is in the input's language before these rules compare the two.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from .words import words

TOKEN = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")
_DIGITS = re.compile(r"\d+(?:[.,:]\d+)*")

#: function words (and auxiliaries): never "content", never a name when capitalised
STOPWORDS = frozenset(
    """a about above across after afterwards again against all almost alone along already also although always am
    among an and another any anyone anything anyway anywhere are around as at back be became because become becomes
    been before beforehand behind being below beside besides between beyond both but by can could did do does doing
    done down during each either else elsewhere enough even ever every everyone everything everywhere except few
    for former formerly from further had has have having hence her here hereafter hers herself him himself his how
    however i if in indeed into is it its itself just last latter least less many may me meanwhile might mine more
    moreover most mostly much must my myself namely neither never nevertheless next no nobody none noone nor not
    nothing now nowhere of off often on once one only onto or other others otherwise our ours ourselves out over own
    per perhaps please quite rather really same several she should since so some somehow someone something sometime
    sometimes somewhere still such than that the their theirs them themselves then thence there thereafter thereby
    therefore therein these they this those though through throughout thus to together too toward towards under
    until up upon us very via was we well were what whatever when whence whenever where whereas wherever whether
    which while who whoever whole whom whose why will with within without would yet you your yours yourself
    yourselves he said says say also got get gets let lets like make made way ways yes oh ok okay mr mrs ms dr prof
    st mt jr sr vs etc day days time times year years later today tonight yesterday tomorrow""".split()
)

MONTHS = frozenset(
    "january february march april may june july august september october november december monday tuesday "
    "wednesday thursday friday saturday sunday".split()
)

#: number words -> the digits they stand for ("one" is left out: it is mostly a pronoun or article)
NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        "zero _ two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split()
    )
    if w != "_"
}
NUMBER_WORDS.update({"thirty": "30", "forty": "40", "fifty": "50", "sixty": "60", "seventy": "70",
                     "eighty": "80", "ninety": "90", "hundred": "100", "thousand": "1000", "million": "1000000",
                     "billion": "1000000000", "dozen": "12", "first": "1", "third": "3", "fourth": "4",
                     "fifth": "5", "sixth": "6", "seventh": "7", "eighth": "8", "ninth": "9", "tenth": "10",
                     "eleventh": "11", "twelfth": "12", "twice": "2", "half": "0.5"})

NEGATIONS = frozenset("not no never nobody nothing nowhere neither nor none cannot nope".split())
_NOT_ONLY = re.compile(r"\bnot\s+only\b", re.IGNORECASE)


def stem(word: str) -> str:
    """A crude prefix stem: possessive and plural s dropped, then at most 5 letters (law/lawyer, fans/fan)."""
    w = word.lower().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    return w[:5]


def prefix_set(tokens: Sequence[str]) -> set[str]:
    """Every 3..5-letter prefix of ``tokens`` (lower-case): what a :func:`stem` of 3 to 5 letters matches."""
    return {t[:k] for t in tokens for k in (3, 4, 5) if len(t) >= k}


def numbers(text: str, ws: Sequence[str] | None = None) -> frozenset[str]:
    """Digits (thousands separators dropped, '3.50' kept) and number words mapped to digits (``ws``: the
    text's :func:`words`, when already at hand)."""
    out = {m.group(0).replace(",", "").rstrip(".:") for m in _DIGITS.finditer(text)}
    out.update(d for w in (words(text) if ws is None else ws) if (d := NUMBER_WORDS.get(w)) is not None)
    return frozenset(out)


def negation_count(text: str, ws: Sequence[str] | None = None) -> tuple[int, list[str]]:
    """How many negations ``text`` holds (not only ... does not count), and which."""
    ws = words(text) if ws is None else ws
    found = [w for w in ws if w in NEGATIONS or w.endswith("n't")]
    if "only" in ws and "not" in found:
        for _ in _NOT_ONLY.finditer(text):
            found.remove("not")
    return len(found), found


def names(text: str, gendered: frozenset[str]) -> list[str]:
    """Capitalised words inside a sentence (not at its start, opening quotes aside), plus capitalised months and days.

    Function words, titles and gendered lexicon words are not names (the gender check covers the latter).
    """
    out: list[str] = []
    for m in TOKEN.finditer(text):
        tok = m.group(0)
        if not tok[0].isupper():
            continue
        low = tok.lower().replace("’", "'")
        if low.endswith("'s"):
            low = low[:-2]
        if low in MONTHS:
            out.append(low)
            continue
        if low in STOPWORDS or low in gendered or len(low) < 2:
            continue
        start = m.start()
        before = text[max(0, start - 6): start].rstrip(" \"“‘'([")
        if not before or before.endswith((".", "!", "?", ":", ";")):  # a sentence starts here
            continue
        out.append(low)
    return list(dict.fromkeys(out))


# endings of contracted words; ``words`` turns ’ into ', so one spelling covers both
CONTRACTIONS = ("n't", "'re", "'m", "'ll", "'ve", "'d")


def content_words(ws: Sequence[str], exclude: frozenset[str]) -> list[str]:
    """Lower-case content words of the word list ``ws``: not function words, not -ly/-ing/-ed forms (verbs and
    adverbs are what a rephrasing changes), not shorter than 3 letters, not in ``exclude`` (names, gendered
    words), not a contraction (didn't, they're, I'm, we'll, I've, he'd: the expansion "did not" is as good; the
    negation check sees n't)."""
    out = []
    for w in ws:
        base = w[:-2] if w.endswith("'s") else w
        if (len(base) < 3 or base.endswith(CONTRACTIONS) or base in STOPWORDS or base in exclude or base in NUMBER_WORDS
                or base.endswith(("ly", "ing", "ed"))):
            continue
        out.append(base)
    return list(dict.fromkeys(out))


@dataclass(frozen=True)
class InputFacts:
    """What the rules compare an output against, computed once per input text (and lexicon)."""

    text: str
    words: tuple[str, ...]
    norm: str
    word_set: frozenset[str]
    numbers: frozenset[str]
    names: tuple[str, ...]
    content: tuple[str, ...]
    stems: tuple[str, ...]  # stem of each content word
    negations: int
    ends_sentence: bool


@lru_cache(maxsize=8192)
def input_facts(text: str, gendered: frozenset[str]) -> InputFacts:
    ws = words(text)
    nm = names(text, gendered)
    content = content_words(ws, frozenset(nm) | gendered)
    return InputFacts(
        text=text,
        words=tuple(ws),
        norm=" ".join(ws),
        word_set=frozenset(ws),
        numbers=numbers(text, ws),
        names=tuple(nm),
        content=tuple(content),
        stems=tuple(stem(c) for c in content),
        negations=negation_count(text, ws)[0],
        ends_sentence=text.rstrip().endswith((".", "!", "?", '"', "”", "'", "’", ")")),
    )
