"""Semantic entropy: the M samples and their clusters, the target's likelihoods, the estimators, the filter.
May import: the run contract, augment (the review), generation, scoring.

For each contextual counterfactual x: sample M rephrasings (:mod:`.sampling`, through the augment stage's
``Generator``) and cluster them by bidirectional entailment (:mod:`.clustering` with a judge from
:mod:`context_cda.generation.judges`), once for every target (the sample step, :mod:`.samples`); then, per target model, score
log p(s | x) (:mod:`.likelihood`, the shared ``Scorer``) and estimate semantic entropy (:mod:`.estimators`, pure
numpy; the entropy step, :mod:`.stage`); then drop the top k % (:mod:`.filter`).

``run_sample`` (one generation part), ``run_sample_merge`` (the parts joined), ``run_entropy`` (one target) and
``run_filter`` are loaded lazily: importing this package imports neither torch nor pandas.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"run_sample": ".samples", "run_sample_merge": ".merge", "run_entropy": ".stage", "run_filter": ".filter"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
