"""Token-aware gender swapping.

One compiled regular expression (a trie of the lexicon, so matching costs one pass over the text) finds every
lexicon word as a whole word; a callback replaces it, keeping

* case: ``he -> she``, ``He -> She``, ``HE -> SHE`` (lower, title and all-caps forms are matched and copied;
  other mixed-case spellings such as ``hE`` are left alone);
* punctuation and possessives: the match is the bare word, so ``man's -> woman's``, ``men's -> women's``,
  ``"Her," -> "His,"``; hyphenated compounds swap their gendered part (``ex-husband -> ex-wife``);
* pronoun roles, by the **next-word rule** (documented in docs/cda.md and tested on tricky cases):

  - ``her`` is an *object* (-> ``him``) when the next token is the end of the sentence, punctuation, or a
    closed-class word that cannot start the noun phrase ``her`` would determine (prepositions, conjunctions,
    determiners, pronouns, particles and adverbs such as *to, and, that, the, a, up, again, back*);
    otherwise it is a *possessive determiner* (-> ``his``): ``her car``, ``her own``, ``her first book``;
  - ``his`` is a *determiner* (-> ``her``) before a word that can start a noun phrase, and a *pronoun*
    (-> ``hers``) before punctuation, the end or a closed-class word (``the book is his.``, ``his and mine``).

The rule is deterministic and fast; its known failure mode is an object ``her`` before a bare noun phrase
(``gave her flowers`` -> ``gave his flowers``), which no next-word rule can resolve.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..attributes import CLOSED_CLASS
from .lexicon import PRONOUNS, Lexicon

_WORD_AFTER = re.compile(r"\s*([A-Za-z][A-Za-z'-]*|\S)?")
_STRIP_POSS = re.compile(r"('s|')$", re.IGNORECASE)


def _trie_pattern(words: Iterable[str]) -> str:
    """A regex alternation factored by common prefixes (much faster than a flat alternation)."""
    trie: dict = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict) -> str:
        branches = [re.escape(ch) + emit(child) for ch, child in sorted(node.items()) if ch != ""]
        if not branches:
            return ""
        alt = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if "" in node:  # a word ends here and longer words continue: the continuation is optional
            return f"(?:{alt})?" if len(branches) == 1 else alt + "?"
        return alt

    return emit(trie)


def match_case(source: str, target: str) -> str:
    """Copy the case pattern of ``source`` onto ``target``."""
    if source.islower():
        return target
    if source.isupper() and len(source) > 1:
        return target.upper()
    if source[:1].isupper():
        return target[:1].upper() + target[1:]
    return target


@dataclass
class SwapResult:
    text: str
    swaps: list[tuple[str, str]] = field(default_factory=list)  # (from, to) as they appeared

    @property
    def n_swaps(self) -> int:
        return len(self.swaps)


@dataclass
class Counterfactual:
    """One counterfactual of a sentence: ``tag`` names its mapping (empty for gender's one counterfactual; ``k1``
    for the first group shift of an n-ary attribute), ``mapping`` the group each group went to."""

    tag: str
    result: SwapResult
    mapping: dict[int, int] = field(default_factory=dict)


class Swapper:
    """Swap gendered words of a :class:`Lexicon` (and optionally first names) in text."""

    def __init__(
        self,
        lexicon: Lexicon,
        names: dict[str, str] | None = None,
        her_rule: str = "context",
    ) -> None:
        self.lexicon = lexicon
        self.her_rule = her_rule
        self.names = names or {}
        self._table: dict[str, str] = {**lexicon.m2f, **lexicon.f2m}
        for w, roles in PRONOUNS.items():
            if len(roles) == 1:
                self._table[w] = next(iter(roles.values()))
        self._male = lexicon.male_words
        for w in list(self._table):  # "mr." matches as "mr" (the dot stays in the text)
            if w.endswith("."):
                self._table.setdefault(w.rstrip("."), self._table[w].rstrip("."))
                del self._table[w]
        def forms(w: str) -> tuple[str, ...]:
            return (w, w[:1].upper() + w[1:], w.upper())

        # every unambiguous surface form -> its cased replacement, precomputed (the hot path is one dict lookup)
        self._direct: dict[str, str] = {}
        self._gender: dict[str, str] = {}  # surface form -> "m2f" | "f2m" (lexicon words only)
        for w, target in self._table.items():
            for f in forms(w):
                self._direct[f] = match_case(f, target)
                self._gender[f] = "m2f" if w in self._male else "f2m"
        for f in forms("her") + forms("his"):
            self._gender[f] = "m2f" if f.lower() == "his" else "f2m"
        name_forms = set()
        for w, target in self.names.items():
            if w in self._table or w in ("her", "his"):
                continue
            for f in forms(w)[1:]:  # names only when capitalised (avoid "will", "may", "mark")
                self._direct[f] = match_case(f, target)
                name_forms.add(f)
        # Case-sensitive over the lower, Title and UPPER forms: ~2x faster than re.IGNORECASE on CPython.
        variants = set(self._direct) | set(forms("her")) | set(forms("his"))
        self._pattern = re.compile(r"\b(?:" + _trie_pattern(variants) + r")\b")
        self._term_pattern = re.compile(r"\b(?:" + _trie_pattern(variants - name_forms) + r")\b")

    # -------------------------------------------------------------------------------------------- rules

    def _next_word(self, text: str, end: int) -> str | None:
        m = _WORD_AFTER.match(text, end)
        tok = m.group(1) if m else None
        return tok.lower() if tok else None

    def _resolve(self, low: str, text: str, end: int) -> str:
        if low == "her":
            if self.her_rule == "possessive":
                return "his"
            if self.her_rule == "object":
                return "him"
            nxt = self._next_word(text, end)
            return "him" if nxt is None or not nxt[0].isalpha() or nxt in CLOSED_CLASS else "his"
        if low == "his":
            nxt = self._next_word(text, end)
            return "hers" if nxt is None or not nxt[0].isalpha() or nxt in CLOSED_CLASS else "her"
        return self._table[low]

    # -------------------------------------------------------------------------------------------- api

    def swap(self, text: str) -> SwapResult:
        swaps: list[tuple[str, str]] = []
        append = swaps.append
        direct = self._direct

        def repl(m: re.Match[str]) -> str:
            word = m.group(0)
            out = direct.get(word)
            if out is None:  # her / his: resolved by the next word
                out = match_case(word, self._resolve(word.lower(), m.string, m.end()))
            append((word, out))
            return out

        return SwapResult(self._pattern.sub(repl, text), swaps)

    def find_terms(self, text: str) -> list[str]:
        """Lexicon words (lower-case) present in ``text``, in order (names excluded)."""
        return [w.lower() for w in self._term_pattern.findall(text)]

    def counterfactuals(self, text: str, row_id: str = "") -> tuple[list[Counterfactual], list[tuple[str, str]]]:
        """The one counterfactual of ``text`` (none without a swap), and no word left alone: the interface the
        cda stage shares with :class:`~context_cda.cda.group_swap.GroupSwapper`."""
        res = self.swap(text)
        return ([Counterfactual("", res)] if res.swaps else []), []

    def direction(self, swaps: list[tuple[str, str]]) -> str:
        """m2f | f2m when every swapped lexicon word went one way, mixed otherwise, none without any."""
        gender = self._gender
        kinds = {gender[src] for src, _ in swaps if src in gender}
        if not kinds:
            return "none"
        return kinds.pop() if len(kinds) == 1 else "mixed"


def cds_decision(row_id: str, seed: int, probability: float) -> bool:
    """Counterfactual data *substitution*: whether this row is swapped, reproducibly from (seed, id)."""
    return random.Random(f"{seed}:{row_id}").random() < probability
