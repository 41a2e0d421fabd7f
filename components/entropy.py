"""entropy: semantic entropy of every validated contextual counterfactual under one target model."""

from kfp import dsl
from kfp.dsl import Input, Output

from components.artifacts import Corpus, ScoredCorpus
from components.images import GPU_IMAGE


@dsl.component(base_image=GPU_IMAGE)
def entropy(
    config_yaml: str,
    target: str,
    augmented: Input[Corpus],
    scores: Output[ScoredCorpus],
    overrides: list[str] = [],  # noqa: B006
) -> str:
    """Sample, cluster by entailment, score under ``target`` (context_cda.entropy.run_entropy)."""
    from components._runtime import load_config, run_table_step

    return run_table_step("entropy", load_config(config_yaml, overrides), {"augmented": augmented}, scores,
                          target=target)
