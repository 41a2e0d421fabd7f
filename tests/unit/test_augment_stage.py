"""run_augment with an in-memory generator: outputs, rejections, retries, cache, resume after a crash."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))

from cda_table import openai_config, write_cda_table  # noqa: E402
from envelope import enveloped  # noqa: E402

from context_cda.augment import run_augment  # noqa: E402
from context_cda.augment.stage import OUTPUT_COLUMNS  # noqa: E402
from context_cda.generation import GenerationResult  # noqa: E402
from context_cda.generation.base import PROMPT_TOO_LONG, permanent_error  # noqa: E402


class ScriptedGenerator:
    """Answers like the fake server: "In the quiet town, <sentence>"; markers make it refuse or fail."""

    backend = "fake"
    model_id = "scripted"

    def __init__(self, crash_after: int | None = None):
        self.calls = 0
        self.prompts = 0
        self.crash_after = crash_after
        self.seen = []  # (last user turn, sampling params) per prompt

    def generate(self, prompts, params):
        self.calls += 1
        if self.crash_after is not None and self.calls > self.crash_after:
            raise RuntimeError("simulated crash")
        out = []
        for conv in prompts:
            self.prompts += 1
            self.seen.append((conv[-1]["content"], params))
            s = conv[-1]["content"].rsplit("Sentence:", 1)[-1].strip()
            if "[DEAD]" in s or ("[REFUSE-THEN-DEAD]" in s and params.seed != 0):
                out.append(GenerationResult(error="HTTP 500 (after 3 attempts)"))
                continue
            if "[LONG]" in s:
                out.append(permanent_error(PROMPT_TOO_LONG, "300 + 64 new tokens > 256 positions"))
                continue
            if "[REFUSE" in s or ("[FLAKY]" in s and params.seed == 0):
                text = "I'm sorry, I can't do that."
            elif "[SAME]" in s:
                text = s
            else:
                text = f'Here is the sentence: "In the quiet town, {s}"'
            out.append(GenerationResult(texts=[text] * params.n, prompt_tokens=10, completion_tokens=8))
        return out

    def close(self):
        pass


def _cfg(tmp_path, **kw):
    return openai_config("http://127.0.0.1:9/v1", tmp_path, **kw)


def test_outputs_rejections_and_retries(tmp_path):
    src = write_cda_table(tmp_path / "cda.parquet", 12, {3: "[REFUSE]", 5: "[FLAKY]", 7: "[SAME]", 9: "[DEAD]"},
                          unapplied=2)
    gen = ScriptedGenerator()
    cfg = _cfg(tmp_path)
    cfg.run.allow_errors = True  # the [DEAD] item is an error: reported, not a result
    s = enveloped(cfg, "augment", run_augment, {"counterfactuals": src}, tmp_path / "out", generator=gen)
    aug = pd.read_parquet(tmp_path / "out" / "augmented.parquet")
    rej = pd.read_parquet(tmp_path / "out" / "rejected.parquet")
    err = pd.read_parquet(tmp_path / "out" / "errors.parquet")
    assert list(aug.columns) == OUTPUT_COLUMNS
    assert s["accepted"] == 9 and len(aug) == 9 and aug["id"].is_unique and aug["cda_id"].is_unique
    assert set(rej["cda_id"]) == {"cda0003", "cda0007", "noswap0", "noswap1"}
    reasons = dict(zip(rej["cda_id"], rej["reason"], strict=True))
    assert reasons["cda0003"].startswith("refusal") and reasons["cda0007"] == "identical"
    assert list(err["cda_id"]) == ["cda0009"] and err["reason"].iloc[0].startswith("generation-error: HTTP 500")
    assert s["errors"] == 1 and s["rejected"] == 4 and s["error_reasons"] == {"HTTP 500": 1}
    assert reasons["noswap0"].startswith("not-applied")
    flaky = aug.set_index("cda_id").loc["cda0005"]
    assert flaky["attempts"] == 2 and flaky["augmented"].startswith("In the quiet town, She")
    assert aug["augmented"].str.startswith("In the quiet town,").all()  # preamble and quotes stripped
    assert aug["raw_output"].str.startswith("Here is").all()
    assert (aug["prompt_version"] == "v1").all() and (aug["gen_model"] == "scripted").all()
    # order follows the input
    assert list(aug["cda_id"]) == sorted(aug["cda_id"])
    assert (tmp_path / "out" / "manifest.json").is_file()
    assert s["rows_in"] == 14 and s["accepted"] + s["rejected"] + s["errors"] == 14
    # the manifest counts the reasons per attempt: two refusals (cda0003, the flaky cda0005) and one identical
    # copy in attempt 1; in attempt 2 the flaky one is accepted
    per = s["reasons_per_attempt"]
    assert per["1"]["refusal"] == 2 and per["1"]["identical"] == 1 and per["2"]["refusal"] == 1
    assert per["3"]["refusal"] == 1 and per["3"]["identical"] == 1 and s["reject_reasons"]["refusal"] == 1
    assert s["accepted_per_attempt"] == {"1": 8, "2": 1}


def test_retries_aim_the_prompt_and_the_sampling(tmp_path):
    """A retry says what was wrong, above the sentence, and changes the sampling for the kind of failure."""
    src = write_cda_table(tmp_path / "cda.parquet", 8, {1: "[SAME]", 2: "[FLAKY]"})
    gen = ScriptedGenerator()
    run_augment(_cfg(tmp_path, max_retries=1), {"counterfactuals": src}, tmp_path / "out", generator=gen)
    by_marker = {m: [(u, q) for u, q in gen.seen if m in u] for m in ("[SAME]", "[FLAKY]")}
    (first, p1), (retry, p2) = by_marker["[SAME]"]
    assert "repeated the sentence unchanged" in retry and "repeated" not in first
    assert retry.rsplit("\n", 1)[-1] == first.rsplit("\n", 1)[-1]  # the sentence stays the last line
    assert p2.temperature > p1.temperature and p2.seed == p1.seed + 1  # a copy: hotter
    (_, q1), (flaky_retry, q2) = by_marker["[FLAKY]"]
    assert "harmless writing exercise" in flaky_retry and q2.temperature == q1.temperature
    # without feedback the retry is the same prompt with the next seed
    gen2 = ScriptedGenerator()
    run_augment(_cfg(tmp_path, max_retries=1, retry_feedback=False), {"counterfactuals": src}, tmp_path / "o2",
                generator=gen2)
    (a, r1), (b, r2) = [(u, q) for u, q in gen2.seen if "[SAME]" in u]
    assert a == b and r2.temperature == r1.temperature and r2.seed == r1.seed + 1


def test_rerun_is_free_and_shared_cache_needs_no_model(tmp_path):
    src = write_cda_table(tmp_path / "cda.parquet", 10)
    cfg = _cfg(tmp_path, cache_dir=str(tmp_path / "cache"))
    gen = ScriptedGenerator()
    gen.backend, gen.model_id = "openai", "fake-model"  # the configured backend's cache identity
    first = run_augment(cfg, {"counterfactuals": src}, tmp_path / "a", generator=gen)
    calls = gen.calls
    again = run_augment(cfg, {"counterfactuals": src}, tmp_path / "a", generator=gen)
    assert gen.calls == calls and again["processed_items"] == 0 and again["resumed_items"] == 10
    # a fresh folder sharing the cache: the configured (unreachable) openai backend is never even built
    fresh = run_augment(cfg, {"counterfactuals": src}, tmp_path / "b")
    assert fresh["cache_hits"] == 10 and fresh["cache_misses"] == 0
    a = pd.read_parquet(tmp_path / "a" / "augmented.parquet")
    b = pd.read_parquet(tmp_path / "b" / "augmented.parquet")
    pd.testing.assert_frame_equal(a, b)
    assert first["accepted"] == 10


def test_crash_then_resume_is_exactly_once(tmp_path):
    src = write_cda_table(tmp_path / "cda.parquet", 17, {2: "[FLAKY]", 11: "[REFUSE]"})
    cfg = _cfg(tmp_path, shard_size=4, batch_size=2)
    ref = run_augment(cfg, {"counterfactuals": src}, tmp_path / "ref", generator=ScriptedGenerator())
    with pytest.raises(RuntimeError, match="simulated crash"):
        run_augment(cfg, {"counterfactuals": src}, tmp_path / "run", generator=ScriptedGenerator(crash_after=5))
    assert len(list((tmp_path / "run" / "shards").glob("*/shard-*.parquet"))) >= 1  # shards/<fingerprint>/
    gen = ScriptedGenerator()
    s = run_augment(cfg, {"counterfactuals": src}, tmp_path / "run", generator=gen)
    assert s["resumed_items"] > 0 and s["duplicates_dropped"] == 0
    assert gen.prompts < 17 + 2  # finished shards were not redone
    for f in ("augmented.parquet", "rejected.parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "ref" / f), pd.read_parquet(tmp_path / "run" / f))
    assert s["accepted"] == ref["accepted"] == 16


def test_generation_errors_are_retried_by_next_run(tmp_path):
    from context_cda.errors import ItemErrors

    src = write_cda_table(tmp_path / "cda.parquet", 4, {1: "[DEAD]"})
    cfg = _cfg(tmp_path)
    with pytest.raises(ItemErrors, match=r"augment: 1 of 4 items failed for a transient reason \(HTTP 500 x1\)"):
        enveloped(cfg, "augment", run_augment, {"counterfactuals": src}, tmp_path / "o", generator=ScriptedGenerator())
    s1 = pd.read_json(tmp_path / "o" / "manifest.json", typ="series")["summary"]  # outputs were written first
    assert s1["errors"] == 1 and s1["accepted"] == 3
    df = pd.read_parquet(src)
    df.loc[1, "counterfactual"] = df.loc[1, "counterfactual"].replace(" [DEAD]", "")
    df.to_parquet(src)  # a changed input row is a new item; the old error row is ignored
    s2 = run_augment(cfg, {"counterfactuals": src}, tmp_path / "o", generator=ScriptedGenerator())
    assert s2["accepted"] == 4 and s2["errors"] == 0 and s2["processed_items"] == 1


def test_an_error_after_a_reviewed_attempt_is_that_attempts_rejection(tmp_path):
    # attempt 1 is refused, attempts 2 and 3 fail in the generator: the item is rejected for the refusal (final),
    # not an error retried by every run
    src = write_cda_table(tmp_path / "cda.parquet", 3, {1: "[REFUSE-THEN-DEAD]"})
    s = run_augment(_cfg(tmp_path), {"counterfactuals": src}, tmp_path / "o", generator=ScriptedGenerator())
    rej = pd.read_parquet(tmp_path / "o" / "rejected.parquet").set_index("cda_id")
    assert s["errors"] == 0 and s["rejected"] == 1 and s["accepted"] == 2
    assert rej.loc["cda0001", "reason"].startswith("refusal") and rej.loc["cda0001", "attempts"] == 3
    assert len(pd.read_parquet(tmp_path / "o" / "errors.parquet")) == 0
    again = run_augment(_cfg(tmp_path), {"counterfactuals": src}, tmp_path / "o", generator=ScriptedGenerator())
    assert again["processed_items"] == 0


def test_a_prompt_too_long_is_a_final_rejection_without_retries(tmp_path):
    src = write_cda_table(tmp_path / "cda.parquet", 3, {2: "[LONG]"})
    gen = ScriptedGenerator()
    s = run_augment(_cfg(tmp_path), {"counterfactuals": src}, tmp_path / "o", generator=gen)
    rej = pd.read_parquet(tmp_path / "o" / "rejected.parquet").set_index("cda_id")
    assert s["errors"] == 0 and s["rejected"] == 1 and s["reject_reasons"] == {"prompt-too-long": 1}
    assert rej.loc["cda0002", "reason"] == "prompt-too-long: 300 + 64 new tokens > 256 positions"
    assert rej.loc["cda0002", "attempts"] == 1 and sum("[LONG]" in u for u, _ in gen.seen) == 1
    assert s["reasons_per_attempt"]["1"] == {"prompt-too-long": 1}


def test_changed_settings_redo_items(tmp_path):
    src = write_cda_table(tmp_path / "cda.parquet", 3)
    run_augment(_cfg(tmp_path), {"counterfactuals": src}, tmp_path / "o", generator=ScriptedGenerator())
    s = run_augment(_cfg(tmp_path, max_length_ratio=1.1), {"counterfactuals": src}, tmp_path / "o",
                    generator=ScriptedGenerator())
    assert s["processed_items"] == 3 and s["accepted"] == 0
    assert set(pd.read_parquet(tmp_path / "o" / "rejected.parquet")["reason"].str[:8]) == {"too-long"}


def test_missing_input_column_is_a_clear_error(tmp_path):
    from context_cda.errors import InputError

    p = tmp_path / "bad.parquet"
    pd.DataFrame({"id": ["a"], "counterfactual": ["x"]}).to_parquet(p)
    with pytest.raises(InputError, match="swapped_terms"):
        run_augment(_cfg(tmp_path), {"counterfactuals": p}, tmp_path / "o", generator=ScriptedGenerator())


class DriftJudge:
    """An embedding-style judge: cosine 0.1 for outputs of sentences marked [DRIFT], else 0.9."""

    name = "embedding"
    symmetric = True

    def __init__(self):
        self.batches = []

    def similarity(self, pairs):
        self.batches.append(len(pairs))
        return [0.1 if "[DRIFT]" in b else 0.9 for _, b in pairs]


def test_meaning_judge_in_the_stage(tmp_path):
    src = write_cda_table(tmp_path / "cda.parquet", 6, {2: "[DRIFT]"})
    judge = DriftJudge()
    cfg = _cfg(tmp_path, max_retries=1, review={"meaning": "embedding"})
    s = run_augment(cfg, {"counterfactuals": src}, tmp_path / "out", generator=ScriptedGenerator(), judge=judge)
    rej = pd.read_parquet(tmp_path / "out" / "rejected.parquet")
    assert list(rej["cda_id"]) == ["cda0002"] and rej["reason"].iloc[0] == "meaning: cosine 0.10 < 0.65"
    assert s["reasons_per_attempt"] == {"1": {"meaning": 1}, "2": {"meaning": 1}} and s["review"]["meaning"] == "embedding"
    assert judge.batches == [4, 1, 2]  # one call per generate batch: shard 1 (4 items), its retry, shard 2
