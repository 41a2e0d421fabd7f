"""filter: drop the top k % semantic entropy, one filtered corpus per k (``k<k>/corpus.parquet``)."""

from kfp import dsl
from kfp.dsl import Input, Output

from components.artifacts import FilteredCorpora, ScoredCorpus
from components.images import CPU_IMAGE


@dsl.component(base_image=CPU_IMAGE)
def filter(  # noqa: A001 - the stage's name
    config_yaml: str,
    target: str,
    scores: Input[ScoredCorpus],
    filtered: Output[FilteredCorpora],
    overrides: list[str] = [],  # noqa: B006
) -> str:
    """Semantic-entropy filter for ``target`` (context_cda.entropy.run_filter)."""
    from pathlib import Path

    from components._runtime import load_config, run_stage
    from context_cda import schemas as S

    filtered.metadata["target"] = target
    inputs = {"scores": Path(scores.path) / S.ENTROPY_FILE}
    return run_stage("filter", load_config(config_yaml, overrides), inputs, filtered.path, target=target)
