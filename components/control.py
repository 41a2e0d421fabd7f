"""Control-flow helpers of the pipeline (no stage behind them): the arm matrix, a per-target fan-in and the exit
handler's status record."""

from kfp import dsl
from kfp.dsl import Input, Output, PipelineTaskFinalStatus

from components.artifacts import Evaluation, RunStatus, RunSummary
from components.images import CPU_IMAGE


@dsl.component(base_image=CPU_IMAGE)
def arm_matrix(target: str, arms: list[str]) -> list[dict]:
    """``[{"target": target, "arm": arm}, ...]``: the inner ParallelFor's items (one per arm of this target).

    Carrying the target inside each item keeps it exact in nested loops (kfp.local substitutes outer loop items).
    """
    return [{"target": target, "arm": arm} for arm in arms]


@dsl.component(base_image=CPU_IMAGE)
def collect_arms(
    target: str,
    checkpoints: Input[list[dsl.Model]],
    registrations: Input[list[dsl.Artifact]],
    evaluations: Input[list[dsl.Dataset]],
    vanilla_evaluation: Input[Evaluation],
    summary: Output[RunSummary],
) -> str:
    """Fan-in over the arms of one target: a small run-dir slice for the report (no model weights).

    ``summary/finetune/<target>/<arm>/`` gets each arm's metrics.csv and manifest.json;
    ``summary/register/<target>/<arm>/`` its registration record (promotion.json, manifest.json);
    ``summary/evaluate/<target>/<arm|vanilla>/`` the evaluations' aggregate.json and ``<benchmark>/aggregate.json``
    (no per-item predictions).
    """
    import json
    import shutil
    from pathlib import Path

    def copy_aggregates(src: str, dest: Path) -> None:
        for agg in [Path(src) / "aggregate.json", *sorted(Path(src).glob("*/aggregate.json"))]:
            if agg.is_file():
                rel = agg.relative_to(src)
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(agg, dest / rel)

    root = Path(summary.path)
    arms = []
    for ckpt in checkpoints:
        arm = ckpt.metadata["arm"]
        dest = root / "finetune" / target / arm
        dest.mkdir(parents=True, exist_ok=True)
        for name in ("metrics.csv", "manifest.json", "corpus_stats.json"):
            if (Path(ckpt.path) / name).is_file():
                shutil.copy2(Path(ckpt.path) / name, dest / name)
        arms.append(arm)
    for reg in registrations:
        shutil.copytree(reg.path, root / "register" / target / reg.metadata["arm"], dirs_exist_ok=True)
    evaluated = []
    for ev in [*evaluations, vanilla_evaluation]:
        model = ev.metadata["arm"]  # an arm or "vanilla"
        copy_aggregates(ev.path, root / "evaluate" / target / model)
        evaluated.append(model)
    summary.metadata.update({"target": target, "arms": arms, "evaluated": evaluated})
    return json.dumps({"target": target, "arms": arms, "evaluated": evaluated})


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
