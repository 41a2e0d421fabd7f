"""Which epochs a fine-tuning run evaluates: one rule for the training loop (:mod:`context_cda.train.loop`) and
the cost model (:mod:`context_cda.tools.costs`), which sit in different packages and may not import each other."""

from __future__ import annotations


def evaluates_after(epoch: int, eval_every: int, last: bool) -> bool:
    """Whether the loop runs the benchmarks after training epoch ``epoch`` (1-based): every ``eval_every``-th
    epoch, and the last one (``last``: the final epoch, or the one at which ``train.max_steps`` stopped it)."""
    return epoch % eval_every == 0 or last


def evaluated_epochs(epochs: int, eval_every: int, vanilla: bool = True) -> list[int]:
    """The epochs a run of ``epochs`` epochs evaluates, in order: 0 (the untouched model, when ``vanilla``), every
    ``eval_every``-th, and the last. ``evaluated_epochs(3, 2) == [0, 2, 3]``."""
    if epochs < 0 or eval_every < 1:
        raise ValueError(f"epochs must be >= 0 and eval_every >= 1, got {epochs} and {eval_every}")
    trained = [e for e in range(1, epochs + 1) if evaluates_after(e, eval_every, e == epochs)]
    return ([0] if vanilla else []) + trained
