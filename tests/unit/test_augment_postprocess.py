"""Post-processing of generated rephrasings, the one-reason ``check`` view of the review, prompts, sampling
params, cache and shards. The review's checks themselves are in test_review*.py."""

from __future__ import annotations

import sys

import pytest

from context_cda.augment import (
    CheckSettings,
    GenerationCache,
    build_messages,
    cache_key,
    check,
    clean,
    parse_swaps,
)
from context_cda.augment.checks.words import default_lexicon
from context_cda.errors import ConfigError
from context_cda.generation import GenerationResult, SamplingParams


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('Here is the rephrased sentence: "She went home after her shift."', "She went home after her shift."),
        ("Sure! Here's a version with more context:\n\nShe went home.", "She went home."),
        ("**She went home.** Note: I kept the genders.", "She went home."),
        ("She went home.\n\nI added a setting to the sentence.", "She went home."),
        ('"She said hi".', "She said hi."),
        ("She went home. (I added a setting.)", "She went home."),
        ("Rephrased sentence: She left early.<|im_end|>junk", "She left early."),
        ("1. She went to Paris. This rephrased sentence keeps the meaning.", "She went to Paris."),
        ("- She went to Paris with her aunt.", "She went to Paris with her aunt."),
        ("Output: `She went home.`", "She went home."),
        ("She said \"hello\" to her aunt.", "She said \"hello\" to her aunt."),
        ("After the storm, she and her aunt went home. They were tired.",
         "After the storm, she and her aunt went home. They were tired."),
        ("", ""),
        ("To make the sentence more engaging, I'll rephrase it:\n\nShe went home.", "She went home."),
        ('Sentence: "The clip was a tribute to the band."', "The clip was a tribute to the band."),
        ("Here's a version with a more natural setting:\n\n\"She left early.\"\n\nThis keeps the meaning.",
         "She left early."),
    ],
)
def test_clean(raw, expected):
    assert clean(raw) == expected


SRC = "She thanked her mother for the advice."
SWAPS = parse_swaps(["He->She", "his->her", "father->mother"])


@pytest.mark.parametrize(
    ("out", "reason"),
    [
        ("After dinner, she thanked her mother warmly for the advice.", ""),
        ("", "empty"),
        ("   ", "empty"),
        ("she thanked her mother for the advice", "identical"),
        ("I'm sorry, but I can't help with that request.", "refusal"),
        ("As an AI, I would rather not rephrase this sentence.", "refusal"),
        ("She thanked.", "too-short"),
        ("She thanked her mother " + "for the long and careful advice " * 8, "too-long"),
        ("After dinner, he thanked her mother warmly for the advice.", "gender-contradiction: he"),
        ("After dinner, she thanked her father warmly for the advice.", "gender-contradiction: father"),
        ("After dinner, the student thanked the parent warmly for advice.", "gender-missing"),
    ],
)
def test_check(out, reason):
    """``check`` is the review's first reason; every expected reason is among the review's reasons."""
    from context_cda.augment import ReviewSettings, review

    got = check(out, SRC, SWAPS, default_lexicon(), CheckSettings(0.8, 4.0), "m2f")
    verdict = review(None, SRC, out, lexicon=default_lexicon(), swaps=SWAPS, settings=ReviewSettings())
    assert got == (verdict.reasons[0] if verdict.reasons else "")
    if reason:
        assert any(r.startswith(reason) for r in verdict.reasons), verdict.reasons
    else:
        assert verdict.accepted and got == "", verdict.reasons


def test_check_mixed_direction_allows_both_genders():
    src = "My aunt and her husband moved to Paris."
    swaps = parse_swaps(["uncle->aunt", "his->her", "wife->husband"])
    ok = "Last year, my aunt and her husband finally moved to Paris for work."
    assert check(ok, src, swaps, default_lexicon(), direction="mixed") == ""
    bad = "Last year, my uncle and her husband finally moved to Paris for work."
    assert check(bad, src, swaps, default_lexicon(), direction="mixed").startswith("gender-contradiction: uncle")


