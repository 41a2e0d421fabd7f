"""Causal LMs: the prefix tree of the sequences scored, packed into the rows of forward passes, and a shared
context (a prefix encoded once, whose keys and values every packed row reuses).

A *node* of the tree is a distinct prefix ``s[:depth]`` of a sequence; a *read* asks for the distribution after a
node at one target token. Rows of nodes go into a forward pass with a tree-shaped attention mask (a node sees
itself and its ancestors) and position ids = depth, so every distinct prefix runs through the model once, however
many sequences share it (StereoSet's three candidates, a CrowS pair's common start, a choice's context).

A :class:`PrefixContext` is a prefix (the Self-Debias debiasing prefix, one row per variant) run once with its
keys and values kept: a packed row then continues one of its variants (its mask opens the variant's real prefix
tokens to every node, its positions start after them), instead of re-encoding the prefix before every sentence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .base import _accepts


@dataclass
class PrefixTree:
    """``tok[n]`` / ``par[n]`` (-1 for a root): node n's token and parent; ``reads[n]``: its (target, slot) reads;
    ``paths[i]``: sequence i's nodes, root first, down to its deepest read."""

    tok: list[int] = field(default_factory=list)
    par: list[int] = field(default_factory=list)
    reads: list[list[tuple[int, int]]] = field(default_factory=list)
    paths: list[list[int]] = field(default_factory=list)


def build_tree(seqs: Sequence[Sequence[int]], reads: Sequence[Sequence[tuple[int, int, int]]]) -> PrefixTree:
    """The tree of the prefixes read: ``reads[i]`` holds (depth, target, slot) for sequence i, the distribution
    after ``seqs[i][:depth]`` (1 <= depth <= len) read at ``target``, answered in ``slot``."""
    tree = PrefixTree()
    child: dict[tuple[int, int], int] = {}
    for i, s in enumerate(seqs):
        deepest = max((d for d, _t, _s in reads[i]), default=0)
        parent, path = -1, []
        for p in range(deepest):
            key = (parent, int(s[p]))
            node = child.get(key)
            if node is None:
                node = child[key] = len(tree.tok)
                tree.tok.append(int(s[p]))
                tree.par.append(parent)
                tree.reads.append([])
            path.append(node)
            parent = node
        for depth, target, slot in reads[i]:
            tree.reads[path[depth - 1]].append((int(target), slot))
        tree.paths.append(path)
    return tree


@dataclass
class PackedRows:
    """``rows[k]``: the nodes of row k (ancestors first); ``col[k]``: node -> column in row k; ``owner[n]``: the
    (row, column) whose output answers node n's reads; ``done[k]``: sequences whose last node first shows in row k."""

    rows: list[list[int]]
    col: list[dict[int, int]]
    owner: dict[int, tuple[int, int]]
    done: list[int]


def pack(tree: PrefixTree, seqs: Sequence[Sequence[int]], width: int) -> PackedRows:
    """Rows of about ``width`` nodes, closed under ancestors, sequences in lexicographic order so that a row holds
    whole subtrees; a subtree split across rows repeats its ancestors (a row never splits one sequence's path).
    The rows come longest first, so that rows taken in order into a pass need little padding."""
    order = sorted((i for i in range(len(seqs)) if tree.paths[i]), key=lambda i: list(seqs[i]))
    width = max([width, *(len(tree.paths[i]) for i in order)])
    rows: list[list[int]] = []
    done: list[int] = []
    in_row: set[int] = set()
    for i in order:
        path = tree.paths[i]
        new = [n for n in path if n not in in_row]
        if not rows or len(rows[-1]) + len(new) > width:
            rows.append([])
            done.append(0)
            in_row = set()
            new = path
        rows[-1].extend(new)
        in_row.update(new)
        done[-1] += 1
    order = sorted(range(len(rows)), key=lambda k: -len(rows[k]))
    rows, done = [rows[k] for k in order], [done[k] for k in order]
    col = [{n: c for c, n in enumerate(row)} for row in rows]
    owner: dict[int, tuple[int, int]] = {}
    for k, cols in enumerate(col):
        for n, c in cols.items():
            owner.setdefault(n, (k, c))
    return PackedRows(rows, col, owner, done)


