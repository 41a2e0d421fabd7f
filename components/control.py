"""Control-flow helpers of the pipeline (no stage behind them): the (arm, seed) matrix, a per-target fan-in and the
exit handler's status record."""

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
from components.images import CPU_IMAGE


@dsl.component(base_image=CPU_IMAGE)
def arm_matrix(target: str, arms: list[str], seeds: list[int], config_yaml: str = "") -> list[dict]:
    """``[{"target": target, "arm": arm, "seed": seed}, ...]``: the inner ParallelFor's items (every fine-tuned arm
    of this target, once per training seed; with ``config_yaml`` the arms the stage table's finetune step runs for
    the target, so the post-hoc arms of ``arms`` are left to their own loop).

    Carrying the target inside each item keeps it exact in nested loops (kfp.local substitutes outer loop items).
    """
    if config_yaml:
        from components._runtime import load_config
        from context_cda.stages import arm_values

        allowed = set(arm_values(load_config(config_yaml), "finetune", target))
        arms = [a for a in arms if a in allowed]
    return [{"target": target, "arm": arm, "seed": seed} for arm in arms for seed in seeds]


@dsl.component(base_image=CPU_IMAGE)
def posthoc_matrix(config_yaml: str, target: str, step_name: str) -> list[dict]:
    """``[{"target": target, "arm": arm}, ...]``: the arms the stage table's ``step_name`` (debias,
    evaluate-posthoc) runs for ``target`` (context_cda.stages.arm_values: the kinds of arm the step takes,
    ``baselines.targets``, the target's published checkpoints)."""
    from components._runtime import load_config
    from context_cda.stages import arm_values

    return [{"target": target, "arm": a} for a in arm_values(load_config(config_yaml), step_name, target)]


@dsl.component(base_image=CPU_IMAGE)
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


@dsl.component(base_image=CPU_IMAGE)
def part_matrix(target: str, parts: int) -> list[dict]:
    """``[{"target": target, "shard": 0}, ...]``: the items of a target's generation-part loop (the target travels
    in each item, as in :func:`arm_matrix`)."""
    return [{"target": target, "shard": i} for i in range(parts)]


@dsl.component(base_image=CPU_IMAGE)
def collect_arms(
    target: str,
    checkpoints: Input[list[dsl.Model]],
    filtered: Input[FilteredCorpora],
    scores: Input[ScoredCorpus],
    summary: Output[RunSummary],
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
    copy(filtered, ("*.json", "*/*"))
    copy(scores, ("*.parquet", "*.json"))
    items = [artifact_keys(a) for a in checkpoints]
    summary.metadata.update({"target": target, "steps": items})
    return json.dumps({"target": target, "steps": items})


@dsl.component(base_image=CPU_IMAGE)
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
