"""evaluate: the configured benchmarks (StereoSet, CrowS-Pairs, extrinsic, next-token) on one model.

:func:`evaluate` scores one fine-tuned arm (``evaluate/<target>/<arm>/``); :func:`evaluate_target` scores the
vanilla target model itself (``evaluate/<target>/vanilla/``), the baseline every arm is compared against.
"""

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
                        model=model, name=f"{target}/{arm}")
    log_metrics(metrics, summary)
    return summary


@dsl.component(base_image=GPU_IMAGE)
def evaluate_target(
    config_yaml: str,
    target: str,
    evaluation: Output[Evaluation],
    metrics: Output[Metrics],
    overrides: list[str] = [],  # noqa: B006
) -> str:
    """Score the vanilla target model ``config.run.targets[target]`` (context_cda.evaluate.run_evaluate)."""
    from components._runtime import load_config, log_metrics, run_stage
    from context_cda.errors import ConfigError

    config = load_config(config_yaml, overrides)
    if target not in config.run.targets:
        raise ConfigError(f"target {target!r} is not in config.run.targets ({', '.join(config.run.targets)}).")
    evaluation.metadata.update({"target": target, "arm": "vanilla"})
    summary = run_stage("evaluate", config, {}, evaluation.path, model=config.run.targets[target],
                        name=f"{target}/vanilla")
    log_metrics(metrics, summary)
    return summary
