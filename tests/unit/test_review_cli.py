"""`ccda augment review --input FILE`: outputs of any generator, JSONL/CSV/Parquet, a verdict table."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from context_cda.augment.verdicts import review_file
from context_cda.config import Config
from context_cda.errors import InputError

ROWS = [
    {"id": "r1", "original": "He thanked his father.", "counterfactual": "She thanked her mother.",
     "output": "After dinner, she thanked her mother for everything."},
    {"id": "r2", "original": "He thanked his father.", "counterfactual": "She thanked her mother.",
     "output": "After dinner, he thanked her mother for everything."},
    {"id": "r3", "original": None, "counterfactual": "She moved to Berlin in 1998.",
     "output": "Elle a déménagé à Paris en 1999 avec sa famille."},
]


def _write(path, rows):
    df = pd.DataFrame(rows)
    if path.suffix == ".csv":
        df.to_csv(path, index=False)
    elif path.suffix == ".jsonl":
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    else:
        df.to_parquet(path)
    return path


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_review_file_formats(tmp_path, suffix):
    src = _write(tmp_path / f"outputs{suffix}", ROWS)
    s = review_file(Config(), src)
    table = pd.read_parquet(tmp_path / "outputs.review.parquet")
    assert list(table.columns) == ["row", "id", "counterfactual", "output", "accepted", "text", "reason", "kinds"]
    assert list(table["accepted"]) == [True, False, False] and s["accepted"] == 1 and s["rejected"] == 2
    r2, r3 = table.iloc[1], table.iloc[2]
    assert "gender-contradiction" in list(r2["kinds"])  # the swap was read off the original
    assert {"language", "number-missing", "entity-missing"} <= set(r3["kinds"])
    assert s["reasons"]["language"] == 1


def test_review_file_augmented_column_and_jsonl_out(tmp_path):
    rows = [{"counterfactual": r["counterfactual"], "augmented": r["output"], "swapped_terms": ["he->she"]}
            for r in ROWS[:2]]
    src = _write(tmp_path / "aug.parquet", rows)
    out = tmp_path / "verdicts.jsonl"
    s = review_file(Config(), src, out)
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [g["accepted"] for g in got] == [True, False] and s["verdicts"] == str(out) and "id" not in got[0]


def test_missing_columns_name_file_found_and_needed(tmp_path):
    src = _write(tmp_path / "bad.csv", [{"sentence": "x", "generated": "y"}])
    with pytest.raises(InputError) as e:
        review_file(Config(), src)
    msg = str(e.value)
    assert str(src) in msg and "found sentence, generated" in msg
    assert "missing column counterfactual and output or augmented" in msg
    # a named output column that is absent
    src2 = _write(tmp_path / "bad2.csv", [{"counterfactual": "x", "output": "y"}])
    with pytest.raises(InputError, match="missing column text"):
        review_file(Config(), src2, output_column="text")


def test_cli_review_and_stage_still_default(tmp_path):
    from context_cda.cli import main

    src = _write(tmp_path / "outputs.jsonl", ROWS)
    assert main(["augment", "review", "--input", str(src), "--out", str(tmp_path / "v.parquet")]) == 0
    assert pd.read_parquet(tmp_path / "v.parquet")["accepted"].tolist() == [True, False, False]
    bad = _write(tmp_path / "bad.csv", [{"a": 1}])
    assert main(["augment", "review", "--input", str(bad)]) == 2  # a clear one-line error, exit 2
    # `ccda augment` without a subcommand is the stage, with all its options
    from typer.testing import CliRunner

    from context_cda.cli import app

    help_text = CliRunner().invoke(app, ["augment", "--help"]).output
    for flag in ("--input", "--out", "--backend", "--model", "--base-url", "--limit", "--batch-size",
                 "--no-progress", "review"):
        assert flag in help_text
