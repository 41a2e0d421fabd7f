"""entropy: semantic entropy of every contextual counterfactual under one target model."""

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
    from pathlib import Path

    from components._runtime import load_config, run_stage
    from context_cda import schemas as S

    scores.metadata["target"] = target
    inputs = {"augmented": Path(augmented.path) / S.VALID_FILE}
    return run_stage("entropy", load_config(config_yaml, overrides), inputs, scores.path, target=target)
