"""The merges of the generation parts (augment, sample): every part's tables joined exactly once, with a check that
no item is missing or doubled (context_cda.items)."""

from kfp import dsl
from kfp.dsl import Input, Output

from components.artifacts import Corpus, Samples
from components.images import cpu_component


@cpu_component
def augment_merge(
    config_yaml: str,
    parts: Input[list[dsl.Dataset]],
    counterfactuals: Input[Corpus],
    augmented: Output[Corpus],
    overrides: list[str] = [],  # noqa: B006
) -> str:
    """Join the augment parts (context_cda.augment.run_augment_merge)."""
    from components._runtime import load_config, run_table_step

    return run_table_step("augment", load_config(config_yaml, overrides),
                          {"parts": list(parts), "counterfactuals": counterfactuals}, augmented)


@cpu_component
def sample_merge(
    config_yaml: str,
    parts: Input[list[dsl.Dataset]],
    augmented: Input[Corpus],
    samples: Output[Samples],
    overrides: list[str] = [],  # noqa: B006
) -> str:
    """Join the sample parts (context_cda.entropy.run_sample_merge): the samples every target's entropy scores."""
    from components._runtime import load_config, run_table_step

    return run_table_step("sample", load_config(config_yaml, overrides),
                          {"parts": list(parts), "augmented": augmented}, samples)
