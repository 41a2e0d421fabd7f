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
     "gender-changed"),
    ("a5", "c5", "The actor thanked his fans.", "Thanks.", 1, "length-ratio-out-of-bounds"),
    ("a6", "c1", "She thanked her mother.", "Later, she thanked her mother for everything.", 1, "duplicate-cda-id"),
    ("a7", "c7", "She thanked her mother.", "Later that day, she thanked her mother again.", 9,
     "attempts-out-of-range"),
    ("a8", "c8", "My aunt and her husband left.", "Last year my aunt and her husband left Paris.", 1, ""),
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
    assert summary["rows_quarantined"] == 6
    assert len(suite.expectations(Config())) == len(suite.checks(Config())) + 1
