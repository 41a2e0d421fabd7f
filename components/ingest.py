"""ingest: corpus -> ``sentences.parquet`` (the corpus itself comes from ``config.ingest``)."""

from kfp.dsl import Output

from components.artifacts import Corpus
from components.images import cpu_component


@cpu_component
def ingest(config_yaml: str, sentences: Output[Corpus], overrides: list[str] = []) -> str:  # noqa: B006
    """Read, normalise and select gendered sentences (context_cda.ingest.corpus.run_ingest)."""
    from components._runtime import load_config, run_table_step

    return run_table_step("ingest", load_config(config_yaml, overrides), {}, sentences)
