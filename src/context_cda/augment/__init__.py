"""Context augmentation: a larger LM rephrases each CDA counterfactual with natural context.

Public API (imported lazily, so ``import context_cda.augment`` needs no torch)::

    run_augment(config, inputs={"counterfactuals": path}, out_dir) -> dict        # the stage
    make_generator(backend, model, *, device="auto", model_cache=None, batch_size=16,
                   openai=None, engine_args=None) -> Generator                      # hf | vllm | openai
    Generator.generate(prompts: list[list[dict]], params: SamplingParams) -> list[GenerationResult]
    SamplingParams(n=1, temperature=0.7, top_p=0.95, max_tokens=96, seed=0, stop=())
    GenerationResult(texts, prompt_tokens, completion_tokens, finish_reasons, error)
    build_messages(sentence, version="v1", few_shot=True) -> list[dict]            # the prompt
    clean(text) -> str; check(output, source, swaps, lexicon, settings, direction) -> reason ('' = ok)
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "run_augment": ".stage",
    "load_gender_lexicon": ".stage",
    "Generator": ".base",
    "GenerationResult": ".base",
    "SamplingParams": ".base",
    "make_generator": ".base",
    "truncate_at_stop": ".base",
    "PROMPTS": ".prompts",
    "PromptSpec": ".prompts",
    "build_messages": ".prompts",
    "get_prompt": ".prompts",
    "clean": ".postprocess",
    "check": ".postprocess",
    "CheckSettings": ".postprocess",
    "parse_swaps": ".postprocess",
    "GenerationCache": ".store",
    "ShardStore": ".store",
    "cache_key": ".store",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
