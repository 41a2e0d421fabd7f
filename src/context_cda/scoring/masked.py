"""Masked LMs (BERT, DistilBERT, RoBERTa, ...): pseudo-log-likelihood, one mask token at a time."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ModelError
from .base import LogLik, PositionScorerMixin, Scorer


class MaskedScorer(PositionScorerMixin, Scorer):
    family = "masked"

    def __init__(self, model, tokenizer, batch_size: int = 32, progress: bool = False) -> None:
        super().__init__(model, tokenizer, batch_size=batch_size, progress=progress)
        if tokenizer.mask_token_id is None:
            raise ModelError(f"{type(model).__name__}: the tokenizer has no mask token; cannot score a masked LM.")
        self.mask_id = int(tokenizer.mask_token_id)

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
