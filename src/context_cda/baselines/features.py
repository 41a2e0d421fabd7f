"""Sentence representations the projection arms learn from: the mean of the base model's last hidden states.

As bias-bench encodes them (``_extract_gender_features`` for INLP: one sentence at a time, special tokens added,
the mean over every position; ``compute_gender_subspace`` for SentenceDebias: padded to ``max_length``, the mean
over the attended positions, then L2-normalised). Batched, the attention-masked mean over right-padded rows equals
the one-at-a-time mean to float32 rounding; ``batch_size=1`` is the reference path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _pad_ready(tokenizer: Any) -> Any:
    """The tokenizer with a padding token (bias-bench sets GPT-2's to EOS)."""
    if tokenizer.pad_token_id is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def mean_hidden(model: Any, tokenizer: Any, texts: Sequence[str], batch_size: int = 32, max_length: int | None = None,
                normalise: bool = False, progress: bool = False, desc: str = "encoding") -> Any:
    """(len(texts), hidden) float32 numpy array: the masked mean of the base model's last hidden states per text,
    truncated to ``max_length`` tokens (None: the model's limit), optionally L2-normalised."""
    import numpy as np
    import torch
    from tqdm.auto import tqdm

    from ..scoring.interventions import base_of

    base = base_of(model)
    tok = _pad_ready(tokenizer)
    device = next(base.parameters()).device
    out = np.zeros((len(texts), 0), dtype=np.float32)
    rows: list[Any] = []
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i])) if batch_size > 1 else list(range(len(texts)))
    with torch.inference_mode():
        for start in tqdm(range(0, len(order), batch_size), desc=desc, disable=not progress, leave=False):
            idx = order[start : start + batch_size]
            enc = tok([texts[i] for i in idx], add_special_tokens=True, truncation=True, max_length=max_length,
                      padding=len(idx) > 1, return_tensors="pt")
            mask = enc["attention_mask"].to(device)
            hidden = base(input_ids=enc["input_ids"].to(device), attention_mask=mask).last_hidden_state.float()
            mean = (hidden * mask.unsqueeze(-1)).sum(dim=1) / mask.sum(dim=1, keepdim=True)
            if normalise:
                mean = mean / torch.norm(mean, dim=-1, keepdim=True)
            rows.extend(zip(idx, mean.cpu().numpy(), strict=True))
    if rows:
        out = np.zeros((len(texts), rows[0][1].shape[0]), dtype=np.float32)
        for i, v in rows:
            out[i] = v
    return out
