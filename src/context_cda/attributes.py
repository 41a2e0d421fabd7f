"""The attributes a run can debias (``run.attribute``): one run, one attribute.

``gender`` is binary in the lexicon (male/female pairs with rule-resolved pronouns, :mod:`context_cda.cda.lexicon`);
``race`` and ``religion`` have n groups (aligned rows of one word per group, :mod:`context_cda.cda.groups`). Each
attribute names the bias type of the benchmarks that judge it (StereoSet's spelling; CrowS-Pairs spells race
``race-color``, as bias-bench maps it: :data:`context_cda.evaluate.data.CROWS_ALIASES`) and how prompts describe
it. This module is pure data: the config, the prompts, the reviews and the evaluation read it, and the swappers and
WinoBias read its closed word class (:data:`CLOSED_CLASS`, the next-word rule of *her* and *his*).
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ConfigError


@dataclass(frozen=True)
class Attribute:
    name: str
    stereoset: str  # StereoSet's bias type (CrowS-Pairs': evaluate.data.CROWS_ALIASES maps it)
    described: str  # how a prompt names it ("every person's {described}")
    words: str  # examples of its words, for prompts
    binary: bool = False  # gender: one counterpart per word


ATTRIBUTES: dict[str, Attribute] = {
    "gender": Attribute("gender", "gender", "gender", "pronouns and gendered words", binary=True),
    "race": Attribute("race", "race", "race or ethnicity",
                      "words such as Black, white, Asian, Hispanic"),
    "religion": Attribute("religion", "religion", "religion",
                          "words such as Jewish, Christian, Muslim, church, mosque, synagogue"),
}
NAMES: tuple[str, ...] = tuple(ATTRIBUTES)


def get(name: str) -> Attribute:
    try:
        return ATTRIBUTES[name]
    except KeyError:
        raise ConfigError(f"run.attribute: unknown attribute {name!r}; use one of {', '.join(NAMES)}.") from None


def bias_type(attribute: str) -> str:
    """The ``evaluate.bias_type`` that judges ``attribute`` (StereoSet's name; CrowS maps race to race-color)."""
    return get(attribute).stereoset


#: words after which ``her`` is an object and ``his`` a standalone pronoun
CLOSED_CLASS: frozenset[str] = frozenset(
    """
    a an the this that these those some any no every each all both either neither another such
    to of in on at by for from with without about against between into through during before after above below
    up down out off over under again further then once here there when where why how as than so too very
    and or but nor yet because if unless while although though since until whether
    i me my mine you your yours he him his she her hers it its we us our ours they them their theirs
    myself yourself himself herself itself ourselves themselves who whom whose which what
    is are was were be been being am has have had do does did will would shall should can could may might must
    not never also just only even still already now today tomorrow yesterday back away home around along across
    well alone instead together anyway afterwards later soon""".split()
)
