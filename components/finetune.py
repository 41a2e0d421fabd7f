"""finetune: debias one target model on one arm's corpus; per-epoch checkpoints, benchmarks and metrics.csv."""

from kfp import dsl
from kfp.dsl import Input, Metrics, Output

from components.artifacts import Checkpoint, Corpus, FilteredCorpora
from components.images import GPU_IMAGE


@dsl.component(base_image=GPU_IMAGE)
def finetune(
    config_yaml: str,
    target: str,
    arm: str,
    cda: Input[Corpus],
    augmented: Input[Corpus],
    filtered: Input[FilteredCorpora],
    checkpoint: Output[Checkpoint],
    metrics: Output[Metrics],
    overrides: list[str] = [],  # noqa: B006
) -> str:
    """Fine-tune ``target`` on ``arm`` (context_cda.train.run_finetune); the arm picks its corpus."""
    from components._runtime import load_config, log_metrics, run_stage, run_view
    from context_cda.train.corpus import arm_inputs

    config = load_config(config_yaml, overrides)
    view = run_view({"cda": cda.path, "augment": augmented.path, f"filter/{target}": filtered.path})
    config.run.run_dir = str(view)  # the arms' shared token budget reads every arm's corpus from the run dir
    checkpoint.metadata.update({"target": target, "arm": arm})
    summary = run_stage("finetune", config, arm_inputs(config, target, arm, view), checkpoint.path,
                        target=target, arm=arm)
    log_metrics(metrics, summary)
    return summary
