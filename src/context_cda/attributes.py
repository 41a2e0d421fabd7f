"""The attributes a run can debias (``run.attribute``): one run, one attribute.

``gender`` is binary in the lexicon (male/female pairs with rule-resolved pronouns, :mod:`context_cda.cda.lexicon`);
``race`` and ``religion`` have n groups (aligned rows of one word per group, :mod:`context_cda.cda.groups`). Each
attribute names the bias type of the benchmarks that judge it (StereoSet's spelling; CrowS-Pairs spells race
``race-color``, as bias-bench maps it: :data:`context_cda.evaluate.data.CROWS_ALIASES`) and how prompts describe
it. This module is pure data: the config, the prompts, the reviews and the evaluation read it.
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
