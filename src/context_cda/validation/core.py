"""Great Expectations (1.x) at stage boundaries: run a suite on a table, quarantine failing rows with reasons.

A boundary's suite module (``validation/<boundary>.py``) provides two functions:

* ``prepare(df, config) -> DataFrame``: the table plus any derived columns its expectations look at
  (``length_ratio``, ``leftover_terms`` ...), computed with the project's own code (lexicon, swapper);
* ``checks(config) -> list[Check]``: GX expectations, each with the ``reason`` written for the rows it fails.

:func:`validate_table` runs the suite in an ephemeral GX context with ``COMPLETE`` results indexed by the row
``id``, so every failing row is known by id; rows failing any expectation go to ``quarantine.parquet`` with all
their reasons joined by ``; ``, the rest to the valid table, and the GX result (JSON) to the results file (names:
:mod:`context_cda.layout`).
Table-level expectations (those without row results) fail the suite without quarantining rows.
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import schemas as S
from ..io import write_json, write_table
from ..layout import QUARANTINE_FILE, RESULTS_FILE, VALID_FILE


@dataclass
class Check:
    expectation: Any  # a great_expectations.expectations.Expectation
    reason: str


def _quiet_gx() -> None:
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    logging.getLogger("great_expectations").setLevel(logging.ERROR)


ROW = "_row"  # positional row key: ids may repeat in a table that fails the unique-id expectation


def run_suite(df, checks: list[Check], suite_name: str, id_column: str = ROW):
    """Run the expectations on ``df``; return the GX ExpectationSuiteValidationResult."""
    _quiet_gx()
    import great_expectations as gx
    from tqdm import tqdm

    ctx = gx.get_context(mode="ephemeral")
    ds = ctx.data_sources.add_pandas(f"{suite_name}-source")
    asset = ds.add_dataframe_asset(f"{suite_name}-table")
    batch_def = asset.add_batch_definition_whole_dataframe(f"{suite_name}-batch")
    suite = ctx.suites.add(gx.ExpectationSuite(name=suite_name))
    for c in checks:
        suite.add_expectation(c.expectation)
    batch = batch_def.get_batch(batch_parameters={"dataframe": df})
    # GX prints a progress bar per metric; silence it (our CLI prints its own summary)
    orig = tqdm.__init__

    def quiet(self, *a, **k):
        k["disable"] = True
        orig(self, *a, **k)

    tqdm.__init__ = quiet
    try:
        return batch.validate(
            suite, result_format={"result_format": "COMPLETE", "unexpected_index_column_names": [id_column]}
        )
    finally:
        tqdm.__init__ = orig


def validate_table(
    df,
    checks: list[Check],
    boundary: str,
    out_dir: Path,
    keep_columns: list[str] | None = None,
) -> dict[str, Any]:
    """Validate ``df``; write valid/quarantine tables and results.json; return a summary."""
    import pandas as pd

    out_dir = Path(out_dir)
    df = df.reset_index(drop=True)
    df[ROW] = range(len(df))
    if len(df) == 0:
        result_json: dict[str, Any] = {"success": True, "results": [], "note": "empty table"}
        reasons_by_row: dict[int, list[str]] = {}
        failed_expectations: list[dict[str, Any]] = []
    else:
        result = run_suite(df, checks, f"{boundary}-suite", ROW)
        result_json = result.to_json_dict()
        reasons_by_row = defaultdict(list)
        failed_expectations = []
        by_id = {c.expectation.id: c for c in checks}  # GX does not keep the suite's order in its results
        for res in result.results:
            check = by_id[res.expectation_config.id]
            if res.success:
                continue
            idx = res.result.get("unexpected_index_list") or []
            failed_expectations.append({
                "expectation": res.expectation_config.type,
                "column": res.expectation_config.kwargs.get("column"),
                "reason": check.reason,
                "unexpected_count": res.result.get("unexpected_count", len(idx)),
            })
            for item in idx:
                reasons_by_row[int(item[ROW])].append(check.reason)
    cols = keep_columns or [c for c in df.columns if c != ROW]
    bad = df[ROW].isin(reasons_by_row)
    valid = df.loc[~bad, cols].reset_index(drop=True)
    quarantine = df.loc[bad, cols].reset_index(drop=True)
    quarantine[S.REASON] = pd.Series(
        ["; ".join(dict.fromkeys(reasons_by_row[int(r)])) for r in df.loc[bad, ROW]], dtype="string"
    )
    write_table(valid, out_dir / VALID_FILE)
    write_table(quarantine, out_dir / QUARANTINE_FILE)
    reason_counts: dict[str, int] = defaultdict(int)
    for reasons in reasons_by_row.values():
        for r in dict.fromkeys(reasons):
            reason_counts[r] += 1
    summary = {
        "boundary": boundary,
        "success": bool(result_json.get("success")),
        "expectations": len(checks),
        "expectations_failed": len(failed_expectations),
        "rows_in": len(df),
        "rows_valid": len(valid),
        "rows_quarantined": len(quarantine),
        "quarantined_by_reason": dict(sorted(reason_counts.items())),
    }
    write_json(out_dir / RESULTS_FILE, {"summary": summary, "failed": failed_expectations, "gx": result_json})
    return summary
