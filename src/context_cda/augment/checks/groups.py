"""The attribute check for n-ary attributes (race, religion), and for gender-neutral rewrites.

Groups (a :class:`~context_cda.cda.groups.GroupLexicon`): the group words of the output and of the counterfactual
are found as the CDA step finds them (:class:`~context_cda.cda.group_swap.GroupSwapper`: in their sense, so
``white wine`` is no race word and ``St Mary's Church`` no religion word). With the swaps (``from->to`` pairs,
given or read off the original beside the counterfactual):

* ``group-missing``: a flipped-to group has no word left in the output (any word of that group will do:
  ``mosque`` may stand for ``mosques``), or fewer than ``min_kept`` of the flipped words survive literally;
* ``group-contradiction`` (a flip back): the output holds a word of a flipped-from group that the counterfactual
  does not hold (``church`` back where the counterfactual says ``mosque``);
* ``group-added``: the output names a group that neither the counterfactual nor the swaps involve (an invented
  ``Muslim`` in a sentence about a synagogue).

Neutral rewrites (``task: neutral``): ``gendered-word-left`` names every gendered word (the gender lexicon's,
pronouns included) still in the output; the words that are their own neutral form (``actor``, ``hero``) do not
count. The content, number, name and negation checks make sure nothing else changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .words import words


@dataclass(frozen=True)
class GroupIndex:
    """A group lexicon's words and its sense-aware finder, built once per lexicon."""

    lexicon: Any
    swapper: Any
    all: frozenset[str] = frozenset()  # every single word of the lexicon (multi-word terms split)

    def problems(self, output: str, output_words: Sequence[str], counterfactual: str, source_words: Sequence[str],
                 swaps: Sequence[tuple[str, str]], min_kept: float = 0.0) -> list[str]:
        clean = [(a.rstrip(".,?!;:"), b.rstrip(".,?!;:")) for a, b in swaps]  # bias-bench's tokens keep their punctuation
        return group_problems(output, counterfactual, clean, self, min_kept)

    def swaps_from_texts(self, original: str, counterfactual: str) -> list[tuple[str, str]]:
        """(from, to) where the counterfactual's group words differ from the original's, in order."""
        a, b = self.terms(original), self.terms(counterfactual)
        return list(dict.fromkeys((x, y) for x, y in zip(a, b, strict=False) if x != y))

    def terms(self, text: str) -> list[str]:
        return self.swapper.find_terms(text)

    def groups_in(self, text: str) -> dict[int, set[str]]:
        out: dict[int, set[str]] = {}
        for w in self.terms(text):
            out.setdefault(self.lexicon.group[w], set()).add(w)
        return out


_INDEX: dict[int, tuple[Any, Any]] = {}


def group_index(lexicon: Any) -> GroupIndex:
    hit = _INDEX.get(id(lexicon))
    if hit is not None and hit[0] is lexicon:
        return hit[1]
    from ...cda.group_swap import GroupSwapper

    idx = GroupIndex(lexicon, GroupSwapper(lexicon), frozenset(p for w in lexicon.words for p in w.replace("-", " ").split()))
    if len(_INDEX) > 64:
        _INDEX.clear()
    _INDEX[id(lexicon)] = (lexicon, idx)
    return idx


def group_problems(output: str, counterfactual: str, swaps: Sequence[tuple[str, str]], idx: GroupIndex,
                   min_kept: float = 0.0) -> list[str]:
    """Every group reason (see the module docstring) of ``output`` for ``counterfactual``."""
    group = idx.lexicon.group
    have, src = idx.groups_in(output), idx.groups_in(counterfactual)
    flipped = [b for _, b in swaps if b in group] or sorted(w for ws in src.values() for w in ws)
    from_groups = {group[a] for a, _ in swaps if a in group}
    to_groups = {group[b] for b in flipped}
    reasons = []
    back = sorted(w for g in from_groups - set(src) for w in have.get(g, ()))
    if back:
        reasons.append("group-contradiction: " + ", ".join(back))
    added = sorted(w for g, ws in have.items() if g not in src and g not in from_groups for w in ws)
    if added:
        reasons.append("group-added: " + ", ".join(added))
    out_words = {w for ws in have.values() for w in ws}
    distinct = sorted(set(flipped))
    kept = sum(w in out_words for w in distinct) / max(1, len(distinct))
    if any(g not in have for g in to_groups) or (distinct and kept < min_kept):
        lost = [w for w in distinct if w not in out_words]
        reasons.append("group-missing: " + ", ".join(lost or distinct))
    return reasons


# ------------------------------------------------------------------------------------------------ neutral


@dataclass(frozen=True)
class NeutralIndex:
    """The gendered words a neutral rewrite must not keep."""

    gendered: frozenset[str]
    all: frozenset[str] = field(default_factory=frozenset)

    def problems(self, output: str, output_words: Sequence[str], counterfactual: str, source_words: Sequence[str],
                 swaps: Sequence[tuple[str, str]], min_kept: float = 0.0) -> list[str]:
        left = [w for w in dict.fromkeys(bases(output_words)) if w in self.gendered]
        return ["gendered-word-left: " + ", ".join(left)] if left else []

    def swaps_from_texts(self, original: str, counterfactual: str) -> list[tuple[str, str]]:
        return []


def neutral_index(lexicon: Any) -> NeutralIndex:
    from ...cda.neutral import NEUTRAL

    same = {w for w, n in NEUTRAL.items() if w == n}
    pronouns = {"he", "she", "him", "her", "his", "hers", "himself", "herself"}
    gendered = frozenset({w.lower() for w in (*lexicon.male_words, *lexicon.female_words)} | pronouns) - same
    return NeutralIndex(gendered, gendered)


def bases(ws: Sequence[str]) -> list[str]:
    """Words with a possessive or contraction clitic stripped (the lexicons hold the bare words)."""
    from .gender import _bases

    return _bases(ws)


__all__ = ["GroupIndex", "NeutralIndex", "bases", "group_index", "group_problems", "neutral_index", "words"]
