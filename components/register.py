"""register: log every arm of one target to MLflow, register them and apply the promotion gate in order."""

from kfp import dsl
from kfp.dsl import Input, Output

from components.artifacts import Evaluation, FilteredCorpora, Registration
from components.images import cpu_component


@cpu_component
def register(
    config_yaml: str,
    target: str,
    checkpoints: Input[list[dsl.Model]],
    filtered: Input[FilteredCorpora],
    registration: Output[Registration],
    evaluations: Input[list[dsl.Dataset]] = None,
    vanilla_evaluation: Input[Evaluation] = None,
    posthoc_evaluations: Input[list[dsl.Dataset]] = None,
    debias: Input[list[dsl.Model]] = None,
    overrides: list[str] = [],  # noqa: B006
) -> str:
    """Register ``<target>-debiased`` versions with their model cards (context_cda.publish.run_register_target).

    ``checkpoints`` and ``evaluations`` are every (arm, seed) of the target, ``vanilla_evaluation`` the target's
    own, ``posthoc_evaluations`` and ``debias`` its post-hoc arms' evaluations and matrices; they are laid out as the run folder's ``finetune/<target>`` and ``evaluate/<target>`` by the keys each
    artifact carries, so the evaluation metrics reach MLflow and the promotion gate.
    """
    from components._runtime import load_config, run_table_step

    evals = [*(evaluations or []), *([vanilla_evaluation] if vanilla_evaluation is not None else [])]
    artifacts = {"finetune": list(checkpoints), "evaluations": evals or None, "filtered": filtered,
                 "posthoc": list(posthoc_evaluations) if posthoc_evaluations else None,
                 "debias": list(debias) if debias else None}
    return run_table_step("register", load_config(config_yaml, overrides), artifacts, registration, target=target)
