"""filter: drop the top k % semantic entropy of the validated scores, one corpus per k (``k<k>/corpus.parquet``)."""

from kfp.dsl import Input, Output

from components.artifacts import Corpus, FilteredCorpora
from components.images import cpu_component


@cpu_component
def filter(  # noqa: A001 - the stage's name
    config_yaml: str,
    target: str,
    scores: Input[Corpus],
    filtered: Output[FilteredCorpora],
    overrides: list[str] = [],  # noqa: B006
) -> str:
    """Semantic-entropy filter for ``target`` (context_cda.entropy.run_filter) on validate(entropy)'s output."""
    from components._runtime import load_config, run_table_step

    return run_table_step("filter", load_config(config_yaml, overrides), {"scores": scores}, filtered,
                          target=target)
