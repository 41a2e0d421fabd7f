"""register: log one (target, arm) model to MLflow, register it and apply the promotion gate."""

from kfp import dsl
from kfp.dsl import Input, Output

from components.artifacts import Checkpoint, Evaluation, FilteredCorpora, Registration
from components.images import CPU_IMAGE


@dsl.component(base_image=CPU_IMAGE)
def register(
    config_yaml: str,
    target: str,
    arm: str,
    checkpoint: Input[Checkpoint],
    filtered: Input[FilteredCorpora],
    registration: Output[Registration],
    evaluation: Input[Evaluation] = None,
    vanilla_evaluation: Input[Evaluation] = None,
    overrides: list[str] = [],  # noqa: B006
) -> str:
    """Register ``<target>-debiased`` (context_cda.tracking.run_register) from a run-dir view of the inputs.

    ``evaluation`` (this arm's evaluate output) and ``vanilla_evaluation`` (the target's) appear in the view as
    ``evaluate/<target>/<arm>`` and ``evaluate/<target>/vanilla``; register_inputs picks up their aggregate.json,
    so the evaluation metrics reach MLflow and the promotion gate. Without them only the finetune metrics do.
    """
    from components._runtime import load_config, run_stage, run_view
    from context_cda.tracking import register_inputs

    config = load_config(config_yaml, overrides)
    links = {f"finetune/{target}/{arm}": checkpoint.path, f"filter/{target}": filtered.path}
    if evaluation is not None:
        links[f"evaluate/{target}/{arm}"] = evaluation.path
    if vanilla_evaluation is not None:
        links[f"evaluate/{target}/vanilla"] = vanilla_evaluation.path
    view = run_view(links)
    config.run.run_dir = str(view)
    registration.metadata.update({"target": target, "arm": arm})
    return run_stage("register", config, register_inputs(config, target, arm, view), registration.path,
                     target=target, arm=arm)
