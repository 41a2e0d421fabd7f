"""N-ary attributes (race, religion): the group lexicon, its checks, and the group swapper's rules and mappings."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

from context_cda.cda.group_swap import GroupSwapper, case_like
from context_cda.cda.groups import (
    DEFAULT_GROUPS,
    GroupRow,
    build_groups,
    default_rows,
    load_groups,
    load_json_rows,
)
from context_cda.config import Config, LexiconConfig, load_config
from context_cda.errors import ConfigError, InputError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))
from data import SKIP_REASON, mirrored  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LABELLED = ROOT / "tests" / "fixtures" / "cda" / "labelled_groups.jsonl"
RANDOM = ROOT / "tests" / "fixtures" / "cda" / "random_groups.jsonl"
CLASSES = ROOT / "tests" / "fixtures" / "cda" / "class_groups.jsonl"
BIAS_BENCH = mirrored("bias-bench-words")


def lexicon(attribute: str):
    return build_groups(attribute, DEFAULT_GROUPS[attribute], default_rows(attribute), source="default")


def swapper(attribute: str, **kw) -> GroupSwapper:
    return GroupSwapper(lexicon(attribute), **kw)


def first(sw: GroupSwapper, text: str) -> str | None:
    cfs, _ = sw.counterfactuals(text, "row")
    return cfs[0].result.text if cfs else None


# ------------------------------------------------------------------------------------------------ the labelled set


def labelled(path: Path = LABELLED) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[1:] if line.strip()]


def test_the_random_set_not_written_with_the_rules_passes_at_95_percent():
    """WikiText-2 sentences drawn by a seeded script (tests/fixtures/cda/draw_random_groups.py) from those holding a
    race or religion word of bias-bench's lists or ours, labelled by hand before the swapper ran on them: its first
    counterfactual, or none. Every miss is printed; the accuracy per stratum too ('rest': labelled after the rules
    were written, a blind test of them)."""
    rows = labelled(RANDOM)
    assert len(rows) >= 120 and {r["attribute"] for r in rows} == {"race", "religion"}
    assert sum(r["first"] is not None for r in rows) >= 50  # swaps, not only sentences left alone
    sws = {a: swapper(a) for a in ("race", "religion")}
    misses, per = [], {}
    for r in rows:
        got = first(sws[r["attribute"]], r["text"])
        ok = got == r["first"]
        n, good = per.get(r["stratum"], (0, 0))
        per[r["stratum"]] = (n + 1, good + ok)
        if not ok:
            misses.append(f"[{r['attribute']}, {r['stratum']}] {r['text']!r}: got {got!r}, want {r['first']!r} "
                          f"({r['note']})")
    accuracy = 1 - len(misses) / len(rows)
    print(f"random set: {len(rows) - len(misses)}/{len(rows)} = {accuracy:.1%}; per stratum: "
          + ", ".join(f"{k} {g}/{n}" for k, (n, g) in per.items()) + "\n" + "\n".join(misses))
    assert accuracy >= 0.95, "\n".join(misses)


def test_the_random_set_of_the_three_dropped_classes_passes_at_95_percent():
    """Sentences drawn by a seeded script (tests/fixtures/cda/draw_class_groups.py) from the demos' corpora and the
    benchmarks they evaluate on, a group adjective before a word for people or before another word, for every group
    of both attributes, labelled by hand: the first counterfactual, or none. At least 150, each group with sentences
    of people and of things; every miss is printed, and the accuracy per draw (draw 2: drawn after the rules)."""
    rows = labelled(CLASSES)
    assert len(rows) >= 150
    groups = {a: set(DEFAULT_GROUPS[a]) for a in ("race", "religion")}
    for a, names in groups.items():
        for g in names:
            assert {"people", "thing"} <= {r["class"] for r in rows if (r["attribute"], r["group"]) == (a, g)}, g
    sws = {a: swapper(a) for a in groups}
    misses, per = [], {}
    for r in rows:
        got = first(sws[r["attribute"]], r["text"])
        ok = got == r["first"]
        for key in (f"draw {r['draw']}", r["class"]):
            n, good = per.get(key, (0, 0))
            per[key] = (n + 1, good + ok)
        if not ok:
            misses.append(f"[{r['attribute']}, {r['group']}, {r['class']}] {r['text']!r}: got {got!r}, want "
                          f"{r['first']!r} ({r['note']})")
    accuracy = 1 - len(misses) / len(rows)
    print(f"class set: {len(rows) - len(misses)}/{len(rows)} = {accuracy:.1%}; "
          + ", ".join(f"{k} {g}/{n}" for k, (n, g) in sorted(per.items())) + "\n" + "\n".join(misses))
    assert accuracy >= 0.95, "\n".join(misses)


def test_the_hand_labelled_set_passes_at_95_percent():
    """At least 60 race / religion sentences written for this project, each with its expected first counterfactual
    (or none) and the spans that must stay; the swapper must get at least 95 % of them exactly right."""
    rows = labelled()
    assert len(rows) >= 60 and {r["attribute"] for r in rows} == {"race", "religion"}
    assert sum(r["first"] is None for r in rows) >= 20  # words that must not be swapped: colours, names
    sws = {a: swapper(a) for a in ("race", "religion")}
    failures = []
    for r in rows:
        sw = sws[r["attribute"]]
        cfs, _ = sw.counterfactuals(r["text"], "row")
        got = cfs[0].result.text if cfs else None
        ok = (got == r["first"] and (not cfs or len(cfs) == sw.n - 1)
              and all(k in cf.result.text for cf in cfs for k in r["keep"]))
        if not ok:
            failures.append(f"{r['text']!r}: got {got!r}, want {r['first']!r}")
    accuracy = 1 - len(failures) / len(rows)
    print(f"labelled set: {len(rows) - len(failures)}/{len(rows)} = {accuracy:.1%}; failures: {failures}")
    assert accuracy >= 0.95, "\n".join(failures)


def test_the_labelled_set_would_fail_a_swapper_without_sense_rules():
    """The set can fail: swapping every occurrence (cda.ambiguous=swap) gets the colour and name sentences wrong."""
    rows = labelled()
    sws = {a: swapper(a, ambiguous="swap") for a in ("race", "religion")}
    wrong = sum(first(sws[r["attribute"]], r["text"]) != r["first"] for r in rows)
    assert wrong >= 15


# ------------------------------------------------------------------------------------------------ mappings


def test_permutations_write_one_counterfactual_per_other_group_consistently():
    sw = swapper("race")
    cfs, skipped = sw.counterfactuals("Black and white residents met the Asian mayor.", "r")
    assert [c.tag for c in cfs] == ["k1", "k2", "k3"] and not skipped
    assert [c.result.text for c in cfs] == [
        "White and Asian residents met the Hispanic mayor.",
        "Asian and Hispanic residents met the Black mayor.",
        "Hispanic and black residents met the White mayor.",  # case copied from the word it replaces
    ]
    for c in cfs:  # a permutation without a fixed point: every group goes elsewhere, two groups stay distinct
        assert len(set(c.mapping.values())) == 4 and all(g != t for g, t in c.mapping.items())
    assert sw.direction(cfs[0].result.swaps) == "mixed"
    assert sw.direction(sw.counterfactuals("Black voters came.", "r")[0][0].result.swaps) == "black->white"


def test_religion_roles_follow_the_next_word_and_the_copula():
    sw = swapper("religion")
    k2 = {t: sw.counterfactuals(t, "r")[0][1].result.text for t in (
        "A Christian family moved in.", "She became a Christian.", "She is Christian.",
        "Christian and Muslim leaders met.", "The Christian's faith held.")}
    assert k2 == {"A Christian family moved in.": "A Jewish family moved in.",
                  "She became a Christian.": "She became a Jew.",
                  "She is Christian.": "She is Jewish.",
                  "Christian and Muslim leaders met.": "Jewish and Christian leaders met.",
                  "The Christian's faith held.": "The Jew's faith held."}


def test_case_possessives_and_articles():
    sw = swapper("race")
    assert first(sw, "Hispanic voters spoke.") == "Black voters spoke."
    assert first(sw, "a white officer said") == "an Asian officer said"
    assert first(sw, "the Hispanic family's house") == "the Black family's house"
    assert first(swapper("religion"), "The Muslims' mosque") == "The Jews' synagogue"
    assert case_like("African-American", "european-american") == "European-American"
    assert case_like("BLACK", "white") == "WHITE"


def test_words_left_alone_are_reported_with_their_reason():
    sw = swapper("race")
    cfs, skipped = sw.counterfactuals("She drank white wine by the Black Sea.", "r")
    assert cfs == [] and skipped == [("white", "not-a-person"), ("Black", "name")]
    assert sw.find_terms("White voters and white wine") == ["white"]
    assert swapper("race", ambiguous="skip").find_terms("white voters") == []
    assert swapper("race", ambiguous="swap").find_terms("white wine by the Black Sea") == ["white", "black"]


def test_bias_bench_mapping_reproduces_its_rules():
    """bias-bench's ternary CDA: whitespace tokens, exact (lower-case) match or with trailing punctuation, one random
    other group per group and sentence (random.choice in group order), the last matching row wins."""
    lex = build_groups("race", ("black", "caucasian", "asian"), [
        GroupRow(("black", "caucasian", "asian"), "r0"), GroupRow(("african", "caucasian", "asian"), "r1"),
        GroupRow(("black", "white", "asian"), "r2")], source="test")
    sw = GroupSwapper(lex, mapping="bias-bench", seed=7)
    rng = random.Random("7:row-1")
    choice = [rng.choice([1, 2]), rng.choice([0, 2]), rng.choice([0, 1])]
    text = "the black  dog and Black asian, people"
    cfs, skipped = sw.counterfactuals(text, "row-1")
    row2 = ("black", "white", "asian")  # 'black' is in rows 0 and 2: row 2 (the last) wins
    want = ["the", row2[choice[0]], "dog", "and", "Black", row2[choice[2]] + ",", "people"]
    assert cfs[0].result.text == " ".join(want) and skipped == []
    assert [a for a, _ in cfs[0].result.swaps] == ["black", "asian,"]
    assert sw.find_terms("Black black, white.") == ["black", "white"]


# ------------------------------------------------------------------------------------------------ lexicon checks


def test_overlapping_groups_and_bad_rows_are_one_clear_error():
    with pytest.raises(InputError, match=r"'church' is listed for group 'christian' \(a#0\) and for group 'muslim'"):
        build_groups("religion", ("jewish", "christian", "muslim"),
                     [GroupRow(("synagogue", "church", "mosque"), "a#0"), GroupRow(("temple", "chapel", "church"), "a#1")])
    with pytest.raises(InputError, match=r"a#0: a religion row needs one word per group \(3"):
        build_groups("religion", ("jewish", "christian", "muslim"), [GroupRow(("synagogue", "church"), "a#0")])
    with pytest.raises(InputError, match="listed for two groups of one row"):
        build_groups("religion", ("jewish", "christian", "muslim"), [GroupRow(("x", "y", "x"), "a#0")])


def test_conflicts_are_reported_and_first_kept_or_stop():
    rows = [GroupRow(("black", "caucasian", "asian"), "f#0"), GroupRow(("black", "white", "asian"), "f#2")]
    lex = build_groups("race", ("black", "caucasian", "asian"), rows, source="f")
    assert {i.word for i in lex.issues} == {"black", "asian"}
    assert lex.counterpart("black", 1) == "caucasian"
    with pytest.raises(ConfigError, match="conflict"):
        build_groups("race", ("black", "caucasian", "asian"), rows, on_conflict="error")


@pytest.mark.skipif(BIAS_BENCH is None, reason=SKIP_REASON.format("bias-bench-words"))
def test_bias_bench_lists_load_for_race_and_religion():
    groups, rows = load_json_rows(BIAS_BENCH, "religion")
    assert groups == ("jewish", "christian", "muslim") and len(rows) == 6
    lex = load_groups("race", LexiconConfig(source="bias-bench", path=str(BIAS_BENCH)))
    assert lex.groups == ("black", "caucasian", "asian") and lex.issues  # its rows conflict (black, asian, ...)
    assert lex.ambiguous == {"black", "white"}


def test_an_attribute_without_a_lexicon_is_named(tmp_path):
    p = tmp_path / "words.json"
    p.write_text(json.dumps({"gender": [["he", "she"]]}))
    with pytest.raises(InputError, match=r"words\.json: no 'race' word lists .*the attribute has no lexicon"):
        load_groups("race", LexiconConfig(source=str(p)))
    with pytest.raises(ConfigError, match="zhao2018.* is a gender list"):
        load_groups("religion", LexiconConfig(source="zhao2018"))


def test_the_default_lexicons_are_conflict_free():
    for attr in ("race", "religion"):
        lex = lexicon(attr)
        assert not lex.issues and len(lex.groups) == len(DEFAULT_GROUPS[attr])


def test_the_attribute_picks_the_bias_type_and_rules_out_neutral():
    assert Config().evaluate.bias_type == "gender"
    cfg = load_config(overrides=["run.attribute=race"], params_file=ROOT / "params.yaml")
    assert cfg.evaluate.bias_type == "race"
    assert load_config(overrides=["run.attribute=race", "evaluate.bias_type=all"],
                       params_file=ROOT / "params.yaml").evaluate.bias_type == "all"
    with pytest.raises(ConfigError, match="context-neutral: a neutral rewrite replaces gendered words"):
        load_config(overrides=["run.attribute=religion", "train.arms=[cda, context-neutral]"],
                    params_file=ROOT / "params.yaml")
    with pytest.raises(ConfigError, match="cda.mapping=bias-bench maps n-ary groups"):
        load_config(overrides=["cda.mapping=bias-bench"], params_file=ROOT / "params.yaml")


# ------------------------------------------------------------------------------------------------ how groups are named


@pytest.mark.parametrize(("text", "want"), [
    ("Hispanics are the largest minority in the state.", "Blacks are the largest minority in the state."),
    ("Latinos voted in large numbers.", "Blacks voted in large numbers."),
    ("Latinas led the march.", "Blacks led the march."),
    ("Asians were excluded by the act.", "Hispanics were excluded by the act."),
    ("Whites and blacks lived on separate streets.", "Asians and whites lived on separate streets."),
    ("Caucasians made up half the sample.", "Asians made up half the sample."),
    ("A Caucasian woman testified.", "An Asian woman testified."),
    ("Africans and Europeans traded along the coast.", "Europeans and Asians traded along the coast."),
    ("Latin Americans moved to the city.", "Africans moved to the city."),
    ("Afro-American soldiers served there.", "European-American soldiers served there."),
    ("She was the first Asian to win the prize.", "She was the first Hispanic to win the prize."),
    ("His grandfather was African-born.", "His grandfather was European-born."),
    ("Many people of Asian descent live here.", "Many people of Hispanic descent live here."),
])
def test_people_nouns_demonyms_and_second_words_of_a_group(text, want):
    assert first(swapper("race"), text) == want


def test_a_second_word_of_a_group_is_swapped_but_is_no_ones_counterpart():
    """One-way rows: Caucasian, Latino, Islamic, Moslem, Koran have rows of their own, but white stays the word
    Asian and Hispanic become (never Caucasian), Muslim the word Jewish becomes (never Islamic)."""
    race, religion = swapper("race"), swapper("religion")
    for text in ("Black voters came.", "Asian voters came.", "Hispanic voters came."):
        outs = [c.result.text for c in race.counterfactuals(text, "r")[0]]
        assert not any(w in o.lower() for o in outs for w in ("caucasian", "latino", "latina"))
    outs = [c.result.text for c in religion.counterfactuals("Jewish and Christian scholars met.", "r")[0]]
    assert outs == ["Christian and Muslim scholars met.", "Muslim and Jewish scholars met."]
    assert first(religion, "Islamic scholars met.") == "Jewish scholars met."
    assert first(religion, "The Moslems prayed.") == "The Jews prayed."
    assert first(religion, "He read the Koran.") == "He read the Torah."


def test_a_word_only_listed_as_a_counterpart_is_refused():
    with pytest.raises(InputError, match=r"'caucasian' .*only stand in one-way rows"):
        build_groups("race", ("black", "white"), [GroupRow(("black", "caucasian"), "x#0", None, (0,))])


@pytest.mark.parametrize("text", [
    "Asian elephants live in the forest.", "The ships sailed in European waters.",
    "The song topped the charts in several Latin American countries.", "The Caucasian languages are old.",
    "European powers formed a coalition.", "The North African campaign ended in 1943.",
    "African and Asian markets grew.",
])
def test_origin_adjectives_of_things_and_places_are_left_alone(text):
    cfs, skipped = swapper("race").counterfactuals(text, "r")
    assert cfs == [] and skipped and {why for _, why in skipped} <= {"not-a-person", "name"}


def test_origin_adjectives_through_a_list_of_nationalities():
    assert first(swapper("race"), "He was sought by European, American and African collectors.") == (
        "He was sought by Asian, American and European collectors.")


@pytest.mark.parametrize("text", [
    "He painted in the blacks and whites of the scene with a soft light.", "Beat the egg whites until stiff.",
    "The whites of his eyes were red.",
])
def test_blacks_and_whites_as_tones_or_things_are_left_alone(text):
    assert first(swapper("race"), text) is None


@pytest.mark.parametrize(("text", "bound"), [
    ("The Catholic church opened a school.", "Catholic"),
    ("The rabbi studied the Talmud.", "Talmud"),
    ("The bishop entered the church.", "bishop"),
    ("It was a Conservative synagogue.", "Conservative synagogue"),
    ("He was a rabbi at Temple Beth Israel.", "Temple Beth"),
    ("The Christian audience knew the kosher laws.", "kosher"),
    ("The Muslim woman wore a hijab.", "hijab"),
])
def test_a_sentence_bound_to_one_group_is_left_alone_and_counted(text, bound):
    """Never a Catholic mosque, never Muslims celebrating Easter: a word with no counterpart in the other groups
    leaves the whole sentence alone (every group word: bound; the word itself: no-counterpart)."""
    sw = swapper("religion")
    cfs, skipped = sw.counterfactuals(text, "r")
    assert cfs == [] and (bound, "no-counterpart") in skipped
    assert {why for _, why in skipped} == {"bound", "no-counterpart"}
    assert sw.skipped(text) == skipped and sw.find_terms(text) == []


def test_words_like_bound_ones_in_other_senses_do_not_bind():
    sw = swapper("religion")
    assert first(sw, "He lent the church his car.") == "He lent the mosque his car."  # lent, the verb
    assert first(sw, "The Conservative party courted Muslim voters.") == "The Conservative party courted Jewish voters."
    assert first(sw, "Christians celebrate the harvest every autumn.") == "Muslims celebrate the harvest every autumn."


def test_a_group_word_in_a_name_binds_the_same_groups_words():
    """``Lane County Jewish Federation`` names a Jewish institution: the synagogue beside it cannot become a church.
    A first name does not bind (Hans Christian Andersen), nor a name of another group."""
    sw = swapper("religion")
    cfs, skipped = sw.counterfactuals("The Lane County Jewish Federation met in the synagogue.", "r")
    assert cfs == [] and skipped == [("Jewish", "name"), ("synagogue", "bound")]
    assert first(sw, "Hans Christian Andersen visited a church.") == "Hans Christian Andersen visited a mosque."
    assert first(sw, "The Christian Democratic Union courted Muslim voters.") == (
        "The Christian Democratic Union courted Jewish voters.")
    assert first(sw, "She works for the Jewish Family Service and the synagogue.") is None


def test_the_bound_list_is_configurable():
    lex = load_groups("religion", LexiconConfig(bound=[]))
    assert first(GroupSwapper(lex), "The Catholic church opened.") == "The Catholic mosque opened."
    lex = load_groups("religion", LexiconConfig(bound=["harvest festival"]))
    assert first(GroupSwapper(lex), "Christians held a Harvest Festival.") is None
    assert first(GroupSwapper(lex), "The Catholic church opened.") == "The Catholic mosque opened."


@pytest.mark.parametrize(("text", "k1", "k2"), [
    # an observance with a counterpart is swapped with its sentence's groups, consistently
    ("Jews celebrate Passover every spring.", "Christians celebrate Easter every spring.",
     "Muslims celebrate Eid al-Adha every spring."),
    ("Christians celebrate Easter and Christmas.", "Muslims celebrate Eid al-Adha and Eid al-Fitr.",
     "Jews celebrate Passover and Hanukkah."),
    ("Muslims fast during Ramadan.", "Jews fast during Yom Kippur.", "Christians fast during Lent."),
    ("The Jewish family celebrated Passover at home.", "The Christian family celebrated Easter at home.",
     "The Muslim family celebrated Eid al-Adha at home."),
    ("Many Muslim families celebrate Eid al-Fitr together.", "Many Jewish families celebrate Hanukkah together.",
     "Many Christian families celebrate Christmas together."),
    ("During Lent the church was quiet.", "During Ramadan the mosque was quiet.",
     "During Yom Kippur the synagogue was quiet."),
    ("Jews do not celebrate Christmas.", "Christians do not celebrate Eid al-Fitr.", "Muslims do not celebrate Hanukkah."),
    # one without a counterpart stays as written beside its swapped group word
    ("Jewish children dress up for Purim.", "Christian children dress up for Purim.",
     "Muslim children dress up for Purim."),
    ("Muslim pilgrims returned from the hajj.", "Jewish pilgrims returned from the hajj.",
     "Christian pilgrims returned from the hajj."),
])
def test_an_observance_is_swapped_with_its_group_or_stays(text, k1, k2):
    """A group word with a religious observance in the same sentence is no longer left alone as a unit: the
    observance is swapped consistently where it has a counterpart (Passover / Easter / Eid al-Adha, Hanukkah /
    Christmas / Eid al-Fitr, Yom Kippur / Lent / Ramadan), and stays as written where it has none."""
    cfs, skipped = swapper("religion").counterfactuals(text, "r")
    assert [c.result.text for c in cfs] == [k1, k2] and not skipped


@pytest.mark.parametrize("text", ["The Christmas single reached number one in 1994.", "Easter fell early that year.",
                                  "He lent her the money for Passover."])
def test_an_observance_alone_names_no_group(text):
    """An observance is a companion of a group word, never a trigger: a sentence that names no group is no religion
    sentence (nothing to swap, nothing reported as left alone); ``lent`` in lower case is the verb."""
    sw = swapper("religion")
    assert sw.counterfactuals(text, "r") == ([], []) and sw.find_terms(text) == []
    assert first(sw, "They lent the Jewish school a hall.") == "They lent the Christian school a hall."
