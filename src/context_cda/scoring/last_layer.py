"""Run a bidirectional encoder's last layer only at the positions that are read.

A masked LM's output is read at the masked position alone. Every position's keys and values still feed that
output, but the last layer's query, attention-output and feed-forward matrices (10 of its 12 hidden-size-squared
units of work) and the LM head's transform are needed only where the head reads: about a seventh of a 6-layer
encoder's matrix work, saved exactly.

Two layer layouts are known, by the modules a layer has (never by a model's name):

* BERT's (BERT, RoBERTa, ELECTRA, XLM-R, CamemBERT...): ``attention.self.{query,key,value}``,
  ``attention.output`` (dense + residual layer norm), ``intermediate`` and ``output``;
* DistilBERT's: ``attention.{q,k,v,out}_lin``, ``sa_layer_norm``, ``ffn``, ``output_layer_norm``.

:class:`LastLayerAtPositions` swaps the last layer's ``forward`` for the duration of one pass, and that layer hands
on only the positions read, as one (1, N, hidden) sequence. A scorer uses it only after a probe shows that the
logits then equal those of the full pass at the read positions
(:attr:`~context_cda.scoring.masked.MaskedScorer.last_layer_at_positions`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_Finish = Callable[[Any, Any, Any], Any]


def _bert_layout(layer: Any) -> tuple[tuple[Any, Any, Any, int, int, float], _Finish] | None:
    att = getattr(layer, "attention", None)
    sa = getattr(att, "self", None)
    if sa is None or not all(hasattr(sa, n) for n in ("query", "key", "value", "num_attention_heads")):
        return None
    if not (hasattr(att, "output") and hasattr(layer, "intermediate") and hasattr(layer, "output")):
        return None
    if getattr(layer, "add_cross_attention", False) or getattr(sa, "is_causal", False):
        return None
    if getattr(sa, "position_embedding_type", "absolute") != "absolute":  # relative keys change the scores
        return None
    heads, size = int(sa.num_attention_heads), int(sa.attention_head_size)

    def finish(layer: Any, ctx: Any, x: Any) -> Any:
        a = layer.attention.output(ctx, x)
        return layer.output(layer.intermediate(a), a)

    return (sa.query, sa.key, sa.value, heads, size, float(getattr(sa, "scaling", size**-0.5))), finish


def _distilbert_layout(layer: Any) -> tuple[tuple[Any, Any, Any, int, int, float], _Finish] | None:
    sa = getattr(layer, "attention", None)
    if sa is None or not all(hasattr(sa, n) for n in ("q_lin", "k_lin", "v_lin", "out_lin", "n_heads")):
        return None
    if not all(hasattr(layer, n) for n in ("sa_layer_norm", "ffn", "output_layer_norm")):
        return None
    heads = int(sa.n_heads)
    size = int(sa.q_lin.out_features) // heads

    def finish(layer: Any, ctx: Any, x: Any) -> Any:
        a = layer.sa_layer_norm(layer.attention.out_lin(ctx) + x)
        return layer.output_layer_norm(layer.ffn(a) + a)

    return (sa.q_lin, sa.k_lin, sa.v_lin, heads, size, float(getattr(sa, "scaling", size**-0.5))), finish


LAYOUTS = (_bert_layout, _distilbert_layout)


def find_last_layer(model: Any) -> tuple[Any, tuple, _Finish] | None:
    """The last layer of the model's (single) stack of encoder layers with a known layout, or None."""
    import torch

    found = None
    for module in model.modules():
        if not isinstance(module, torch.nn.ModuleList) or len(module) == 0:
            continue
        if len({type(m) for m in module}) != 1:
            continue
        for layout in LAYOUTS:
            got = layout(module[-1])
            if got is not None:
                if found is not None:  # two stacks (an encoder-decoder, a retriever...): not ours to cut
                    return None
                found = (module[-1], *got)
                break
    return found


class _Unsupported(Exception):
    """This call's inputs are not the kind the subset layer handles; run the layer in full instead."""


def _query_mask(mask: Any, rows: Any, cols: Any) -> Any:
    """The attention mask of each read position's query, (N, 1 or heads, 1, T), from what the encoder passes."""
    import torch

    if mask is None:
        return None
    if not torch.is_tensor(mask):  # e.g. a flex-attention block mask
        raise _Unsupported
    if mask.dim() == 2:  # (B, T) of 0/1
        m = mask[rows].bool()[:, None, None, :]
    elif mask.dim() == 4:  # (B, 1 or heads, 1 or T, T)
        m = mask[rows]
        m = m[:, :, :1, :] if m.shape[2] == 1 else m[torch.arange(m.shape[0], device=m.device), :, cols].unsqueeze(2)
    else:
        raise _Unsupported
    return m if m.dtype == torch.bool or m.is_floating_point() else m.bool()


class LastLayerAtPositions:
    """Context manager: during one forward pass of ``model`` on a (B, T) batch, its last encoder layer computes
    its output only at (``rows[j]``, ``cols[j]``) (distinct pairs) and hands on a (1, N, H) sequence of them, so
    the head after it runs on those N positions alone and the logits come out (1, N, V) in the pairs' order.
    :attr:`applied` says whether it did.

    A model without a known layout, or a call it cannot handle (another mask type, another shape), runs the layer
    in full, unchanged."""

    def __init__(self, model: Any, rows: Any, cols: Any, batch: int, width: int) -> None:
        self.target = find_last_layer(model)
        self.rows, self.cols = rows, cols
        self.batch, self.width = batch, width
        self.applied = False

    def _subset(self, original: Callable, hidden: Any, attention_mask: Any = None, *args: Any, **kwargs: Any) -> Any:
        import torch

        layer, (q_lin, k_lin, v_lin, heads, size, scale), finish = self.target
        if hidden.dim() != 3 or tuple(hidden.shape[:2]) != (self.batch, self.width) or layer.training:
            return original(hidden, attention_mask, *args, **kwargs)
        rows, cols = self.rows.to(hidden.device), self.cols.to(hidden.device)
        try:
            mask = _query_mask(attention_mask, rows, cols)
        except _Unsupported:
            return original(hidden, attention_mask, *args, **kwargs)
        b, t, _ = hidden.shape
        n = rows.shape[0]
        x = hidden[rows, cols].unsqueeze(1)  # (N, 1, H): the read positions' inputs
        q = q_lin(x).view(n, 1, heads, size).transpose(1, 2)
        k = k_lin(hidden).view(b, t, heads, size).transpose(1, 2)[rows]
        v = v_lin(hidden).view(b, t, heads, size).transpose(1, 2)[rows]
        ctx = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
        self.applied = True
        return finish(layer, ctx.transpose(1, 2).reshape(n, 1, heads * size), x).transpose(0, 1)  # (1, N, H)

    def __enter__(self) -> LastLayerAtPositions:
        if self.target is not None:
            layer = self.target[0]
            self._saved = layer.__dict__.get("forward")  # an instance-level forward (accelerate's hooks) stays
            original = layer.forward
            layer.forward = lambda *a, **kw: self._subset(original, *a, **kw)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.target is not None:
            layer = self.target[0]
            if self._saved is None:
                del layer.forward  # the class's forward shows through again
            else:
                layer.forward = self._saved
