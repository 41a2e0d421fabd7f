"""The review's attribute check for race and religion (group survives, no group invented, no flip back) and the
neutral rewrite's review (no gendered word left, nothing else changed), through the settings and lexicon the
calling step passes."""

from __future__ import annotations

from context_cda.augment import ReviewSettings, review
from context_cda.cda.groups import DEFAULT_GROUPS, build_groups, default_rows

RACE = ReviewSettings(attribute="race", meaning="off", language=False)
RELIGION = ReviewSettings(attribute="religion", meaning="off", language=False)
NEUTRAL = ReviewSettings(meaning="off", language=False).for_neutral()


def kinds(original, cf, out, settings, swaps=None, lexicon=None):
    return review(original, cf, out, settings=settings, swaps=swaps, lexicon=lexicon).kinds


def test_the_flipped_group_must_survive():
    cf = "The Asian community gathered outside the library in March."
    assert kinds(None, cf, "On a cold evening in March, the Asian community gathered outside the library.", RACE,
                 ["Black->Asian"]) == ()
    assert "group-missing" in kinds(None, cf, "On a cold evening in March, the community gathered outside the library.",
                                    RACE, ["Black->Asian"])


def test_a_flip_back_is_a_contradiction():
    cf = "The mosque on the hill opened a food bank in 2001."
    out = "After the flood, the church on the hill opened a food bank in 2001."
    assert "group-contradiction" in kinds("The church on the hill opened a food bank in 2001.", cf, out, RELIGION)
    assert kinds(None, cf, "After the flood, the mosque on the hill opened a food bank in 2001.", RELIGION,
                 ["church->mosque"]) == ()


def test_an_invented_group_is_rejected_but_a_colour_is_not():
    cf = "The Hispanic families moved to the valley in 1990."
    base = "In 1990, the Hispanic families moved to the valley"
    assert "group-added" in kinds(None, cf, base + " with their Asian neighbours.", RACE, ["White->Hispanic"])
    assert kinds(None, cf, base + " and painted their houses white.", RACE, ["White->Hispanic"]) == ()
    jewish = "The Jewish school opened a new library in 1990."
    assert "group-added" in kinds(None, jewish, "In 1990, the Jewish school opened a new library beside the mosque.",
                                  RELIGION, ["Christian->Jewish"])
    assert "group-contradiction" in kinds(None, jewish, "In 1990, the Jewish school opened a new library beside the "
                                          "church.", RELIGION, ["Christian->Jewish"])  # the swapped-from group


def test_a_group_lexicon_given_selects_the_group_check():
    lex = build_groups("religion", DEFAULT_GROUPS["religion"], default_rows("religion"), source="default")
    cf = "The synagogue in Ohio opened a food bank in 2001."
    plain = ReviewSettings(meaning="off", language=False)
    assert kinds(None, cf, "In 2001 the synagogue in Ohio opened a busy food bank.", plain, ["church->synagogue"],
                 lexicon=lex) == ()
    assert "group-missing" in kinds(None, cf, "In 2001 the hall in Ohio opened a busy food bank.", plain,
                                    ["church->synagogue"], lexicon=lex)


def test_gender_runs_keep_their_check():
    assert "gender-missing" in kinds("He thanked his father for the advice.", "She thanked her mother for the advice.",
                                     "They thanked their parent for the advice.", ReviewSettings(meaning="off"))


def test_the_neutral_review_wants_no_gendered_word_and_nothing_else_changed():
    src = "In 1998 she moved to Berlin with her brother and his wife."
    assert kinds(None, src, "In 1998 they moved to Berlin with their sibling and their spouse.", NEUTRAL) == ()
    assert kinds(None, src, "In 1998 they moved to Berlin with their brother and their spouse.", NEUTRAL) == (
        "gendered-word-left",)
    assert "number-missing" in kinds(None, src, "In 1999 they moved to Berlin with their sibling and their spouse.",
                                     NEUTRAL)
    assert "entity-missing" in kinds(None, src, "In 1998 they moved to Paris with their sibling and their spouse.",
                                     NEUTRAL)
    assert "too-long" in kinds(None, src, "In 1998 they moved to Berlin with their sibling and their spouse, after a "
                                          "long winter of planning, to open a small bakery near the old station.",
                               NEUTRAL)
    assert kinds(None, "The actor said she was tired.", "The actor said they were tired.", NEUTRAL) == ()


def test_settings_carry_the_attribute_and_task_into_their_keys():
    from context_cda.config import AugmentConfig

    assert "attribute" not in ReviewSettings().to_dict()  # gender keys unchanged
    s = ReviewSettings.from_config(AugmentConfig(), "race", "neutral")
    assert s.to_dict()["attribute"] == "race" and s.task == "neutral" and s.max_length_ratio == 1.6
