"""Masked LMs (BERT, DistilBERT, RoBERTa, ...): pseudo-log-likelihood, one mask token at a time."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any

from ..errors import ModelError
from .base import LogLik, PositionScorerMixin, Scorer


class MaskedScorer(PositionScorerMixin, Scorer):
    family = "masked"

    def __init__(self, model, tokenizer, batch_size: int = 32, progress: bool = False) -> None:
        super().__init__(model, tokenizer, batch_size=batch_size, progress=progress)
        if tokenizer.mask_token_id is None:
            raise ModelError(f"{type(model).__name__}: the tokenizer has no mask token; cannot score a masked LM.")
        self.mask_id = int(tokenizer.mask_token_id)

    @cached_property
    def last_layer_at_positions(self) -> bool:
        """Whether the batched path may compute the last encoder layer only at the masked positions
        (:mod:`.last_layer`): the model's layers have a known layout and, on a probe (two masked sentences of
        different lengths, padded into one batch), the logits at the masked positions equal the full pass's."""
        import torch

        from .last_layer import LastLayerAtPositions, find_last_layer

        if find_last_layer(self.model) is None:
            return False
        probe = self.encode(["The doctor said that the nurse was tired today.", "She paid him."], True)
        cols = [3, 2]
        if any(len(s) <= c + 1 for s, c in zip(probe, cols, strict=True)):
            return False
        ids, att = self._pad([[*s[:c], self.mask_id, *s[c + 1 :]] for s, c in zip(probe, cols, strict=True)])
        rows_t = torch.tensor([0, 1], device=self.device)
        cols_t = torch.tensor(cols, device=self.device)
        try:
            with torch.inference_mode():
                want = self.model(input_ids=ids, attention_mask=att).logits[rows_t, cols_t].float()
                cut = LastLayerAtPositions(self.model, rows_t, cols_t, 2, ids.shape[1])
                with cut:
                    got = self.model(input_ids=ids, attention_mask=att).logits
        except Exception:  # noqa: BLE001 - any failure means: run the layer in full
            return False
        if not (cut.applied and tuple(got.shape[:2]) == (1, 2)):
            return False
        err = float((got[0].float() - want).abs().max())
        return err <= 1e-5 * max(1.0, float(want.abs().max()))

    def _read_only_at(self, rows: Any, cols: Any, shape: Any) -> Any:
        from contextlib import nullcontext

        from .last_layer import LastLayerAtPositions

        if not self.last_layer_at_positions:
            return nullcontext()
        return LastLayerAtPositions(self.model, rows, cols, int(shape[0]), int(shape[1]))

    def logprobs_at(
        self,
        seqs: Sequence[Sequence[int]],
        positions: Sequence[int],
        targets: Sequence[int],
        token_type_ids: Sequence[Sequence[int]] | None = None,
    ) -> list[float]:
        """log p(target | seq) at ``position`` for sequences used as given (already holding their mask)."""
        return self._position_logprobs(seqs, positions, targets, token_type_ids, desc="masked LM")

    def masked_logprobs(self, seqs, positions, targets=None, token_type_ids=None) -> list[float]:
        targets = [s[p] for s, p in zip(seqs, positions, strict=True)] if targets is None else targets
        masked = []
        for s, p in zip(seqs, positions, strict=True):
            m = list(s)
            m[p] = self.mask_id
            masked.append(m)
        return self.logprobs_at(masked, positions, targets, token_type_ids)

    def conditional_loglik(self, prefixes: Sequence[str], continuations: Sequence[str]) -> list[LogLik]:
        """PLL of the continuation (second segment), masking its tokens one at a time; prefix = first segment."""
        if len(prefixes) != len(continuations):
            raise ValueError("prefixes and continuations must have the same length")
        tok = self.tokenizer
        seqs, poss, ttis, owner = [], [], [], []
        counts = []
        for k, (pre, cont) in enumerate(zip(prefixes, continuations, strict=True)):
            enc = (
                tok(pre, cont, return_special_tokens_mask=True, return_token_type_ids=True)
                if pre
                else tok(cont, return_special_tokens_mask=True, return_token_type_ids=True)
            )
            ids = list(map(int, enc["input_ids"]))
            n_cont = len(tok(cont, add_special_tokens=False)["input_ids"]) if cont else 0
            plain = [i for i, sp in enumerate(enc["special_tokens_mask"]) if not sp]
            cont_pos = plain[len(plain) - n_cont :] if n_cont else []
            tti = list(enc.get("token_type_ids") or [0] * len(ids))
            counts.append(len(cont_pos))
            for p in cont_pos:
                seqs.append(ids)
                poss.append(p)
                ttis.append(tti)
                owner.append(k)
        lps = self.masked_logprobs(seqs, poss, None, ttis)
        per: list[list[float]] = [[] for _ in prefixes]
        for k, v in zip(owner, lps, strict=True):
            per[k].append(v)
        return [LogLik.from_logprobs(v) for v in per]
