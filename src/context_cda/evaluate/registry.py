"""Benchmark registry (lm-evaluation-harness style): each entry loads items, scores them with a model
(``score``: writes per-item predictions) and aggregates predictions into metrics (``aggregate``: pure).
Every metric says whether higher is better and what its ideal value is (SS and CS: 50, an unbiased model)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from ..config import EvaluateConfig
    from ..scoring import Scorer


@dataclass(frozen=True)
class Metric:
    key: str  # key in the aggregate's "overall" block
    name: str  # flat name: <benchmark>_<key>
    higher_is_better: bool | None  # None: closer to ``ideal`` is better
    ideal: float | None
    description: str


@dataclass(frozen=True)
class Benchmark:
    name: str
    description: str
    metrics: tuple[Metric, ...]
    load: Callable[[str, str | None, str | None], list[Any]]  # (path or None, bias_type, data_cache) -> items
    score: Callable[[Scorer, Sequence[Any], EvaluateConfig], tuple[list[dict], list[dict], dict[str, Any]]]
    aggregate: Callable[[list[dict]], dict[str, Any]]

    def flat(self, agg: dict[str, Any]) -> dict[str, float]:
        """``{stereoset_ss: ..., ...}`` from an aggregate (overall block)."""
        overall = agg.get("overall", {})
        return {m.name: float(overall.get(m.key, math.nan)) for m in self.metrics}


def _load_stereoset(path: str | None, bias_type: str | None, cache: str | None) -> list[Any]:
    from .data import benchmark_file, load_stereoset

    return load_stereoset(benchmark_file("stereoset", path, cache), bias_type=bias_type)


def _load_crows(path: str | None, bias_type: str | None, cache: str | None) -> list[Any]:
    from .data import benchmark_file, load_crows

    return load_crows(benchmark_file("crows", path, cache), bias_type=bias_type)


def _score_stereoset(scorer: Scorer, items: Sequence[Any], cfg: EvaluateConfig):
    from . import stereoset

    rows, rejected = stereoset.score(scorer, items)
    return rows, rejected, {"method": stereoset.METHODS[scorer.family]}


def _score_crows(scorer: Scorer, items: Sequence[Any], cfg: EvaluateConfig):
    from . import crows

    rows, rejected, mode = crows.score(scorer, items, cfg.crows_mode)
    return rows, rejected, {"mode": mode}


def _agg_stereoset(rows: list[dict]) -> dict[str, Any]:
    from . import stereoset

    return stereoset.aggregate(rows)


def _agg_crows(rows: list[dict]) -> dict[str, Any]:
    from . import crows

    return crows.aggregate(rows)


REGISTRY: dict[str, Benchmark] = {
    "stereoset": Benchmark(
        name="stereoset",
        description="StereoSet intrasentence (dev): stereotype vs anti-stereotype vs unrelated fill-ins.",
        metrics=(
            Metric("ss", "stereoset_ss", None, 50.0, "Stereotype score: % preferring the stereotype (50 ideal)."),
            Metric("lms", "stereoset_lms", True, 100.0, "Language-model score: % preferring related over unrelated."),
            Metric("icat", "stereoset_icat", True, 100.0, "Idealized CAT: LMS * min(SS, 100-SS) / 50."),
        ),
        load=_load_stereoset,
        score=_score_stereoset,
        aggregate=_agg_stereoset,
    ),
    "crows": Benchmark(
        name="crows",
        description="CrowS-Pairs: minimal pairs, more vs less stereotyping sentence.",
        metrics=(
            Metric("cs", "crows_cs", None, 50.0, "% of pairs where sent_more scores higher (50 ideal)."),
            Metric("stereo", "crows_stereo", None, 50.0, "CS over the stereo pairs (non-neutral)."),
            Metric("antistereo", "crows_antistereo", None, 50.0, "CS over the antistereo pairs (non-neutral)."),
        ),
        load=_load_crows,
        score=_score_crows,
        aggregate=_agg_crows,
    ),
}


def get_benchmark(name: str) -> Benchmark:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ConfigError(
            f"evaluate.benchmarks: unknown benchmark {name!r}; known: {', '.join(REGISTRY)}."
        ) from None


def metric_specs() -> dict[str, Metric]:
    """Every flat metric name -> its spec (for trackers and promotion gates)."""
    return {m.name: m for b in REGISTRY.values() for m in b.metrics}
