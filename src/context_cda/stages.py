"""The stage registry: every front door (CLI, local runner, DVC, KFP components) finds stages here.

Each stage is one library function with the same shape::

    run_<stage>(config: Config, inputs: Mapping[str, Path], out_dir: Path, **options) -> dict  # summary

It reads only the files named in ``inputs``, writes only below ``out_dir`` (tables atomically, a
``manifest.json`` last), and returns a JSON-serialisable summary (row counts in/out/rejected and stage figures).
``options`` carry per-invocation choices that are not config (the target model name, the arm, the benchmark
boundary being validated).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

STAGES: dict[str, str] = {
    "ingest": "context_cda.corpus:run_ingest",
    "cda": "context_cda.cda:run_cda",
    "validate": "context_cda.validation:run_validate",
    "augment": "context_cda.augment:run_augment",
    "entropy": "context_cda.entropy:run_entropy",
    "filter": "context_cda.entropy:run_filter",
    "finetune": "context_cda.train:run_finetune",
    "evaluate": "context_cda.evaluate:run_evaluate",
    "register": "context_cda.tracking:run_register",
    "report": "context_cda.report:run_report",
}

ORDER = list(STAGES)


def get_stage(name: str) -> Callable[..., dict[str, Any]]:
    """Import and return the stage function (heavy libraries load only now)."""
    try:
        target = STAGES[name]
    except KeyError:
        raise KeyError(f"unknown stage {name!r}; stages: {', '.join(STAGES)}") from None
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)
