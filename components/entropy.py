"""entropy: semantic entropy of the validated contextual counterfactuals under one target model, one generation
part per task (joined by :func:`components.merge.entropy_merge`)."""

from kfp.dsl import Input, Output

from components.artifacts import Corpus, ScoredCorpus
from components.images import gpu_component


@gpu_component
def entropy(
    config_yaml: str,
    target: str,
    shard: int,
    augmented: Input[Corpus],
    part: Output[ScoredCorpus],
    overrides: list[str] = [],  # noqa: B006
) -> str:
    """Sample, cluster by entailment, score part ``shard`` under ``target`` (context_cda.entropy.run_entropy)."""
    from components._runtime import load_config, run_table_step

    return run_table_step("entropy-part", load_config(config_yaml, overrides), {"augmented": augmented}, part,
                          target=target, shard=shard)
