"""A stage function run inside the step envelope (context_cda.steps) with a test's own inputs and folder: the
manifest, the item-error policy (exit 75 unless run.allow_errors) and the up-to-date marker, as every door gets
them. Called directly, a stage function only writes its tables."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from context_cda import stages as T
from context_cda import steps as E


def enveloped(config, step: str, fn: Callable[..., Any] | None, inputs: Mapping[str, Any], out: Path | str,
              keys: Mapping[str, Any] | None = None, **options: Any) -> dict[str, Any]:
    """``fn`` (default: the row's function) as a step of row ``step`` with fan-out ``keys`` (its name in messages:
    ``sample``, ``entropy[fake]``), reading ``inputs`` and writing ``out``; returns the summary."""
    row = T.get(step)
    st = E.Step(row, dict(keys or {}), Path(out), {k: Path(v) for k, v in inputs.items()}, {})
    return E.run(st, config, check=False, body=fn, **options).summary
