"""Optimisation helpers shared by the debias fine-tuning (``train``) and the extrinsic heads (``evaluate``).

They sit below both packages, so neither imports the other: the epoch's seeded batch order, AdamW parameter
groups and the linear warm-up/decay schedule (torch imported only when a schedule is built).
"""

from __future__ import annotations

import numpy as np


def epoch_batches(n_examples: int, batch_size: int, seed: int, epoch: int) -> list[list[int]]:
    """The batches of one epoch: a permutation seeded by (seed, epoch), cut into ``batch_size`` pieces."""
    order = np.random.default_rng([seed, epoch]).permutation(n_examples).tolist()
    return [order[i : i + batch_size] for i in range(0, n_examples, batch_size)]


def linear_schedule(optimizer, warmup: int, total: int):
    """Linear warm-up to the peak rate, then linear decay to 0 at ``total`` steps (as transformers')."""
    import torch

    def factor(step: int) -> float:
        if step < warmup:
            return step / max(1, warmup)
        return max(0.0, (total - step) / max(1, total - warmup))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def param_groups(model, weight_decay: float):
    """AdamW groups: weight decay on matrices, none on biases and norms."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if p.ndim < 2 or "norm" in name.lower() or name.endswith(".bias"):
            no_decay.append(p)
        else:
            decay.append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}]
    if no_decay:
        groups.append({"params": no_decay, "weight_decay": 0.0})
    return groups
