"""Control-flow helpers of the pipeline (no stage behind them): the loops' items from the config, a per-target fan-in
and the exit handler's status record."""

from kfp import dsl
from kfp.dsl import Input, Output, PipelineTaskFinalStatus

from components.artifacts import (
    Evaluation,
    FilteredCorpora,
    Projection,
    Registration,
    RunStatus,
    RunSummary,
    ScoredCorpus,
)
from components.images import cpu_component


@cpu_component
def matrix(config_yaml: str, step: str, target: str = "", also: list[str] = []) -> list[dict]:  # noqa: B006
    """The items of ``step``'s ParallelFor (``targets``: one per target), from the config (the run's one source):
    one per value of each fan-out key of the stage table's row (``target`` fixed when given), each with the step's
    own ``config`` and, as ``config_<step>``, those of the ``also`` steps in the same loop: the view of the config
    each task reads (components._runtime.task_config: the keys its step reads, its own target, arm and seed), so
    adding an arm, a seed, a target or a benchmark leaves the finished tasks' cache keys as they were.

    e.g. ``finetune`` for target t -> ``[{"target": t, "arm": "cda", "seed": 13, "config": "..."}, ...]``. Carrying
    the outer keys inside each item keeps them exact in nested loops (kfp.local substitutes outer loop items).
    """
    from components._runtime import load_config, step_matrix

    return step_matrix(load_config(config_yaml), step, {"target": target} if target else {}, tuple(also))


@cpu_component
def view(config_yaml: str, step: str) -> str:
    """The config one task of ``step`` (a row without fan-out: ingest, cda, the merges, report ...) gets: the keys
    its step reads, every other at its default (components._runtime.task_config), so its cache key changes only
    with them."""
    from components._runtime import load_config, task_config

    return task_config(load_config(config_yaml), step, {})


@cpu_component
def collect_debias(target: str, projections: Input[list[dsl.Model]], debias: Output[Projection]) -> str:
    """Fan-in over a target's projection arms: their debias folders side by side, laid out as the run folder's
    ``debias/<target>`` (one artifact, so that every post-hoc evaluation inside the next loop can read it)."""
    import json
    import shutil
    from pathlib import Path

    from components._runtime import artifact_keys
    from context_cda import layout as L

    root = Path(debias.path)
    for art in projections:
        keys = {k: str(v) for k, v in artifact_keys(art).items()}
        rel = Path(L.folder("debias", keys)).relative_to(L.folder("debias", {"target": keys["target"]}, fanin=True))
        shutil.copytree(art.path, root / rel, dirs_exist_ok=True)
    arms = sorted(artifact_keys(a)["arm"] for a in projections)
    debias.metadata.update({"target": target, "arms": arms})
    return json.dumps({"target": target, "arms": arms})


@cpu_component
def collect_arms(
    target: str,
    checkpoints: Input[list[dsl.Model]],
    summary: Output[RunSummary],
    filtered: Input[FilteredCorpora] = None,
    scores: Input[ScoredCorpus] = None,
    evaluations: Input[list[dsl.Dataset]] = None,
    vanilla_evaluation: Input[Evaluation] = None,
    registration: Input[Registration] = None,
    posthoc_evaluations: Input[list[dsl.Dataset]] = None,
) -> str:
    """Fan-in over the arms and seeds of one target: a small slice of the run folder for the report (no model
    weights, no checkpoints; of the per-item predictions only the StereoSet and CrowS ones), laid out by
    :mod:`context_cda.layout` from the step and keys each artifact carries: finetune steps' metrics.csv,
    manifests, corpus statistics, training rows and per-epoch StereoSet / CrowS predictions; the evaluations'
    aggregate.json files and their StereoSet / CrowS per-item predictions (for the report's paired comparisons);
    the registration records; the filtered corpora; the entropy scores."""
    import json
    import shutil
    from pathlib import Path

    from components._runtime import artifact_keys
    from context_cda import layout as L

    root = Path(summary.path)

    def dest(art) -> Path:
        keys = {k: str(v) for k, v in artifact_keys(art).items()}
        return root / L.folder(art.metadata["step"], keys)

    def copy(art, patterns: tuple[str, ...]) -> None:
        for pattern in patterns:
            for f in Path(art.path).glob(pattern):
                if f.is_file():
                    (dest(art) / f.relative_to(art.path)).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(f, dest(art) / f.relative_to(art.path))

    # the per-item intrinsic scores the report's paired comparisons read (small: a few hundred rows each)
    paired = tuple(f"{b}/{L.PREDICTIONS_FILE}" for b in ("stereoset", "crows"))
    small = ("*.json", "*.csv", "*.png", L.TRAIN_ROWS_FILE, *(f"{L.EPOCH_PREDICTIONS_DIR}/*/{p}" for p in paired))
    for art in checkpoints:
        copy(art, small)
    for art in [*(evaluations or []), *(posthoc_evaluations or []),
                *([vanilla_evaluation] if vanilla_evaluation is not None else [])]:
        copy(art, (L.AGGREGATE_FILE, f"*/{L.AGGREGATE_FILE}", *paired))
    if registration is not None:
        copy(registration, ("*.json", "*/*.json"))
    for art, patterns in ((filtered, ("*.json", "*/*")), (scores, ("*.parquet", "*.json"))):
        if art is not None:  # a run whose arms read no filtered corpus has none
            copy(art, patterns)
    items = [artifact_keys(a) for a in checkpoints]
    summary.metadata.update({"target": target, "steps": items})
    return json.dumps({"target": target, "steps": items})


@cpu_component
def record_status(config_yaml: str, status: PipelineTaskFinalStatus, record: Output[RunStatus]) -> str:
    """Exit handler: write how the run ended (and which task failed, with its error) as ``status.json``.

    It runs whether the pipeline succeeded or not. When tracking is on and an MLflow server is configured
    (``MLFLOW_TRACKING_URI`` from the ``ccda-mlflow`` secret), a failed run is also logged there, tagged with
    the state and the error, so failures show up next to the successful runs.
    """
    import json
    import os
    from pathlib import Path

    from components._runtime import load_config

    state = {
        "state": status.state,
        "pipeline_job": status.pipeline_job_resource_name,
        "pipeline_task": status.pipeline_task_name,
        "error_code": status.error_code,
        "error_message": status.error_message,
    }
    Path(record.path).mkdir(parents=True, exist_ok=True)
    (Path(record.path) / "status.json").write_text(json.dumps(state, indent=2) + "\n")
    record.metadata.update({k: v for k, v in state.items() if v is not None})
    print(json.dumps(state), flush=True)
    config = load_config(config_yaml)
    if status.state != "SUCCEEDED" and config.tracking.enabled and os.environ.get("MLFLOW_TRACKING_URI"):
        import mlflow

        mlflow.set_experiment(config.tracking.experiment)
        with mlflow.start_run(run_name=f"pipeline-{status.state.lower()}"):
            mlflow.set_tags({f"ccda.pipeline.{k}": str(v) for k, v in state.items() if v is not None})
    return status.state
