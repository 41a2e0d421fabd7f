"""validate: a great-expectations suite at a stage boundary (cda | augment | entropy) -> valid + quarantine."""

from kfp.dsl import Input, Output

from components.artifacts import Corpus
from components.images import cpu_component


@cpu_component
def validate(
    config_yaml: str,
    boundary: str,
    data: Input[Corpus],
    validated: Output[Corpus],
    target: str = "",
    overrides: list[str] = [],  # noqa: B006
) -> str:
    """Check the table of ``boundary`` and split it into the valid and the quarantined rows.

    ``target`` names the target model at the entropy boundary (empty elsewhere).
    """
    from components._runtime import load_config, run_table_step
    from context_cda.layout import BOUNDARY_STEPS

    keys = {"target": target} if target else {}
    return run_table_step(BOUNDARY_STEPS[boundary], load_config(config_yaml, overrides), {boundary: data},
                          validated, **keys)
