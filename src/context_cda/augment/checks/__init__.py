"""The review of a generated rephrasing: one function, every failing reason, used by every acceptance path.

``review(original, counterfactual, output)`` cleans ``output`` (:func:`~context_cda.augment.checks.cleanup.clean`)
and runs every check that is switched on; the result is ``Review(accepted, text, reasons)``. The augment stage,
the entropy sampler (:mod:`context_cda.entropy.sampling`), the great-expectations suite at the augment boundary
(:mod:`context_cda.validation.augment`) and ``ccda augment review`` all call it, so they cannot disagree.

Reasons are ``kind`` or ``kind: detail``; the kinds, in the order they are reported, and the switch
(``augment.review.<switch>``) that turns them on:

=====================  ==========  ==============================================================================
kind                   switch      meaning
=====================  ==========  ==============================================================================
empty                  (always)    nothing left after cleaning
refusal                (always)    "I'm sorry, I can't ..."
identical              identical*  the same words as the input (off for the entropy sampler's rephrasings)
script                 script      letters of another script than the input's (:mod:`.script`)
language               language    another language than the input's (py3langid, :mod:`.script`)
number-missing         numbers     a number, year or number word of the input is gone (changed)
number-added           numbers_added  a number or year in digits the input does not hold (an invented date)
entity-missing         entities    a name or month of the input is gone (Berlin -> Paris)
content-missing        content     too few of the input's content words survive (medicine -> law)
negation-added/-removed negation   a not/never/no/n't inserted or dropped
gender-contradiction   gender      a word flipped back, or an other-gender word with no referent (:mod:`.gender`)
gender-missing         gender      the flipped gender is gone
group-contradiction    gender      race, religion: a flipped-from group's word is back (:mod:`.groups`)
group-added            gender      race, religion: a group the sentence does not involve is named
group-missing          gender      race, religion: the flipped-to group is gone
gendered-word-left     gender      neutral rewrites: a gendered word (he, mother, ...) is still there
list                   form        several alternatives (:mod:`.form`)
prompt-echo            form        the instruction or a worked example repeated
meta                   form        talk about the answer ("This rephrased sentence ...")
special-token          form        chat-template tokens left in the text
truncated              truncation  cut off mid-sentence
too-short / too-long   length      outside augment.min_length_ratio .. max_length_ratio
meaning                meaning     the judge says the meaning changed (:mod:`.meaning`)
=====================  ==========  ==============================================================================

``identical*``: a :class:`ReviewSettings` field only, not in ``augment.review``: the augment stage always checks it,
:meth:`ReviewSettings.for_samples` turns it off.

The attribute check (switch ``gender``) follows the run's attribute (:attr:`ReviewSettings.attribute`, and the
lexicon given): gender pairs (:mod:`.gender`), or race / religion groups (:mod:`.groups`); with
``task="neutral"`` (the neutral rewrite of the context-neutral arm) it checks that no gendered word is left.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from .cleanup import clean
from .form import (
    content_share,
    echo_problem,
    is_refusal,
    length_problem,
    list_problem,
    meta_problem,
    special_token_problem,
    truncation_problem,
)
from .gender import gender_index
from .groups import group_index, neutral_index
from .meaning import meaning_problems
from .script import language_problem, script_problem
from .text import TOKEN, input_facts, negation_count, numbers, prefix_set
from .words import default_lexicon, parse_swaps, words

REASON_KINDS = (
    "empty", "refusal", "identical", "script", "language", "number-missing", "number-added", "entity-missing", "content-missing",
    "negation-added", "negation-removed", "gender-contradiction", "gender-missing", "group-contradiction",
    "group-added", "group-missing", "gendered-word-left", "list", "prompt-echo", "meta", "special-token", "truncated",
    "too-short", "too-long", "meaning",
)


def _default_prompt_texts() -> tuple[str, ...]:
    from .. import prompts

    return prompts.prompt_texts()


def _default_prompt_examples() -> tuple[tuple[str, str], ...]:
    from .. import prompts

    return prompts.prompt_examples()


@dataclass(frozen=True)
class ReviewSettings:
    """Which checks run and their thresholds (``augment.review`` plus the length ratios; see the config help)."""

    script: bool = True
    script_min_share: float = 0.9
    language: bool = True
    language_min_confidence: float = 0.9
    numbers: bool = True
    numbers_min_kept: float = 1.0
    numbers_added: bool = True
    entities: bool = True
    entities_min_kept: float = 1.0
    content: bool = True
    content_min_kept: float = 0.6
    negation: bool = True
    negation_max_change: int = 0
    gender: bool = True
    gender_min_kept: float = 0.0
    form: bool = True
    form_echo_words: int = 5
    truncation: bool = True
    length: bool = True
    min_length_ratio: float = 0.8
    max_length_ratio: float = 4.0
    identical: bool = True
    meaning: str = "off"
    meaning_threshold: float = 0.65
    meaning_rule: str = "not-contradict"
    prompt_texts: tuple[str, ...] | None = None  # None: the augment prompts (every version, retry feedback)
    prompt_examples: tuple[tuple[str, str], ...] | None = None  # None: the augment prompts' worked examples
    attribute: str = "gender"  # the run's attribute: what the attribute check (switch ``gender``) looks at
    task: str = "rephrase"  # rephrase (augment, the sampler) | neutral (the neutral rewrite)

    @classmethod
    def from_config(cls, augment: Any, attribute: str = "gender", task: str = "rephrase") -> ReviewSettings:
        """From an ``AugmentConfig`` (its ``review`` section and length ratios) and the run's attribute; ``task``
        neutral: the neutral rewrite's review (:meth:`for_neutral`)."""
        names = {f.name for f in fields(cls)}
        data = {k: v for k, v in augment.review.model_dump().items() if k in names}
        out = cls(**data, min_length_ratio=augment.min_length_ratio, max_length_ratio=augment.max_length_ratio,
                  attribute=attribute)
        return out.for_neutral() if task == "neutral" else out

    def for_neutral(self) -> ReviewSettings:
        """The neutral rewrite's review: no gendered word left and nothing else changed (every content word,
        name, number and negation kept; about the input's length, 0.7x to 1.6x)."""
        return replace(self, task="neutral", content_min_kept=max(self.content_min_kept, 0.8),
                       min_length_ratio=0.7, max_length_ratio=1.6)

    @classmethod
    def for_samples(cls, base: ReviewSettings | None = None, prompt_texts: tuple[str, ...] | None = None,
                    prompt_examples: tuple[tuple[str, str], ...] = ()) -> ReviewSettings:
        """The entropy sampler's review: only *broken* outputs are dropped (empty, refusal, other script or
        language, lists, prompt echo, meta text, special tokens). Meaning, content, gender and length changes
        stay: they are what semantic entropy measures."""
        b = base or cls()
        return replace(b, numbers=False, numbers_added=False, entities=False, content=False, negation=False, gender=False,
                       truncation=False, length=False, identical=False, meaning="off",
                       prompt_texts=prompt_texts if prompt_texts is not None else b.prompt_texts,
                       prompt_examples=prompt_examples)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for key in ("attribute", "task"):  # the defaults are left out: a gender run's keys stay as they were
            if d[key] == getattr(ReviewSettings, key):
                del d[key]
        d["prompt_texts"] = list(self.prompts())
        d["prompt_examples"] = [list(e) for e in self.examples()]
        return d

    def prompts(self) -> tuple[str, ...]:
        return self.prompt_texts if self.prompt_texts is not None else _default_prompt_texts()

    def examples(self) -> tuple[tuple[str, str], ...]:
        return self.prompt_examples if self.prompt_examples is not None else _default_prompt_examples()