def row_tokens(tree: PrefixTree, packed: PackedRows, k: int) -> tuple[list[int], list[int]]:
    """Row k's tokens and each one's parent column (-1 for a root)."""
    nodes, cols = packed.rows[k], packed.col[k]
    return [tree.tok[n] for n in nodes], [cols[tree.par[n]] if tree.par[n] >= 0 else -1 for n in nodes]


def tree_inputs(
    rows: Sequence[Sequence[int]],
    parents: Sequence[Sequence[int]],
    pad_id: int,
    dtype: Any,
    device: Any,
    context: PrefixContext | None = None,
    variants: Sequence[int] | None = None,
) -> dict[str, Any]:
    """Model inputs for packed rows: token j of a row attends to itself and its ancestors (``parents[j]``, -1 for
    a root) only, at position = its depth. Rows are right-padded; a pad attends to itself.

    With a ``context``, row b continues the context's variant ``variants[b]``: it also attends to that variant's
    real prefix tokens, its positions start after them, and the context's keys and values go in as the cache."""
    import torch

    width, n = max(len(r) for r in rows), len(rows)
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    pos = torch.zeros((n, width), dtype=torch.long)
    allowed = torch.zeros((n, width, width), dtype=torch.bool)
    allowed[:, torch.arange(width), torch.arange(width)] = True
    for r, (toks, par) in enumerate(zip(rows, parents, strict=True)):
        ids[r, : len(toks)] = torch.tensor(list(toks), dtype=torch.long)
        depth = [0] * len(toks)
        for j, pj in enumerate(par):
            if pj >= 0:
                allowed[r, j] = allowed[r, pj]
                allowed[r, j, j] = True
                depth[j] = depth[pj] + 1
        pos[r, : len(toks)] = torch.tensor(depth, dtype=torch.long)
    extra: dict[str, Any] = {}
    if context is not None:
        idx = torch.tensor(list(variants or [0] * n), dtype=torch.long)
        allowed = torch.cat([context.att[idx][:, None, :].expand(n, width, -1), allowed], dim=2)
        pos += context.n_real[idx][:, None]
        extra = context.cache_for(idx)
    if not dtype.is_floating_point:  # pragma: no cover - quantised weights
        dtype = torch.float32
    mask = torch.zeros((n, 1, *allowed.shape[1:]), dtype=dtype)
    mask.masked_fill_(~allowed[:, None], torch.finfo(dtype).min)
    return {"input_ids": ids.to(device), "attention_mask": mask.to(device), "position_ids": pos.to(device), **extra}


class PrefixContext:
    """Prefix rows (left-padded ids and their attention, one row per variant) run once through a causal LM: their
    logits at every position (``logits``, float32, (R, P, V)), and their keys and values, handed to later passes
    as the cache (:meth:`cache_for`). Position ids count the real tokens (a pad holds position 1, as the
    padded rows of Self-Debias have it)."""

    def __init__(self, model: Any, ids: Sequence[Sequence[int]], att: Sequence[Sequence[int]], device: Any) -> None:
        import torch

        self.model = model
        self.cache_arg = "cache" if _accepts(model, "cache") else "past_key_values"
        ids_t = torch.tensor([list(r) for r in ids], dtype=torch.long)
        att_t = torch.tensor([list(a) for a in att], dtype=torch.long)
        pos = (att_t.cumsum(-1) - 1).masked_fill(att_t == 0, 1)
        with torch.inference_mode():
            out = model(input_ids=ids_t.to(device), attention_mask=att_t.to(device), position_ids=pos.to(device),
                        use_cache=True)
        self.logits = out.logits.float()
        cache = getattr(out, "cache", None) or out.past_key_values
        self.kv = [(layer.keys, layer.values) for layer in cache.layers]
        self.att = att_t.bool()
        self.n_real = att_t.sum(-1)
        self.width = int(ids_t.shape[1])

    def cache_for(self, variants: Any) -> dict[str, Any]:
        """A fresh cache whose row b holds variant ``variants[b]``'s keys and values (a forward pass appends to
        the cache it gets, so each pass gets its own)."""
        from transformers import DynamicCache

        idx = variants.to(self.kv[0][0].device)
        layers = [(k.index_select(0, idx), v.index_select(0, idx)) for k, v in self.kv]
        return {self.cache_arg: DynamicCache(layers, config=self.model.config), "use_cache": True}
