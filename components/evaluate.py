"""evaluate: the configured benchmarks (StereoSet, CrowS-Pairs, extrinsic, next-token) on one model.

:func:`evaluate` scores one fine-tuned (arm, seed); :func:`evaluate_target` scores the vanilla target model itself,
the baseline every arm is compared against; :func:`evaluate_posthoc` scores an arm applied to it (INLP,
SentenceDebias, Self-Debias) or a published checkpoint.
"""

from kfp.dsl import Input, Metrics, Output

from components.artifacts import Checkpoint, Evaluation, Projection
from components.images import gpu_component


@gpu_component
def evaluate(
    config_yaml: str,
    target: str,
    arm: str,
    seed: int,
    model: Input[Checkpoint],
    evaluation: Output[Evaluation],
    metrics: Output[Metrics],
    overrides: list[str] = [],  # noqa: B006
) -> str:
    """Score the fine-tuned ``model`` (its ``final/``) on config.evaluate.benchmarks (run_evaluate)."""
    from components._runtime import load_config, log_metrics, run_table_step

    summary = run_table_step("evaluate", load_config(config_yaml, overrides), {"model": model}, evaluation,
                             target=target, arm=arm, seed=seed)
    log_metrics(metrics, summary)
    return summary


@gpu_component
def evaluate_target(
    config_yaml: str,
    target: str,
    evaluation: Output[Evaluation],
    metrics: Output[Metrics],
    overrides: list[str] = [],  # noqa: B006
) -> str:
    """Score the vanilla target model ``config.run.targets[target]`` (context_cda.evaluate.run_evaluate)."""
    from components._runtime import load_config, log_metrics, run_table_step

    summary = run_table_step("evaluate-vanilla", load_config(config_yaml, overrides), {}, evaluation,
                             target=target)
    log_metrics(metrics, summary)
    return summary


@gpu_component
def evaluate_posthoc(
    config_yaml: str,
    target: str,
    arm: str,
    evaluation: Output[Evaluation],
    metrics: Output[Metrics],
    debias: Input[Projection] = None,
    overrides: list[str] = [],  # noqa: B006
) -> str:
    """Score ``arm`` applied to the vanilla target (a projection from the target's ``debias`` folders, as
    :func:`components.control.collect_debias` lays them out; self-debias) or a published checkpoint
    (context_cda.evaluate.run_evaluate)."""
    from components._runtime import load_config, log_metrics, run_table_step

    artifacts = {"debias": debias} if debias is not None else {}
    summary = run_table_step("evaluate-posthoc", load_config(config_yaml, overrides), artifacts, evaluation,
                             target=target, arm=arm)
    log_metrics(metrics, summary)
    return summary