@dataclass(frozen=True)
class Review:
    """The verdict on one output: accepted, the cleaned text, and every failing reason."""

    accepted: bool
    text: str
    reasons: tuple[str, ...] = ()

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(r.split(":", 1)[0] for r in self.reasons)

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)


def review(original: str | None, counterfactual: str, output: str, *, lexicon: Any = None, judge: Any = None,
           settings: ReviewSettings | None = None, swaps: Sequence[tuple[str, str]] | Sequence[str] | None = None,
           finish_reason: str | None = None) -> Review:
    """Review one generated ``output`` for ``counterfactual`` (see the module docstring).

    ``original`` (optional) is the sentence before the CDA swap: with it, and without ``swaps`` (``["he->she"]``
    or ``[("he", "she")]``), the swapped words are read off the two texts. ``judge``: a meaning judge (the
    entropy stage's), used when ``settings.meaning`` is not ``off``. ``finish_reason``: the engine's (``length``
    marks a completion cut at the token limit).
    """
    return review_many([original], [counterfactual], [output], lexicon=lexicon, judge=judge, settings=settings,
                       swaps=None if swaps is None else [swaps], finish_reasons=[finish_reason])[0]


def review_many(originals: Sequence[str | None], counterfactuals: Sequence[str], outputs: Sequence[str], *,
                lexicon: Any = None, judge: Any = None, settings: ReviewSettings | None = None,
                swaps: Sequence[Any] | None = None, finish_reasons: Sequence[str | None] | None = None
                ) -> list[Review]:
    """:func:`review` for many outputs; the meaning judge sees all of them in one batched call."""
    s = settings or ReviewSettings()
    idx = attribute_index(lexicon, s)
    n = len(outputs)
    swaps = list(swaps) if swaps is not None else [None] * n
    finish = list(finish_reasons) if finish_reasons is not None else [None] * n
    prompts = (s.prompts(), s.examples()) if s.form else ((), ())
    texts, reasons = [], []
    for orig, cf, out, sw, fr in zip(originals, counterfactuals, outputs, swaps, finish, strict=True):
        orig = orig if isinstance(orig, str) and orig else None  # missing (None, NaN) in a table
        cf, out = _text(cf), _text(out)
        t, r = _rules(orig, cf, out, _swap_pairs(sw, orig, cf, idx), fr, idx, s, prompts)
        texts.append(t)
        reasons.append(r)
    if s.meaning != "off" and judge is not None:
        todo = [i for i in range(n) if texts[i]]
        found = meaning_problems(judge, [(_text(counterfactuals[i]), texts[i]) for i in todo], s.meaning_threshold,
                                 s.meaning_rule)
        for i, why in zip(todo, found, strict=True):
            if why:
                reasons[i].append(why)
    return [Review(not r, t, tuple(r)) for t, r in zip(texts, reasons, strict=True)]


