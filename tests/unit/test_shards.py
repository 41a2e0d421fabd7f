"""Generation parts: stable assignment, the exactly-once merge check, summed summaries, and the runner's parts
giving the same result as one part."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from context_cda.errors import InputError
from context_cda.items import (
    concat_in_order,
    merge_parts,
    part_folders,
    part_of,
    read_part_table,
    sum_summaries,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))


def test_part_of_is_stable_and_spreads_the_items():
    ids = [f"id{i}" for i in range(3000)]
    parts = [part_of(i, 3) for i in ids]
    assert parts == [part_of(i, 3) for i in ids]  # the same in every run and order
    counts = Counter(parts)
    assert set(counts) == {0, 1, 2} and min(counts.values()) > 900
    assert {part_of(i, 1) for i in ids} == {0}


def test_merge_refuses_a_missing_or_doubled_item():
    a, b = pd.DataFrame({"id": ["x", "y"]}), pd.DataFrame({"id": ["z"]})
    assert list(merge_parts([a, b], "id", ["x", "y", "z"], "t")["id"]) == ["x", "y", "z"]
    with pytest.raises(InputError, match="appear twice.*'y'"):
        merge_parts([a, pd.DataFrame({"id": ["y", "z"]})], "id", ["x", "y", "z"], "t")
    with pytest.raises(InputError, match="in no generation part.*'w'"):
        merge_parts([a, b], "id", ["x", "y", "z", "w"], "t")


def test_part_folders_name_the_missing_part(tmp_path):
    for i in (0, 2):
        (tmp_path / "augment-parts" / f"part-{i}").mkdir(parents=True)
    with pytest.raises(InputError, match=r"part\(s\) \[1\] of 3"):
        part_folders(tmp_path / "augment-parts", "augment-part", 3)
    assert [p.name for p in part_folders(tmp_path / "augment-parts", "augment-part", 1)] == ["part-0"]


def test_summaries_add_up_counts_and_keep_the_rest():
    merged = sum_summaries([{"accepted": 2, "reject_reasons": {"len": 1}, "gen_model": "m", "tokens_per_s": 9.0},
                            {"accepted": 3, "reject_reasons": {"len": 2, "lang": 1}, "gen_model": "m"}])
    assert merged == {"accepted": 5, "reject_reasons": {"len": 3, "lang": 1}, "gen_model": "m"}


def test_parts_are_read_and_joined_in_the_input_order(tmp_path):
    a = pd.DataFrame({"id": ["z", "x", "x"], "sample_idx": [0, 1, 0], "v": [1, 2, 3]})
    b = read_part_table(tmp_path / "absent.parquet", "id")
    assert list(b.columns) == ["id"] and len(b) == 0
    c = pd.DataFrame({"id": ["y"], "sample_idx": [0], "v": [4]})
    got = concat_in_order([b, a, c], "id", {"x": 0, "y": 1, "z": 2}, then="sample_idx")
    assert got["id"].tolist() == ["x", "x", "y", "z"] and got["v"].tolist() == [3, 2, 4, 1]
    assert list(got.index) == [0, 1, 2, 3]
    assert concat_in_order([a[["id", "v"]]], "id", {"x": 0, "z": 1}, then="sample_idx")["v"].tolist() == [2, 3, 1]
    assert concat_in_order([b, b], "id", {}).columns.tolist() == ["id"]


@pytest.mark.services
def test_three_parts_give_what_one_part_gives(tmp_path):
    """The runner with pipeline.generation_shards = 3: augment and entropy in three parts, merged once, give the
    same tables as one part (the fake generator answers by sentence, so every item's output is the same)."""
    import tiny_pipeline as tp
    from fake_openai import FakeOpenAIServer

    from context_cda import layout as L
    from context_cda.pipeline import run_pipeline

    with FakeOpenAIServer() as srv:
        tables = {}
        for k in (1, 3):
            cfg = tp.tiny_config(srv.base_url, run_dir=tmp_path / f"k{k}")
            cfg.pipeline.generation_shards = k
            run_pipeline(cfg, until="validate-entropy")
            lay = L.RunLayout(cfg.run_dir())
            tables[k] = (pd.read_parquet(lay.augmented), pd.read_parquet(lay.scores("tiny-gpt2")))
            assert len(list((cfg.run_dir() / "augment-parts").iterdir())) == k
    aug1, aug3 = tables[1][0], tables[3][0]
    pd.testing.assert_frame_equal(aug1[["id", "cda_id", "augmented"]], aug3[["id", "cda_id", "augmented"]])
    assert list(tables[1][1]["id"]) == list(tables[3][1]["id"])
