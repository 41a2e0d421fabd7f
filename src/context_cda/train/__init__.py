"""Debias fine-tuning: one loop for masked, causal and seq2seq LMs, per-epoch evaluation, resumable checkpoints.

Public entry points (torch and transformers are imported only when they run):

* :func:`run_finetune` - the ``finetune`` stage for one (target, arm);
* :func:`arm_inputs` - the ``inputs`` mapping of an arm inside a run directory;
* :func:`shared_token_budget` - the default token budget (the smallest configured arm's token count).
"""

from __future__ import annotations

from .corpus import arm_inputs, k_dirname, load_arm_texts
from .finetune import METRICS_FILE, run_finetune, shared_token_budget

__all__ = ["METRICS_FILE", "arm_inputs", "k_dirname", "load_arm_texts", "run_finetune", "shared_token_budget"]
