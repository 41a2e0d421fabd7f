"""The packaged published Table 1 (``context_cda/resources/published_table1.yaml``) against the paper's table as
the workspace holds it (``paper-table1.md`` beside the benchmark mirror): every cell of every row and both models,
exactly, and nothing more; a dash in the paper is a missing cell here, never a number."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PACKAGED = ROOT / "src" / "context_cda" / "resources" / "published_table1.yaml"
METRICS = ("stereoset_ss", "stereoset_lms", "stereoset_icat", "crows_cs")
HEADERS = {"SS": "stereoset_ss", "LMS": "stereoset_lms", "ICAT": "stereoset_icat", "CS": "crows_cs"}


def _paper_table() -> Path | None:
    """``paper-table1.md`` in the workspace: next to the repository (``../shared``) or to the mirror
    ($CCDA_DATA_DIR's parent); None when neither holds it."""
    places = [ROOT.parent / "shared" / "paper-table1.md"]
    if os.environ.get("CCDA_DATA_DIR"):
        places.append(Path(os.environ["CCDA_DATA_DIR"]).parent / "paper-table1.md")
    return next((p for p in places if p.is_file()), None)


def parse_table(text: str) -> dict[str, dict[str, dict[str, str]]]:
    """``{model: {row: {metric: cell text}}}`` of the Markdown table (cells as printed; dashes kept)."""
    lines = [ln for ln in text.splitlines() if ln.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    out: dict[str, dict[str, dict[str, str]]] = {}
    for ln in lines[2:]:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        for head, value in zip(header[1:], cells[1:], strict=True):
            model, metric = head.rsplit(" ", 1)
            out.setdefault(model, {}).setdefault(cells[0], {})[HEADERS[metric]] = value
    return out


def test_the_parser_reads_a_table_with_dashes():
    text = "| row | BERT SS | GPT-2 CS |\n|---|---:|---:|\n| A | 1.50 | – |\n"
    assert parse_table(text) == {"BERT": {"A": {"stereoset_ss": "1.50"}}, "GPT-2": {"A": {"crows_cs": "–"}}}


def test_every_published_cell_matches_the_paper_table():
    path = _paper_table()
    if path is None:
        pytest.skip("paper-table1.md not in the workspace (../shared or beside $CCDA_DATA_DIR)")
    paper = parse_table(path.read_text(encoding="utf-8"))
    ours = yaml.safe_load(PACKAGED.read_text(encoding="utf-8"))
    assert ours["source"].startswith("Parihar et al.") and "Table 1" in ours["source"]
    names, models = ours["paper_rows"], ours["paper_models"]
    assert set(models.values()) == set(paper), "both of the paper's models are keyed"
    assert set(names.values()) == {row for rows in paper.values() for row in rows}, "all eight rows are named"
    checked = 0
    for ref, paper_model in models.items():
        for key, paper_row in names.items():
            cells = paper[paper_model][paper_row]
            quoted = (ours["models"].get(ref) or {}).get(key)
            if all(v == "–" for v in cells.values()):
                assert quoted is None, f"{ref}/{key}: the paper gives no value, so no row"
                continue
            assert quoted is not None, f"{ref}/{key}: missing"
            assert set(quoted) == {m for m, v in cells.items() if v != "–"}
            for metric, text in cells.items():
                if text != "–":
                    assert f"{quoted[metric]:.2f}" == text, (ref, key, metric)  # as printed, to the last digit
                    checked += 1
    assert set(ours["models"]) == set(models)
    assert sum(len(rows) for rows in ours["models"].values()) == 13 and checked == 52
