"""Great Expectations suites at the stage boundaries, and the ``validate`` stage.

Each boundary has a module here (``cda``, ``augment``, ``entropy``) with ``prepare(df, config)`` and
``checks(config)``; :func:`run_validate` runs one of them through :func:`~context_cda.validation.core.validate_table`.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import schemas as S

#: boundary -> (suite module, default input relative to the run dir)
BOUNDARIES: dict[str, tuple[str, str]] = {
    "cda": ("context_cda.validation.cda", f"cda/{S.CDA_FILE}"),
    "augment": ("context_cda.validation.augment", f"augment/{S.AUGMENT_FILE}"),
    "entropy": ("context_cda.validation.entropy", f"entropy/{{target}}/{S.ENTROPY_FILE}"),
}


def default_input(config, boundary: str, target: str | None = None) -> Path:
    rel = BOUNDARIES[boundary][1]
    if "{target}" in rel:
        rel = rel.format(target=target or next(iter(config.run.targets)))
    return config.run_dir() / rel


def run_validate(
    config,
    inputs: Mapping[str, Path],
    out_dir: Path | None = None,
    boundary: str | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Validate the table at a boundary; the boundary is ``boundary`` or the single key of ``inputs``."""
    from ..errors import ConfigError, InputError
    from ..io import StageRecorder, read_table
    from .core import validate_table

    inputs = dict(inputs or {})
    if boundary is None:
        if len(inputs) != 1:
            raise ConfigError(f"validate: name the boundary ({', '.join(BOUNDARIES)}).")
        boundary = next(iter(inputs))
    if boundary not in BOUNDARIES:
        raise ConfigError(f"validate: unknown boundary {boundary!r}; known: {', '.join(BOUNDARIES)}.")
    src = Path(inputs.get(boundary) or default_input(config, boundary, options.get("target")))
    sub = boundary if not options.get("target") else f"{boundary}/{options['target']}"
    out = Path(out_dir) if out_dir else config.run_dir() / "validate" / sub
    module = importlib.import_module(BOUNDARIES[boundary][0])
    rec = StageRecorder(f"validate-{boundary}", out, {"validate": config.validate_.model_dump(),
                                                      "lexicon": config.lexicon.model_dump()}, {boundary: src})
    df = read_table(src)
    if S.ID not in df.columns:
        raise InputError(f"{src}: no '{S.ID}' column; validate reads stage outputs, which always have one.")
    prepared = module.prepare(df, config)
    with rec.timed("suite"):
        summary = validate_table(prepared, module.checks(config), boundary, out, keep_columns=list(df.columns))
    rec.finish(
        {"rows_in": summary["rows_in"], "rows_out": summary["rows_valid"],
         "rows_rejected": summary["rows_quarantined"]},
        outputs={"valid": out / S.VALID_FILE, "quarantine": out / S.QUARANTINE_FILE,
                 "results": out / S.RESULTS_FILE},
        summary=summary,
    )
    if config.validate_.fail_on_error and not summary["success"]:
        raise InputError(
            f"validate {boundary}: {summary['rows_quarantined']} row(s) failed; see {out / S.RESULTS_FILE} and "
            f"{out / S.QUARANTINE_FILE}."
        )
    return summary
