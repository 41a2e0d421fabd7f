"""Decontamination: the n-gram index, and the stages that move overlapping training texts to rejected.parquet."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from context_cda.decontam import REASON, EvalIndex, words

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


def _items_cfg(cfg_factory, tmp_path, extra_sentences=()):
    ss = tmp_path / "ss.json"
    ss.write_text(json.dumps({"version": "1.0", "data": {"intersentence": [], "intrasentence": [{
        "id": "x1", "target": "mother", "bias_type": "gender", "context": "My mother is very BLANK at home.",
        "sentences": [{"id": "x1a", "sentence": "My mother is very caring at home.", "gold_label": "stereotype",
                       "labels": []},
                      {"id": "x1b", "sentence": "My mother is very cold at home.", "gold_label": "anti-stereotype",
                       "labels": []},
                      {"id": "x1c", "sentence": "My mother is very fish at home.", "gold_label": "unrelated",
                       "labels": []}]}]}}))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(["He said that my mother is very caring at home every day.",
                                 "He said that his brother was tired after the long walk home.",
                                 "She wrote that her father was happy with the new garden.", *extra_sentences]) + "\n")
    return cfg_factory(ingest={"corpus": "path", "path": str(corpus), "min_words": 4},
                       evaluate={"stereoset_path": str(ss), "crows_path": str(CROWS)})


def test_ingest_rejects_a_sentence_holding_a_benchmark_item(cfg_factory, tmp_path):
    from context_cda.corpus import run_ingest

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
    from context_cda.corpus import run_ingest

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
    from context_cda.decontam import index_for
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