def attribute_index(lexicon: Any, settings: ReviewSettings) -> Any:
    """What the attribute check compares with: the gender pairs (:class:`.gender.GenderIndex`), the groups of a
    race / religion lexicon (:class:`.groups.GroupIndex`; the attribute's default lexicon when none is given) or,
    for a neutral rewrite, the gendered words (:class:`.groups.NeutralIndex`)."""
    if settings.task == "neutral":
        return neutral_index(lexicon or default_lexicon())
    if lexicon is not None and hasattr(lexicon, "groups"):
        return group_index(lexicon)
    if settings.attribute != "gender":
        return group_index(_default_groups(settings.attribute))
    return gender_index(lexicon or default_lexicon())


@functools.lru_cache(maxsize=4)
def _default_groups(attribute: str) -> Any:
    """The attribute's default group lexicon (for a review called without one)."""
    from ...cda.groups import DEFAULT_GROUPS, build_groups, default_rows

    return build_groups(attribute, DEFAULT_GROUPS[attribute], default_rows(attribute), source="default")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _swap_pairs(sw: Any, original: str | None, cf: str, idx: Any) -> list[tuple[str, str]]:
    """The given swaps (``"he->she"`` strings or pairs); none given (None, NaN, an empty list): read off the
    original and the counterfactual, when the original is known."""
    if isinstance(sw, str | float) or (sw is not None and len(sw) and isinstance(next(iter(sw)), str)):
        got = parse_swaps(sw)
    else:
        got = [(a.lower(), b.lower()) for a, b in sw] if sw is not None else []
    if got:
        return got
    return idx.swaps_from_texts(original, cf) if original else []


