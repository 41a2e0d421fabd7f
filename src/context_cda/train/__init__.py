"""Debias fine-tuning: one loop for every family, token budgets, per-epoch evaluation, resumable checkpoints.
May import: the run contract, cda, evaluate, models, tracking.

Public entry points (torch and transformers are imported only when they run):

* :func:`run_finetune` - the ``finetune`` stage for one (target, arm, seed);
* :func:`run_budget` - the ``budget`` step: an arm's token budget (its budget group's), read by its fine-tunings;
* :func:`arm_corpus` - which table of a finetune step's inputs an arm trains on;
* :func:`shared_token_budget` - the default token budget (the smallest configured arm's token count);
* :mod:`.trainjob` - the fine-tuning as a Kubeflow Trainer TrainJob (``train.launcher: trainjob``), imported by
  its doors only (the Kubeflow task, ``ccda finetune --task``).
"""

from __future__ import annotations

from .budget import budget_view, finetune_view, run_budget
from .corpus import arm_corpus, load_arm_rows
from .finetune import METRICS_FILE, run_finetune, shared_token_budget

__all__ = ["METRICS_FILE", "arm_corpus", "budget_view", "finetune_view", "load_arm_rows", "run_budget", "run_finetune",
           "shared_token_budget"]
