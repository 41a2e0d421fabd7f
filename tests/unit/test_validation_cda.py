import json

import pandas as pd

from context_cda.io import write_table
from context_cda.validation import run_validate


def table(tmp_path, rows):
    p = tmp_path / "cf.parquet"
    write_table(pd.DataFrame(rows), p)
    return p


def row(i, original, cf, n=1):
    return {"id": i, "source_id": f"s{i}", "original": original, "counterfactual": cf, "swapped_terms": ["x"],
            "n_swaps": n, "direction": "m2f", "applied": True}


def test_cda_suite_quarantines_with_reasons(tmp_path, cfg_factory):
    rows = [
        row("a", "He thanked his mother.", "She thanked her father."),
        row("b", "He thanked his mother.", "He thanked his mother.", n=0),  # unchanged, no swap, leftovers
        row("c", "He thanked his mother today.", "She thanked his mother today."),  # his/mother left
        row("a", "He came home.", "She came home."),  # duplicate id
        row("e", "He left the house.", "She left the house and then went on and on and on and on and on."),
    ]
    from context_cda import steps as E

    cfg = cfg_factory()  # through the step envelope, as every door runs it: with its manifest
    summary = E.run(E.make(cfg, "validate-cda", inputs={"cda": table(tmp_path, rows)}), cfg).summary
    out = cfg.run_dir() / "validate" / "cda"
    valid = pd.read_parquet(out / "valid.parquet")
    quarantine = pd.read_parquet(out / "quarantine.parquet")
    assert summary["success"] is False
    assert summary["rows_in"] == 5 and summary["rows_valid"] == 1 and summary["rows_quarantined"] == 4
    reasons = dict(zip(quarantine.id + quarantine.original.str[:7], quarantine.reason, strict=True))
    assert set(reasons["bHe than"].split("; ")) == {"no-swap", "unchanged", "original-gender-term-left"}
    assert reasons["cHe than"] == "original-gender-term-left"
    assert "duplicate-id" in reasons["aHe came"]
    assert reasons["eHe left"] == "length-ratio-out-of-bounds"
    assert list(valid.id) == ["a"] and list(valid.columns) == list(pd.DataFrame([rows[0]]).columns)
    results = json.loads((out / "results.json").read_text())
    assert results["gx"]["success"] is False and len(results["failed"]) == 5
    assert (out / "manifest.json").is_file()


def test_cda_suite_passes_on_real_output(tmp_path, cfg_factory):
    from context_cda.cda.stage import run_cda

    cfg = cfg_factory()
    src = tmp_path / "s.parquet"
    write_table(pd.DataFrame({"id": ["1", "2"], "text": ["He gave her the book.", "The men thanked their wives."]}), src)
    run_cda(cfg, {"sentences": src})
    summary = run_validate(cfg, {}, boundary="cda")
    assert summary["success"] and summary["rows_valid"] == 2
