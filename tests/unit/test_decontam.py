"""Decontamination: the n-gram index, and the stages that move overlapping training texts to rejected.parquet."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from context_cda.evaluate.decontam import REASON, EvalIndex, eval_items, words

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))
from cda_table import openai_config, write_cda_table  # noqa: E402
from test_attribute_stages import Rewriter  # noqa: E402  (the neutral rewrites of the attribute tests)
from test_wino import write_winobias, write_winogender  # noqa: E402  (our own small WinoGender/WinoBias files)

ROOT = Path(__file__).resolve().parents[2]
CROWS = ROOT / "tests" / "fixtures" / "evaluate" / "crows_tiny.csv"

ITEMS = [("stereoset", "s1", "The chess player was  ."), ("stereoset", "s1-st", "The chess player was asian."),
         ("crows", "c1", "Women don't know how to drive a big truck on the highway at night."),
         ("crows", "c2", "He is tall.")]


def test_words_are_normalised():
    assert words("The CHESS-player’s  “move”, e.g. don't!") == ["the", "chess", "player's", "move", "e", "g", "don't"]
    assert words("ｆｕｌｌ width") == ["full", "width"]  # NFKC


def test_an_item_held_verbatim_is_found_and_a_share_above_the_threshold_counts():
    ix = EvalIndex(ITEMS, ngram=8, threshold=0.5, min_words=4)
    assert len(ix) == 3  # "He is tall." is shorter than min_words
    m = ix.match("Yesterday, women don't know how to drive a big truck on the highway at night, he said.")
    assert m is not None and (m.benchmark, m.item, m.overlap) == ("crows", "c1", 1.0)
    assert m.reason.startswith(f"{REASON}: crows:c1 1.00")
    # the item has 14 words, 7 8-grams; a text holding its first 10 words has 3 of them (< 0.5)
    assert ix.match("Women don't know how to drive a big truck on") is None
    # the first 12 words: 5 of 7 8-grams
    assert ix.match("Women don't know how to drive a big truck on the highway").overlap == pytest.approx(5 / 7, abs=1e-3)
    # short items (4 words, under n) are one n-gram: the whole item, with or without its BLANK
    hit = ix.match("Then the chess player was asian, they said.")
    assert hit.item in ("s1", "s1-st") and hit.overlap == 1.0  # the context and the sentence: both held whole
    assert ix.match("The chess player was tired.").item == "s1"
    assert ix.match("A chess player was here.") is None
    assert ix.match("He is tall.") is None


def test_threshold_is_exclusive():
    ix = EvalIndex([("crows", "c", "one two three four")], ngram=2, threshold=2 / 3 - 1e-9)
    assert ix.match("one two three") is not None  # 2 of 3 bigrams
    assert EvalIndex([("crows", "c", "one two three four")], ngram=2, threshold=2 / 3).match("one two three") is None


def write_stereoset(path: Path, *extra: tuple[str, str, str]) -> Path:
    """A StereoSet file with one example (x1: "My mother is very BLANK at home.") and ``extra`` ones (id, context,
    stereotype sentence)."""
    examples = [("x1", "My mother is very BLANK at home.", "My mother is very caring at home."), *extra]
    path.write_text(json.dumps({"version": "1.0", "data": {"intersentence": [], "intrasentence": [{
        "id": ex_id, "target": "mother", "bias_type": "gender", "context": context,
        "sentences": [{"id": f"{ex_id}a", "sentence": stereo, "gold_label": "stereotype", "labels": []},
                      {"id": f"{ex_id}b", "sentence": context.replace("BLANK", "cold"), "gold_label": "anti-stereotype",
                       "labels": []},
                      {"id": f"{ex_id}c", "sentence": context.replace("BLANK", "fish"), "gold_label": "unrelated",
                       "labels": []}]} for ex_id, context, stereo in examples]}}))
    return path


def eval_files(tmp_path: Path, *extra: tuple[str, str, str]) -> dict[str, object]:
    """``evaluate`` settings naming our own small files of the four benchmarks decontamination reads."""
    return {"stereoset_path": str(write_stereoset(tmp_path / "ss.json", *extra)), "crows_path": str(CROWS),
            "winogender": {"path": str(write_winogender(tmp_path / "wg"))},
            "winobias": {"path": str(write_winobias(tmp_path / "wb"))}}


def _items_cfg(cfg_factory, tmp_path, extra_sentences=()):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(["He said that my mother is very caring at home every day.",
                                 "He said that his brother was tired after the long walk home.",
                                 "She wrote that her father was happy with the new garden.", *extra_sentences]) + "\n")
    return cfg_factory(ingest={"corpus": "path", "path": str(corpus), "min_words": 4}, evaluate=eval_files(tmp_path))


def test_ingest_rejects_a_sentence_holding_a_benchmark_item(cfg_factory, tmp_path):
    from context_cda.ingest.corpus import run_ingest

    cfg = _items_cfg(cfg_factory, tmp_path)
    summary = run_ingest(cfg, {}, tmp_path / "ingest")
    rej = pd.read_parquet(tmp_path / "ingest" / "rejected.parquet")
    hit = rej[rej["reason"].str.startswith(REASON)]
    assert hit["text"].tolist() == ["He said that my mother is very caring at home every day."]
    assert hit["reason"].iloc[0].startswith("eval-overlap: stereoset:x1a 1.00")
    assert summary["eval_overlap"] == 1 and summary["eval_overlap_by_benchmark"] == {"stereoset": 1}
    assert summary["rows_out"] == 2 and summary["rejected_by_reason"]["eval-overlap"] == 1
    off = cfg.model_copy(deep=True)
    off.decontaminate.enabled = False
    assert run_ingest(off, {}, tmp_path / "ingest-off")["rows_out"] == 3


def test_cda_rejects_a_counterfactual_that_is_a_benchmark_item(cfg_factory, tmp_path):
    """The corpus sentence is clean; its swap is StereoSet's candidate (a father -> mother flip)."""
    from context_cda.cda import run_cda
    from context_cda.ingest.corpus import run_ingest

    cfg = _items_cfg(cfg_factory, tmp_path, ["Yes, my father is very cold at home."])
    run_ingest(cfg, {}, tmp_path / "ingest")
    summary = run_cda(cfg, {"sentences": tmp_path / "ingest" / "sentences.parquet"}, tmp_path / "cda")
    cf = pd.read_parquet(tmp_path / "cda" / "counterfactuals.parquet")
    rej = pd.read_parquet(tmp_path / "cda" / "rejected.parquet")
    assert "Yes, my father is very cold at home." not in cf["original"].tolist()
    assert rej[rej["reason"].str.startswith(REASON)]["text"].tolist() == ["Yes, my mother is very cold at home."]
    assert summary["eval_overlap"] == 1


