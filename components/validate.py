"""validate: a great-expectations suite at a stage boundary (cda | augment | entropy) -> valid + quarantine."""

from kfp import dsl
from kfp.dsl import Input, Output

from components.artifacts import Corpus
from components.images import CPU_IMAGE


@dsl.component(base_image=CPU_IMAGE)
def validate(
    config_yaml: str,
    boundary: str,
    data: Input[Corpus],
    validated: Output[Corpus],
    target: str = "",
    overrides: list[str] = [],  # noqa: B006
) -> str:
    """Check the table of ``boundary`` and split it into valid.parquet / quarantine.parquet.

    ``target`` names the target model at the entropy boundary (empty elsewhere).
    """
    from pathlib import Path

    from components._runtime import load_config, run_stage
    from context_cda import schemas as S

    table = {"cda": S.CDA_FILE, "augment": S.AUGMENT_FILE, "entropy": S.ENTROPY_FILE}[boundary]
    inputs = {boundary: Path(data.path) / table}
    options = {"target": target} if target else {}
    return run_stage("validate", load_config(config_yaml, overrides), inputs, validated.path, boundary=boundary,
                     **options)
