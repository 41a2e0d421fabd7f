"""cda: sentences -> two-sided word-swap counterfactuals."""

from kfp.dsl import Input, Output

from components.artifacts import Corpus
from components.images import cpu_component


@cpu_component
def cda(
    config_yaml: str, sentences: Input[Corpus], counterfactuals: Output[Corpus], overrides: list[str] = []  # noqa: B006
) -> str:
    """Counterfactual data augmentation by gender-word swapping (context_cda.cda.run_cda)."""
    from components._runtime import load_config, run_table_step

    return run_table_step("cda", load_config(config_yaml, overrides), {"sentences": sentences}, counterfactuals)
