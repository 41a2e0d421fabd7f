"""finetune: debias one target model on one arm's validated corpus with one seed; per-epoch metrics."""

from kfp.dsl import Input, Metrics, Output

from components.artifacts import Checkpoint, Corpus, FilteredCorpora
from components.images import gpu_component


@gpu_component
def finetune(
    config_yaml: str,
    target: str,
    arm: str,
    seed: int,
    cda: Input[Corpus],
    augmented: Input[Corpus],
    filtered: Input[FilteredCorpora],
    checkpoint: Output[Checkpoint],
    metrics: Output[Metrics],
    overrides: list[str] = [],  # noqa: B006
) -> str:
    """Fine-tune ``target`` on ``arm`` (context_cda.train.run_finetune): ``cda`` and ``augmented`` are the
    validated tables, ``filtered`` the target's filtered corpora; the arm picks its corpus, every arm's counts
    give the shared token budget."""
    from components._runtime import load_config, log_metrics, run_table_step

    summary = run_table_step("finetune", load_config(config_yaml, overrides),
                             {"cda": cda, "augmented": augmented, "filtered": filtered}, checkpoint,
                             target=target, arm=arm, seed=seed)
    log_metrics(metrics, summary)
    return summary
