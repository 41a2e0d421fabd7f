"""The great-expectations suite at the augment boundary (`ccda validate --stage augment`)."""

from __future__ import annotations

import pandas as pd
import pytest

from context_cda.config import Config
from context_cda.validation import augment as suite

ROWS = [
    # id, cda_id, counterfactual, augmented, attempts, expected reason (substring, '' = valid)
    ("a1", "c1", "She thanked her mother.", "After dinner, she thanked her mother warmly.", 1, ""),
    ("a2", "c2", "The queen said she would return.", "The queen said she would return.", 1, "identical"),
    ("a3", "c3", "His brother worked at the hospital.", "I'm sorry, but I cannot help with this.", 2, "refusal"),
    ("a4", "c4", "His brother worked at the hospital.", "Her brother worked at the busy city hospital.", 1,
     "gender-contradiction"),
    ("a5", "c5", "The actor thanked his fans.", "Thanks.", 1, "too-short"),
    ("a6", "c1", "She thanked her mother.", "Later, she thanked her mother for everything.", 1, "duplicate-cda-id"),
    ("a7", "c7", "She thanked her mother.", "Later that day, she thanked her mother again.", 9,
     "attempts-out-of-range"),
    ("a8", "c8", "My aunt and her husband left.", "Last year my aunt and her husband left Paris.", 1, ""),
    ("a9", "c9", "In 1998 she moved to Berlin.", "In 1998, after a long winter, she moved to Paris.", 1,
     "entity-missing"),
    ("a10", "c10", "She said she would resign.", "Elle a dit qu'elle démissionnerait bientôt.", 1, "language"),
]


@pytest.fixture
def table():
    df = pd.DataFrame(ROWS, columns=["id", "cda_id", "counterfactual", "augmented", "attempts", "expected"])
    df["gen_model"] = "m"
    df["prompt_version"] = "v1"
    df["raw_output"] = df["augmented"]
    return df


def test_row_checks(table):
    reasons = suite.row_checks(table.drop(columns="expected"), Config())
    for got, exp in zip(reasons, table["expected"], strict=True):
        assert (exp in got) if exp else got == "", (got, exp)


def test_gx_suite_quarantines_with_reasons(table, tmp_path):
    pytest.importorskip("great_expectations")
    from context_cda.validation import run_validate

    src = tmp_path / "augmented.parquet"
    table.drop(columns="expected").to_parquet(src)
    summary = run_validate(Config(), {"augment": src}, tmp_path / "v")
    q = pd.read_parquet(tmp_path / "v" / "quarantine.parquet").set_index("id")
    valid = pd.read_parquet(tmp_path / "v" / "valid.parquet")
    assert set(valid["id"]) == {"a1", "a8"}
    for rid, exp in zip(table["id"], table["expected"], strict=True):
        if exp:
            assert exp in q.loc[rid, "reason"], (rid, q.loc[rid, "reason"])
    assert summary["rows_quarantined"] == 8
    assert len(suite.expectations(Config())) == len(suite.checks(Config())) + 1


def test_suite_is_the_augment_review(table):
    """One source of truth: a row passes the suite's review columns exactly when the augment review accepts it,
    with the swaps the stage wrote beside the row."""
    from context_cda.augment import review
    from context_cda.augment.stage import load_attribute_lexicon

    df = table.drop(columns="expected").assign(swapped_terms=[["he->she"]] * len(table),
                                               original=["He thanked his mother."] + [None] * (len(table) - 1))
    p = suite.prepare(df, Config())
    lex = load_attribute_lexicon(Config())
    for (_, row), (_, prow) in zip(df.iterrows(), p.iterrows(), strict=True):
        v = review(row["original"], row["counterfactual"], row["augmented"], lexicon=lex, swaps=["he->she"])
        flagged = {c.removeprefix(suite.REVIEW_PREFIX) for c in p.columns
                   if c.startswith(suite.REVIEW_PREFIX) and prow[c]}
        assert flagged == set(v.kinds), (row["id"], flagged, v.reasons)


def test_swapped_terms_cells_of_every_shape_are_the_same_swaps():
    """A bare string "She->He" is one swap (not its characters), like ["She->He"] or an array; missing is none."""
    import numpy as np

    from context_cda.augment import parse_swaps, swap_terms

    assert swap_terms("She->He") == ["She->He"] and parse_swaps("She->He") == [("she", "he")]
    assert swap_terms(np.array(["She->He", "her->his"])) == ["She->He", "her->his"]
    assert swap_terms(None) == swap_terms(float("nan")) == []
    cells = ["She->He", ["She->He"], np.array(["She->He"])]
    df = pd.DataFrame({"id": ["x", "y", "z"], "cda_id": ["c1", "c2", "c3"],
                       "counterfactual": ["He called his sister."] * 3,
                       "augmented": ["On Sunday she called his sister."] * 3, "attempts": 1, "gen_model": "m",
                       "prompt_version": "v1", "raw_output": "", "swapped_terms": pd.Series(cells, dtype=object)})
    assert [v.kinds for v in suite.review_table(df, Config())] == [("gender-contradiction",)] * 3


def test_review_file_reads_a_bare_string_and_a_missing_swap_cell(tmp_path):
    from context_cda.augment.verdicts import review_frame

    df = pd.DataFrame({"counterfactual": ["He called his sister."] * 2,
                       "output": ["On Sunday she called his sister."] * 2, "swapped_terms": ["She->He", None]})
    df.loc[1, "swapped_terms"] = float("nan")  # a CSV's empty cell
    table = review_frame(df, Config(), cf_col="counterfactual", out_col="output")
    assert table["reason"].tolist() == ["gender-contradiction: she", ""]
