"""budget and finetune: an arm's token budget (once per target and arm), then debias one target model on one arm's
validated corpus with one seed; per-epoch metrics (in its pod, or handed to a Kubeflow Trainer TrainJob:
train.launcher: trainjob, context_cda.train.trainjob)."""

from kfp.dsl import Input, Metrics, Output

from components.artifacts import Budget, Checkpoint, Corpus, FilteredCorpora
from components.images import cpu_component, gpu_component


@cpu_component
def budget(
    config_yaml: str,
    target: str,
    arm: str,
    out: Output[Budget],
    cda: Input[Corpus] = None,
    augmented: Input[Corpus] = None,
    filtered: Input[FilteredCorpora] = None,
    neutral: Input[Corpus] = None,
    overrides: list[str] = [],  # noqa: B006
) -> int:
    """The token budget of ``arm`` on ``target`` (context_cda.train.run_budget): the smallest token count over the
    corpora of its budget group (the tables among ``cda``, ``augmented``, ``filtered``, ``neutral`` those arms
    read), or train.token_budget. Returned as a number, so each fine-tuning's cache key holds the budget itself:
    a budget that comes out the same (an arm added to the group with a larger corpus) retrains nothing."""
    import json

    from components._runtime import load_config, run_table_step

    summary = run_table_step("budget", load_config(config_yaml, overrides),
                             {"cda": cda, "augmented": augmented, "filtered": filtered, "neutral": neutral}, out,
                             target=target, arm=arm)
    return int(json.loads(summary)["token_budget"])


@gpu_component
def finetune(
    config_yaml: str,
    target: str,
    arm: str,
    seed: int,
    token_budget: int,
    checkpoint: Output[Checkpoint],
    metrics: Output[Metrics],
    cda: Input[Corpus] = None,
    augmented: Input[Corpus] = None,
    filtered: Input[FilteredCorpora] = None,
    neutral: Input[Corpus] = None,
    overrides: list[str] = [],  # noqa: B006
    cluster: str = "",
) -> str:
    """Fine-tune ``target`` on ``arm`` (context_cda.train.run_finetune) with the arm's ``token_budget`` (the budget
    task's): ``cda`` and ``augmented`` are the validated tables, ``filtered`` the target's filtered corpora,
    ``neutral`` the validated neutral rewrites; the arm reads its own (the others may be absent). With ``cluster``
    (train.launcher: trainjob; the compiled cluster settings: runtime, image, nodes, GPUs per node, volumes,
    secrets) the task hands the step to a Kubeflow Trainer TrainJob and waits (context_cda.train.trainjob), failing
    with the TrainJob's own reason."""
    from components._runtime import load_config, log_metrics, run_table_step, run_trainjob

    config = load_config(config_yaml, overrides)
    corpora = {"cda": cda, "augmented": augmented, "filtered": filtered, "neutral": neutral}
    if cluster:
        summary = run_trainjob(config, config_yaml, cluster, corpora, checkpoint, token_budget, target=target,
                               arm=arm, seed=seed)
    else:
        summary = run_table_step("finetune", config, corpora, checkpoint, given={"token_budget": token_budget},
                                 target=target, arm=arm, seed=seed)
    log_metrics(metrics, summary)
    return summary