def _rules(original: str | None, cf: str, raw: str, swaps: list[tuple[str, str]], finish_reason: str | None,
           idx: Any, s: ReviewSettings, prompts: tuple[tuple[str, ...], tuple[tuple[str, str], ...]]
           ) -> tuple[str, list[str]]:
    """The cleaned text and the rule-based reasons, in :data:`REASON_KINDS` order."""
    text = clean(raw)
    if not any(c.isalnum() for c in text):
        return "", ["empty"]
    facts = input_facts(cf, idx.all)
    ow = words(text)
    out: list[str] = []
    if is_refusal(text):
        out.append("refusal")
    if s.identical and " ".join(ow) == facts.norm:
        out.append("identical")
    if s.script and (why := script_problem((original or "") + " " + cf, text, s.script_min_share)):
        out.append(why)
    elif s.language and (why := language_problem(cf, text, s.language_min_confidence, facts.words, ow)):
        out.append(why)
    out += _content(text, ow, facts, s)
    if s.gender:
        out += idx.problems(text, ow, cf, facts.words, swaps, s.gender_min_kept)
    if s.form:
        out += [r for r in (list_problem(raw, facts.stems),
                            echo_problem(text, ow, facts.words, *prompts, s.form_echo_words, idx.all),
                            meta_problem(text, cf, facts.word_set, ow), special_token_problem(text, cf)) if r]
    if s.truncation and (why := truncation_problem(text, ow, raw, finish_reason, facts.ends_sentence)):
        out.append(why)
    if s.length and (why := length_problem(text, cf, s.min_length_ratio, s.max_length_ratio)):
        out.append(why)
    return text, out


def _kept(need: Sequence[str], have: Any) -> tuple[float, list[str]]:
    missing = [x for x in need if x not in have]
    return (1.0 - len(missing) / len(need) if need else 1.0), missing


def _content(text: str, ow: list[str], facts: Any, s: ReviewSettings) -> list[str]:
    """number-missing, number-added, entity-missing, content-missing, negation-added/-removed."""
    out = []
    if s.numbers and facts.numbers:
        share, missing = _kept(sorted(facts.numbers), numbers(text, ow))
        if share < s.numbers_min_kept:
            out.append("number-missing: " + ", ".join(missing))
    if s.numbers_added and (added := numbers(text, ()) - facts.numbers):
        out.append("number-added: " + ", ".join(sorted(added)))
    if s.entities and facts.names:
        have = {t.lower().replace("’", "'").removesuffix("'s") for t in TOKEN.findall(text)}
        share, missing = _kept(facts.names, have)
        if share < s.entities_min_kept:
            out.append("entity-missing: " + ", ".join(missing))
    if s.content and facts.stems:
        got = prefix_set(ow)
        if content_share(got, facts.stems) < s.content_min_kept:
            out.append("content-missing: " + ", ".join(c for c, st in zip(facts.content, facts.stems, strict=True)
                                                        if st not in got))
    if s.negation:
        n_out, found = negation_count(text, ow)
        if n_out - facts.negations > s.negation_max_change:
            out.append("negation-added: " + ", ".join(dict.fromkeys(found)))
        elif facts.negations - n_out > s.negation_max_change:
            out.append("negation-removed")
    return out


__all__ = ["REASON_KINDS", "Review", "ReviewSettings", "review", "review_many"]
