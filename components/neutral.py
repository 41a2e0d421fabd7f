"""neutral: each validated CDA row's original sentence rewritten gender-neutrally by the large LM (the
context-neutral arm's corpus); one task (not split into generation parts)."""

from kfp import dsl
from kfp.dsl import Input, Output

from components.artifacts import Corpus
from components.images import GPU_IMAGE


@dsl.component(base_image=GPU_IMAGE)
def neutral(
    config_yaml: str,
    counterfactuals: Input[Corpus],
    neutral: Output[Corpus],
    overrides: list[str] = [],  # noqa: B006
) -> str:
    """Rewrite every original in singular they and neutral nouns, reviewed and retried (run_neutral; resumable)."""
    from components._runtime import load_config, run_table_step

    return run_table_step("neutral", load_config(config_yaml, overrides), {"counterfactuals": counterfactuals},
                          neutral)