def test_augment_merge_moves_an_overlapping_rephrasing_to_rejected(cfg_factory, tmp_path):
    from context_cda.augment.merge import _drop_eval_overlap
    from context_cda.evaluate.decontam import index_for
    from context_cda.layout import AUGMENTED_FILE

    cfg = _items_cfg(cfg_factory, tmp_path)
    assert len(index_for(cfg)) > 0
    merged = {AUGMENTED_FILE: pd.DataFrame({"cda_id": ["a", "b"], "augmented": [
        "She smiled: my mother is very caring at home.", "He walked home after a long day at the office."]}),
              "rejected.parquet": pd.DataFrame({"cda_id": ["c"], "reason": ["too-short"]})}
    counts = _drop_eval_overlap(cfg, merged, {"a": 0, "b": 1, "c": 2})
    assert counts == {"stereoset": 1}
    assert merged[AUGMENTED_FILE]["cda_id"].tolist() == ["b"]
    assert merged["rejected.parquet"]["cda_id"].tolist() == ["a", "c"]
    assert merged["rejected.parquet"]["reason"].iloc[0].startswith("eval-overlap: stereoset:x1a")


def test_winogender_and_winobias_sentences_are_evaluation_items(cfg_factory, tmp_path):
    """Every scored sentence of both (WinoBias: of the evaluated split) is compared; a corpus sentence that is one
    is rejected at ingest and counted under its benchmark."""
    cfg = _items_cfg(cfg_factory, tmp_path, ["The nurse told the patient that she would be late.",
                                             "The developer argued with the designer because she did not like the design."])
    items = eval_items(cfg)
    assert {b for b, _, _ in items} == {"stereoset", "crows", "winogender", "winobias"}
    assert sum(b == "winogender" for b, _, _ in items) == 6 and sum(b == "winobias" for b, _, _ in items) == 6
    from context_cda.ingest.corpus import run_ingest

    summary = run_ingest(cfg, {}, tmp_path / "ingest")
    assert summary["eval_overlap_by_benchmark"] == {"stereoset": 1, "winogender": 1, "winobias": 1}
    rej = pd.read_parquet(tmp_path / "ingest" / "rejected.parquet")
    assert rej[rej["reason"].str.startswith(f"{REASON}: winobias:type1/test/1/anti")]["text"].tolist() == [
        "The developer argued with the designer because she did not like the design."]


