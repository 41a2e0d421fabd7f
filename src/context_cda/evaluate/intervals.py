"""Bootstrap intervals of the accuracy-type extrinsic metrics, added to their aggregates' overall blocks.

Cheap because every such metric is a share of correct items in the benchmark's per-item predictions:

* GLUE: each task's dev accuracy (items resampled within their task) and the average over tasks (the mean of
  the resampled task accuracies);
* Bias in Bios: the profession accuracy over the held-out bios (the TPR gaps are not shares of items and get no
  interval);
* NLI-Bias: the NLI head's dev accuracy (the dev rows only).

Each benchmark's own ``aggregate`` stays as it is; :func:`with_intervals` wraps it (the registry does).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from ..config import EvaluateConfig
    from .stats import Items, Means


def _correct(r: dict[str, Any]) -> float:
    return float(r["correct"]) if "correct" in r else float(int(r["pred"]) == int(r["label"]))


def _ids(rows: list[dict[str, Any]], prefix: str = "") -> list[str]:
    return [f"{r.get('task', prefix)}/{r.get('id', i)}" for i, r in enumerate(rows)]


def glue_items(rows: list[dict[str, Any]]) -> tuple[Items, Callable[[Means], dict[str, np.ndarray]]]:
    from .stats import Items

    tasks = sorted({str(r["task"]) for r in rows})
    items = Items.build(_ids(rows), [r["task"] for r in rows], correct=[_correct(r) for r in rows])

    def metrics(m: Means) -> dict[str, np.ndarray]:
        out = {f"{t}_acc": 100.0 * m.group("correct", name=t) for t in tasks}
        out["avg_acc"] = 100.0 * m("correct")
        return out

    return items, metrics


def biasbios_items(rows: list[dict[str, Any]]) -> tuple[Items, Callable[[Means], dict[str, np.ndarray]]]:
    from .stats import Items

    items = Items.build(_ids(rows, "bios"), None, correct=[_correct(r) for r in rows])
    return items, lambda m: {"acc": 100.0 * m("correct")}


def nli_bias_items(rows: list[dict[str, Any]]) -> tuple[Items, Callable[[Means], dict[str, np.ndarray]]]:
    from .stats import Items

    dev = [r for r in rows if r.get("kind") == "dev"]
    items = Items.build(_ids(dev, "dev"), None, correct=[_correct(r) for r in dev])
    return items, lambda m: {"dev_acc": 100.0 * m("correct")}


ITEMS: dict[str, Callable[[list[dict[str, Any]]], tuple[Items, Callable[[Means], dict[str, np.ndarray]]]]] = {
    "glue": glue_items, "biasbios": biasbios_items, "nli-bias": nli_bias_items,
}


def with_intervals(benchmark: str, aggregate: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """``aggregate(rows, cfg)`` plus the bootstrap intervals of ``benchmark``'s accuracies (``evaluate.bootstrap``)
    in its overall block."""

    def call(rows: list[dict[str, Any]], cfg: EvaluateConfig | None = None) -> dict[str, Any]:
        from .stats import Settings, interval_block

        agg = aggregate(rows, cfg)
        items, metrics = ITEMS[benchmark](rows)
        if len(items):
            agg.setdefault("overall", {}).update(
                interval_block(items, metrics, Settings.of(cfg.bootstrap if cfg is not None else None)))
        return agg

    call.__name__ = getattr(aggregate, "__name__", "aggregate")
    return call
