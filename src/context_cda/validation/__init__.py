"""Great Expectations suites at the stage boundaries, and the ``validate`` stage.
May import: the run contract, augment, cda.

Each boundary has a module here (``cda``, ``augment``, ``neutral``, ``entropy``) with ``prepare(df, config)`` and
``checks(config)``; :func:`run_validate` runs one of them through :func:`~context_cda.validation.core.validate_table`.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import schemas as S
from ..layout import QUARANTINE_FILE, RESULTS_FILE, VALID_FILE

#: boundary -> its suite module
BOUNDARIES: dict[str, str] = {
    "cda": "context_cda.validation.cda",
    "augment": "context_cda.validation.augment",
    "neutral": "context_cda.validation.neutral",
    "entropy": "context_cda.validation.entropy",
}

EXCLUDED = "excluded-by-reviewer"

#: boundary -> the columns its suite reads and what they hold; a table without them (or with a column of another
#: type) is an input error naming the file, not a table whose every row is quarantined
TABLE_COLUMNS: dict[str, dict[str, str]] = {
    "cda": {S.ID: "id", S.ORIGINAL: "text", S.COUNTERFACTUAL: "text"},
    "augment": {S.ID: "id", S.CDA_ID: "id", S.COUNTERFACTUAL: "text", S.AUGMENTED: "text"},
    "neutral": {S.ID: "id", S.CDA_ID: "id", S.COUNTERFACTUAL: "text", S.AUGMENTED: "text"},
    "entropy": {S.ID: "id", S.TEXT: "text"},
}
TYPED_IF_PRESENT: dict[str, str] = {S.SE: "number", S.N_SWAPS: "number", S.ORIGINAL: "text"}


def run_validate(
    config,
    inputs: Mapping[str, Path] | None = None,
    out_dir: Path | None = None,
    boundary: str | None = None,
    target: str | None = None,
) -> dict[str, Any]:
    """Validate the table at a boundary (``boundary``, or the single key of ``inputs``); write the valid rows,
    the quarantined ones (with reasons) and the results (file names: :mod:`context_cda.layout`) below ``out_dir``. ``target`` only labels the
    manifest (the entropy boundary is per target)."""
    from ..errors import ConfigError, InputError
    from ..io import read_table, require_columns, require_rows
    from .core import validate_table

    inputs = dict(inputs or {})
    if boundary is None:
        if len(inputs) != 1:
            raise ConfigError(f"validate: name the boundary ({', '.join(BOUNDARIES)}).")
        boundary = next(iter(inputs))
    if boundary not in BOUNDARIES:
        raise ConfigError(f"validate: unknown boundary {boundary!r}; known: {', '.join(BOUNDARIES)}.")
    from ..layout import BOUNDARY_STEPS
    from ..stages import resolve_io
    from ..steps import Counts, recorder

    inputs, out = resolve_io(config, BOUNDARY_STEPS[boundary], inputs, out_dir,
                             **({"target": target} if target is not None else {}))
    src = inputs[boundary]
    module = importlib.import_module(BOUNDARIES[boundary])
    rec = recorder(out)
    df = read_table(src)
    if S.ID not in df.columns:
        raise InputError(f"{src}: no '{S.ID}' column; validate reads stage outputs, which always have one.")
    require_columns(df, {**{c: k for c, k in TYPED_IF_PRESENT.items() if c in df.columns},
                         **TABLE_COLUMNS[boundary]}, src)
    require_rows(df, src, f"Nothing to validate at the {boundary} boundary: the stage before it kept no row (its "
                 "rejected and errors tables say why).")
    prepared = module.prepare(df, config)
    with rec.timed("suite"):
        summary = validate_table(prepared, module.checks(config) + reviewer_checks(config, boundary), boundary,
                                 out, keep_columns=list(df.columns))
    rec.finish(
        Counts(items_in=summary["rows_in"], out=summary["rows_valid"], rejected=summary["rows_quarantined"]),
        outputs={"valid": out / VALID_FILE, "quarantine": out / QUARANTINE_FILE, "results": out / RESULTS_FILE},
        summary=summary,
    )
    if config.validate_.fail_on_error and not summary["success"]:
        raise InputError(
            f"validate {boundary}: {summary['rows_quarantined']} row(s) failed; see {out / RESULTS_FILE} and "
            f"{out / QUARANTINE_FILE}."
        )
    return summary


def reviewer_checks(config, boundary: str) -> list:
    """Rows a reviewer excluded by id at this boundary (``validate.exclude_ids[boundary]``)."""
    ids = list(config.validate_.exclude_ids.get(boundary, []))
    if not ids:
        return []
    import great_expectations.expectations as gxe

    from .core import Check

    return [Check(gxe.ExpectColumnValuesToNotBeInSet(column=S.ID, value_set=ids), EXCLUDED)]
