"""Context augmentation: the generator rephrases each counterfactual, and the one review of generated text.
May import: the run contract, cda, evaluate (decontamination), generation.

The generators themselves (``make_generator``, ``SamplingParams``, backends) live in :mod:`context_cda.generation`.

Public API (imported lazily, so ``import context_cda.augment`` needs no torch)::

    run_augment(config, inputs={"counterfactuals": path}, out_dir, shard=None) -> dict   # the stage (one part)
    run_augment_merge(config, inputs={"parts": dir, "counterfactuals": path}, out_dir)  # the parts joined
    run_neutral(config, inputs={"counterfactuals": path}, out_dir)               # the neutral rewrites
    build_messages(sentence, version="v1", few_shot=True, feedback=None)          # the prompt
    review(original, counterfactual, output, *, lexicon=None, judge=None, settings=None)
        -> Review(accepted, text, reasons)                                          # the only acceptance rule
    review_many(originals, counterfactuals, outputs, ...) -> list[Review]         # batched (one judge call)
    clean(text) -> str; check(output, source, swaps, ...) -> first reason ('' = ok), a view of review()
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "run_augment": ".stage",
    "run_augment_merge": ".merge",
    "run_neutral": ".stage",
    "load_attribute_lexicon": ".stage",
    "review_settings": ".stage",
    "PROMPTS": ".prompts",
    "PromptSpec": ".prompts",
    "build_messages": ".prompts",
    "get_prompt": ".prompts",
    "review": ".checks",
    "review_many": ".checks",
    "Review": ".checks",
    "ReviewSettings": ".checks",
    "REASON_KINDS": ".checks",
    "clean": ".checks.cleanup",
    "check": ".postprocess",
    "CheckSettings": ".postprocess",
    "parse_swaps": ".checks.words",
    "swap_terms": ".checks.words",
    "GenerationCache": ".store",
    "cache_key": ".store",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
