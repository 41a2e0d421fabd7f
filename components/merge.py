"""The merges of the generation parts: every part's tables joined exactly once, with a check that no item is
missing or doubled (context_cda.shards)."""

from kfp import dsl
from kfp.dsl import Input, Output

from components.artifacts import Corpus, ScoredCorpus
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
def entropy_merge(
    config_yaml: str,
    target: str,
    parts: Input[list[dsl.Dataset]],
    augmented: Input[Corpus],
    scores: Output[ScoredCorpus],
    overrides: list[str] = [],  # noqa: B006
) -> str:
    """Join ``target``'s entropy parts (context_cda.entropy.run_entropy_merge)."""
    from components._runtime import load_config, run_table_step

    return run_table_step("entropy", load_config(config_yaml, overrides),
                          {"parts": list(parts), "augmented": augmented}, scores, target=target)
