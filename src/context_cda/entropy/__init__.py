"""Semantic-entropy filtering (step 3 of Context-CDA).

For each contextual counterfactual x: sample M rephrasings (:mod:`.sampling`, through the augment stage's
``Generator``), score log p(s | x) under the *target* model (:mod:`.likelihood`, the shared ``Scorer``), cluster
the samples by bidirectional entailment (:mod:`.clustering` with a judge from :mod:`context_cda.judges`), estimate semantic
entropy (:mod:`.estimators`, pure numpy), then drop the top k % (:mod:`.filter`).

``run_entropy`` (one generation part), ``run_entropy_merge`` (the parts joined) and ``run_filter`` are loaded
lazily: importing this package imports neither torch nor pandas.
"""

from __future__ import annotations

from typing import Any

__all__ = ["run_entropy", "run_entropy_merge", "run_filter"]


def __getattr__(name: str) -> Any:
    if name == "run_entropy":
        from .stage import run_entropy

        return run_entropy
    if name == "run_entropy_merge":
        from .merge import run_entropy_merge

        return run_entropy_merge
    if name == "run_filter":
        from .filter import run_filter

        return run_filter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
