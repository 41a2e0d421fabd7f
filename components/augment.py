"""augment: counterfactuals -> contextual counterfactuals written by a large LM (``augmented.parquet``).

On the cluster the pipeline passes ``overrides`` that select the backend: the cluster's vLLM service through the
``openai`` backend (``augment_mode: service``) or in-process ``vllm`` on a GPU node (``augment_mode: in-process``).
"""

from kfp import dsl
from kfp.dsl import Input, Output

from components.artifacts import Corpus
from components.images import GPU_IMAGE


@dsl.component(base_image=GPU_IMAGE)
def augment(
    config_yaml: str, counterfactuals: Input[Corpus], augmented: Output[Corpus], overrides: list[str] = []  # noqa: B006
) -> str:
    """Rewrite each validated counterfactual in context (context_cda.augment.run_augment); resumes from shards."""
    from components._runtime import load_config, run_table_step

    return run_table_step("augment", load_config(config_yaml, overrides), {"counterfactuals": counterfactuals},
                          augmented)
