"""augment: counterfactuals -> contextual counterfactuals written by a large LM, one generation part per task.

On the cluster the pipeline passes ``overrides`` that select the backend: the cluster's vLLM service through the
``openai`` backend (``augment_mode: service``) or in-process ``vllm`` on a GPU node (``augment_mode: in-process``).
The parts (``pipeline.generation_shards``, a ParallelFor) are joined by :func:`components.merge.augment_merge`.
"""

from kfp.dsl import Input, Output

from components.artifacts import Corpus
from components.images import gpu_component


@gpu_component
def augment(
    config_yaml: str,
    shard: int,
    counterfactuals: Input[Corpus],
    part: Output[Corpus],
    overrides: list[str] = [],  # noqa: B006
) -> str:
    """Rewrite generation part ``shard`` of the validated counterfactuals in context (run_augment; resumable)."""
    from components._runtime import load_config, run_table_step

    return run_table_step("augment-part", load_config(config_yaml, overrides), {"counterfactuals": counterfactuals},
                          part, shard=shard)
