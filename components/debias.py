"""debias: learn one projection arm's matrix (INLP, SentenceDebias) for one target from the run's corpus."""

from kfp.dsl import Input, Output

from components.artifacts import Corpus, Projection
from components.images import gpu_component


@gpu_component
def debias(
    config_yaml: str,
    target: str,
    arm: str,
    sentences: Input[Corpus],
    cda: Input[Corpus],
    debias: Output[Projection],
    overrides: list[str] = [],  # noqa: B006
) -> str:
    """Learn ``arm``'s matrix for ``target`` (context_cda.baselines.run_debias): ``sentences`` is the ingest step's
    folder (gendered sentences, and the neutral ones among its rejected rows), ``cda`` the validated
    counterfactuals."""
    from components._runtime import load_config, run_table_step

    return run_table_step("debias", load_config(config_yaml, overrides), {"sentences": sentences, "cda": cda},
                          debias, target=target, arm=arm)
