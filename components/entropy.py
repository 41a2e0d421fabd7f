"""sample and entropy: the M rephrasings and their entailment clusters, once for every target (one generation part
per task, joined by :func:`components.merge.sample_merge`), then each target's semantic entropy (one task per
target)."""

from kfp.dsl import Input, Output

from components.artifacts import Corpus, Samples, ScoredCorpus
from components.images import gpu_component


@gpu_component
def sample(
    config_yaml: str,
    shard: int,
    augmented: Input[Corpus],
    part: Output[Samples],
    overrides: list[str] = [],  # noqa: B006
) -> str:
    """Draw M rephrasings of part ``shard`` and cluster them by entailment (context_cda.entropy.run_sample)."""
    from components._runtime import load_config, run_table_step

    return run_table_step("sample-part", load_config(config_yaml, overrides), {"augmented": augmented}, part,
                          shard=shard)


@gpu_component
def entropy(
    config_yaml: str,
    target: str,
    samples: Input[Samples],
    scores: Output[ScoredCorpus],
    overrides: list[str] = [],  # noqa: B006
) -> str:
    """Score the shared samples under ``target`` and estimate semantic entropy (context_cda.entropy.run_entropy)."""
    from components._runtime import load_config, run_table_step

    return run_table_step("entropy", load_config(config_yaml, overrides), {"samples": samples}, scores,
                          target=target)
