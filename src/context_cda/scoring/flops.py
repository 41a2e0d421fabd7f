"""The floating-point work of exact scoring: what a plan needs and what the passes did, counted per part.

A causal scorer's batched path runs the prefix tree of its sequences (:mod:`.packed`): every distinct prefix goes
through the base stack once and the output layer runs where a log-probability is read. What that needs, at the
least, is a :class:`Work`: token positions through the base stack (the tree's nodes), (query, key) pairs attended
(each node attends to itself and its ancestors: its depth), and positions projected to the vocabulary (the
log-softmax needs the whole row there). What the passes did is a second :class:`Work` with the same parts: padded
row positions, the dense attention of packed rows (every pair of a row, masked or not) and the rows projected.
:class:`Costs` turns either into FLOPs for one model (2 per multiply-add), so a benchmark can say how far the work
done is from the work needed, and how far the time is from the machine's matrix-product rate.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class Costs:
    """FLOPs of one model: ``base`` per token position through the base stack's linear layers (2 x their weights),
    ``attention`` per (query, key) pair over every layer (4 x layers x query heads x head size: the scores and the
    weighted values), ``head`` per position projected to the vocabulary (2 x the output layer's weights)."""

    base: float
    attention: float
    head: float

    @classmethod
    def of(cls, model: Any) -> Costs:
        """Read from the model's modules (its linear layers, whatever the architecture) and its config."""
        import torch

        from .interventions import base_of

        try:
            from transformers.pytorch_utils import Conv1D
        except ImportError:  # pragma: no cover
            Conv1D = torch.nn.Linear  # noqa: N806
        base = base_of(model)
        linear = sum(int(m.weight.numel()) for m in base.modules() if isinstance(m, (torch.nn.Linear, Conv1D)))
        head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        cfg = base.config.get_text_config() if hasattr(base.config, "get_text_config") else base.config
        layers = _first(cfg, "num_hidden_layers", "n_layer", "num_layers")
        heads = _first(cfg, "num_attention_heads", "n_head", "num_heads")
        width = _first(cfg, "hidden_size", "n_embd", "d_model")
        size = getattr(cfg, "head_dim", None) or (width // heads if width and heads else 0)
        return cls(base=2.0 * linear, attention=4.0 * (layers or 0) * (heads or 0) * size,
                   head=2.0 * int(head.weight.numel()) if head is not None else 0.0)


def _first(cfg: Any, *names: str) -> int:
    for n in names:
        v = getattr(cfg, n, None)
        if isinstance(v, int):
            return v
    return 0


@dataclass
class Work:
    """Counts of one kind of work (see the module): positions through the base stack, (query, key) pairs attended,
    positions projected to the vocabulary."""

    base_tokens: int = 0
    attention_pairs: int = 0
    head_rows: int = 0

    def add(self, base_tokens: int = 0, attention_pairs: int = 0, head_rows: int = 0) -> None:
        self.base_tokens += int(base_tokens)
        self.attention_pairs += int(attention_pairs)
        self.head_rows += int(head_rows)

    def flops(self, costs: Costs) -> dict[str, float]:
        """FLOPs per part and their ``total``."""
        parts = {"base": self.base_tokens * costs.base, "attention": self.attention_pairs * costs.attention,
                 "head": self.head_rows * costs.head}
        return {**parts, "total": sum(parts.values())}

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class Ledger:
    """What a scorer's batched passes ``needed`` (the plan: the prefix tree's nodes, their depths and reads) and
    what they ``done`` (the padded passes as they ran), summed over the calls since it was made. Passes that run
    side by side in threads add to it under a lock."""

    needed: Work = field(default_factory=Work)
    done: Work = field(default_factory=Work)
    _lock: Any = field(default_factory=threading.Lock, repr=False, compare=False)

    def add_tree(self, tree: Any) -> None:
        """The plan of a prefix tree (:class:`.packed.PrefixTree`): each node once, attending to its depth, the
        output layer at the nodes read."""
        depth = [0] * len(tree.tok)
        for n, p in enumerate(tree.par):  # parents come before their children
            depth[n] = 1 if p < 0 else depth[p] + 1
        with self._lock:
            self.needed.add(len(tree.tok), sum(depth), sum(1 for r in tree.reads if r))

    def add_pass(self, rows: int, width: int, read: int) -> None:
        """One forward pass of ``rows`` x ``width`` positions (padding included), its attention dense over each row
        (a tree mask hides pairs but the product computes them), the output layer at ``read`` positions."""
        with self._lock:
            self.done.add(rows * width, rows * width * width, read)

    def add_both(self, base_tokens: int, attention_pairs: int, head_rows: int) -> None:
        """Work that is needed exactly as it is done (e.g. the one pass over a start token)."""
        with self._lock:
            self.needed.add(base_tokens, attention_pairs, head_rows)
            self.done.add(base_tokens, attention_pairs, head_rows)

    def summary(self, costs: Costs) -> dict[str, Any]:
        """Counts and FLOPs of both, and done / needed."""
        need, done = self.needed.flops(costs), self.done.flops(costs)
        return {"needed": {**self.needed.as_dict(), "flops": need}, "done": {**self.done.as_dict(), "flops": done},
                "done_over_needed": done["total"] / need["total"] if need["total"] else float("nan")}
