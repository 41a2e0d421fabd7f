"""evaluate: the configured benchmarks (StereoSet, CrowS-Pairs, ...) on one fine-tuned model."""

from kfp import dsl
from kfp.dsl import Input, Metrics, Output

from components.artifacts import Checkpoint, Evaluation
from components.images import GPU_IMAGE


@dsl.component(base_image=GPU_IMAGE)
def evaluate(
    config_yaml: str,
    target: str,
    arm: str,
    checkpoint: Input[Checkpoint],
    evaluation: Output[Evaluation],
    metrics: Output[Metrics],
    overrides: list[str] = [],  # noqa: B006
) -> str:
    """Score ``checkpoint/final`` on config.evaluate.benchmarks (context_cda.evaluate.run_evaluate)."""
    from pathlib import Path

    from components._runtime import load_config, log_metrics, run_stage

    evaluation.metadata.update({"target": target, "arm": arm})
    model = str(Path(checkpoint.path) / "final")
    summary = run_stage("evaluate", load_config(config_yaml, overrides), {}, evaluation.path,
                        model=model, name=f"{target}-{arm}")
    log_metrics(metrics, summary)
    return summary