def test_both_neutral_arms_reject_a_rewrite_that_is_a_benchmark_sentence(tmp_path):
    """The neutral step's rewrite (context-neutral) and the lexicon's rewrite (cda-neutral) of "He thanked his
    father for the advice." are "They thanked their parent for the advice.", a StereoSet sentence here: the neutral
    step moves it to rejected.parquet with reason eval-overlap and counts it; the cda-neutral arm leaves it out."""
    from context_cda.augment import run_neutral
    from context_cda.train.corpus import load_arm_rows

    src = write_cda_table(tmp_path / "cda.parquet", 3)
    assert pd.read_parquet(src)["original"].iloc[0] == "He thanked his father for the advice."
    cfg = openai_config("http://127.0.0.1:9/v1", tmp_path, max_retries=0)
    cfg.evaluate = cfg.evaluate.model_validate({**cfg.evaluate.model_dump(), **eval_files(
        tmp_path, ("x2", "They thanked their BLANK for the advice.", "They thanked their parent for the advice."))})
    s = run_neutral(cfg, {"counterfactuals": src}, tmp_path / "neutral", generator=Rewriter())
    assert s["eval_overlap"] == 1 and s["eval_overlap_by_benchmark"] == {"stereoset": 1} and s["accepted"] == 2
    rej = pd.read_parquet(tmp_path / "neutral" / "rejected.parquet")
    assert rej["reason"].tolist() == ["eval-overlap: stereoset:x2a 1.00"]
    assert rej["augmented"].tolist() == ["They thanked their parent for the advice."]
    assert "They thanked their parent for the advice." not in pd.read_parquet(
        tmp_path / "neutral" / "augmented.parquet")["augmented"].tolist()
    rows = load_arm_rows("cda-neutral", src, config=cfg)
    assert "They thanked their parent for the advice." not in rows["text"].tolist() and len(rows) == 2
    assert [r["reason"] for r in rows.attrs["left_out"]] == ["eval-overlap: stereoset:x2a 1.00"]
    assert len(load_arm_rows("cda-neutral", src)) == 3  # without a config: nothing to check against


def test_the_report_counts_every_step_that_makes_training_text(tmp_path, cfg_factory):
    """ingest, cda, augment, the neutral step and the cda-neutral arm's finetune each get a row with their counts
    per benchmark; a step that did not run has none."""
    from context_cda.report.baselines import decontamination, decontamination_markdown

    run = tmp_path / "run"
    summaries = {"ingest": {"eval_overlap": 2, "eval_overlap_by_benchmark": {"stereoset": 1, "winobias": 1}},
                 "cda": {"eval_overlap": 0, "eval_overlap_by_benchmark": {}},
                 "augment": {"eval_overlap": 1, "eval_overlap_by_benchmark": {"crows": 1}},
                 "neutral": {"eval_overlap": 1, "eval_overlap_by_benchmark": {"winogender": 1}},
                 "finetune/tg/cda-neutral/seed-13": {"eval_overlap": 3, "eval_overlap_by_benchmark": {"stereoset": 3}},
                 "finetune/tg/cda/seed-13": {"texts": 10}}
    for folder, summary in summaries.items():
        (run / folder).mkdir(parents=True)
        (run / folder / "manifest.json").write_text(json.dumps({"summary": summary}))
    rows = decontamination({"ingest": run / "ingest", "cda": run / "cda", "augment": run / "augment",
                            "finetune": run / "finetune"})
    assert [(r["stage"], r["dropped"]) for r in rows] == [
        ("ingest", 2), ("cda", 0), ("augment", 1), ("neutral", 1), ("finetune (cda-neutral)", 3)]
    text = "\n".join(decontamination_markdown(rows, cfg_factory()))
    assert "| neutral | neutral rewrites (context-neutral) | 1 | winogender: 1 |" in text
    assert "| finetune (cda-neutral) | lexicon neutral rewrites (cda-neutral) | 3 | stereoset: 3 |" in text
    assert "stereoset, crows, winogender, winobias" in text
