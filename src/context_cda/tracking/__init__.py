"""MLflow tracking, the model registry and the promotion gate.
May import: the run contract, data, evaluate, models.

* :func:`tracker_for` - log params/metrics/artifacts into the (target, arm) run nested under the pipeline run;
* :func:`pipeline_run_id` / :func:`finish_pipeline_run` - the parent run of a run directory;
* :func:`run_register` - the ``register`` stage (log model, register ``<target>-debiased``, gate, aliases);
* :func:`decide` - the promotion gate, a pure function on per-item evidence (:mod:`.evidence`, paired bootstrap
  intervals from :mod:`context_cda.evaluate.stats`).

mlflow is imported only when something is logged.
"""

from __future__ import annotations

from typing import Any

from .promotion import CS, ICAT, LMS, SS, Decision, PromotionPolicy, decide
from .register import (
    register_inputs,
    registered_name,
    registered_versions_exist,
    run_register,
    run_register_target,
)
from .runs import NullTracker, Tracker, arm_run_id, get_client, pipeline_run_id, tracker_for, tracking_uri


def log_stage_summary(config: Any, stage: str, summary: dict[str, Any], target: str | None = None,
                      arm: str | None = None) -> None:
    """Log a stage's summary as ``stages/<stage>[-<target>[-<arm>]].json``: to the (target, arm) run when both
    are given (evaluate per arm), else to the pipeline run (entropy/filter per target). No-op with tracking off."""
    if not config.tracking.enabled:
        return
    name = stage if target is None else f"{stage}-{target}" + (f"-{arm}" if arm else "")
    tracker_for(config, target=target if arm else None, arm=arm).log_dict(summary, f"stages/{name}.json")


def finish_pipeline_run(config: Any, status: str = "FINISHED") -> None:
    """Mark the pipeline (parent) run finished; a no-op with tracking off."""
    t = tracker_for(config)
    t.finish(status)


__all__ = [
    "CS", "ICAT", "LMS", "SS", "Decision", "NullTracker", "PromotionPolicy", "Tracker", "arm_run_id", "decide",
    "finish_pipeline_run", "get_client", "log_stage_summary", "pipeline_run_id", "register_inputs", "registered_name",
    "registered_versions_exist", "run_register", "run_register_target",
    "tracker_for", "tracking_uri",
]