def test_check_uses_project_lexicon_interface():
    class Lex:  # the context_cda.cda.lexicon.Lexicon interface
        male_words = {"he", "his", "lord"}
        female_words = {"she", "her", "lady"}

        def counterpart(self, w):
            return {"he": "she", "she": "he", "lord": "lady", "lady": "lord"}.get(w)

    assert check("At the feast, the lady said she was tired.", "The lady said she was tired.",
                 parse_swaps(["lord->lady", "he->she"]), Lex(), direction="m2f") == ""
    assert check("At the feast, the lord said she was tired.", "The lady said she was tired.",
                 parse_swaps(["lord->lady", "he->she"]), Lex(), direction="m2f").startswith("gender-contradiction")


def test_prompts_versioned_and_sentence_last():
    msgs = build_messages("She went home.", "v1", few_shot=True)
    assert msgs[0]["role"] == "system" and "gender" in msgs[0]["content"].lower()
    assert [m["role"] for m in msgs[1:]] == ["user", "assistant", "user", "assistant", "user"]
    assert msgs[-1]["content"].endswith("Sentence: She went home.")
    assert len(build_messages("x", few_shot=False)) == 2
    v2 = build_messages("She went home.", "v2", few_shot=True)
    assert [m["role"] for m in v2[1:]] == ["user", "assistant"] * 2 + ["user"] and v2[-1]["content"].endswith(
        "Sentence: She went home.")
    # a retry's note sits right above the sentence, which stays the last line
    fb = build_messages("She went home.", "v2", few_shot=False, feedback="Keep exactly: 1998.")
    assert fb[-1]["content"].endswith("Keep exactly: 1998.\nSentence: She went home.")
    assert fb[-1]["content"].replace("Keep exactly: 1998.\n", "") == v2[-1]["content"]
    with pytest.raises(ConfigError, match="unknown prompt version"):
        build_messages("x", "v999")


def test_sampling_params():
    from context_cda.config import SamplingConfig

    p = SamplingParams.from_config(SamplingConfig(n=3, stop=["<|eot_id|>"]))
    assert p.n == 3 and p.stop == ("<|eot_id|>",) and not p.greedy
    assert p.with_seed(5).seed == 5 and p.to_dict()["stop"] == ["<|eot_id|>"]
    with pytest.raises(ConfigError):
        SamplingParams(n=0)


def test_import_is_light():
    import subprocess

    code = ("import sys, context_cda.augment as a, context_cda.generation as g; a.run_augment; g.make_generator; "
            "g.generator_class('hf'); g.generator_class('openai'); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_cache_roundtrip_and_errors_not_cached(tmp_path):
    cache = GenerationCache(tmp_path)
    k1 = cache_key("hf", "m", [{"role": "user", "content": "a"}], SamplingParams(seed=1))
    k2 = cache_key("hf", "m", [{"role": "user", "content": "a"}], SamplingParams(seed=2))
    assert k1 != k2
    assert cache.get(k1) is None
    cache.put(k1, GenerationResult(texts=["x"], completion_tokens=3))
    cache.put(k2, GenerationResult(error="boom"))
    assert cache.get(k1).texts == ["x"] and cache.get(k2) is None
    assert cache.hits == 1 and cache.misses == 2


def test_checkpoint_store_lock_and_tmp_cleanup(tmp_path):
    """The item engine's checkpoints (augment's shards): leftovers of a killed write removed, one process at a
    time in a step folder (the lock names its holder), released when the holder ends."""
    from tests.helpers.lock_holder import other_process_holds

    from context_cda import items as I
    from context_cda.errors import LockHeld
    from context_cda.steps import lock

    store = I.Checkpoints.of(tmp_path, "fp")
    store.root.mkdir(parents=True)
    (store.root / ".shard-x.parquet.tmp").write_text("half")
    with lock(tmp_path, "augment"):
        store.clean()
        assert not list(store.root.glob(".*.tmp"))
        store.append([{"item_key": "a", "status": "done", "reason": ""}])
    assert len(store.read()) == 1
    with other_process_holds(tmp_path, "augment"), pytest.raises(LockHeld, match=r"pid \d+ on .*augment"):
        with lock(tmp_path, "augment"):
            pass
    with lock(tmp_path, "augment"):  # released when its holder ended
        pass
