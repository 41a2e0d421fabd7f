"""Encoder-decoder LMs (T5, BART, ...): the prefix is the encoder input, the continuation the decoder target.

Filling a gap uses the tokenizer's first sentinel token (T5's ``<extra_id_0>``) when it has one: the encoder
reads the text with the gap replaced by the sentinel and the decoder target is ``sentinel + filler``, as in T5's
span-corruption pre-training. Tokenizers without sentinels but with a mask token (BART) fall back to that token
and the decoder reconstructs the whole text up to the scored token.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

from ..errors import ModelError
from .base import LogLik, Scorer, gather_logprobs, length_sorted_batches


class Seq2SeqScorer(Scorer):
    family = "seq2seq"

    @cached_property
    def sentinel_ids(self) -> tuple[int, int] | None:
        tok = self.tokenizer
        ids = tok.convert_tokens_to_ids(["<extra_id_0>", "<extra_id_1>"])
        if any(i is None or i == tok.unk_token_id for i in ids):
            return None
        return int(ids[0]), int(ids[1])

    @cached_property
    def gap_token(self) -> str:
        """The token that marks a gap in encoder text: the first sentinel, else the mask token."""
        if self.sentinel_ids is not None:
            return self.tokenizer.convert_ids_to_tokens(self.sentinel_ids[0])
        if self.tokenizer.mask_token is not None:
            return self.tokenizer.mask_token
        raise ModelError(f"{type(self.model).__name__}: the tokenizer has no sentinel and no mask token.")

    def target_logprobs(
        self, enc_seqs: Sequence[Sequence[int]], dec_seqs: Sequence[Sequence[int]], desc: str = "seq2seq LM"
    ) -> list[list[float]]:
        """[log p(dec[i] | enc, dec[:i]) for every decoder target token] (decoder start token from the model)."""
        import torch

        out: list[list[float]] = [[] for _ in enc_seqs]
        lengths = [len(e) + len(d) for e, d in zip(enc_seqs, dec_seqs, strict=True)]
        with torch.inference_mode(), self._progress(len(enc_seqs), desc) as bar:
            for batch in length_sorted_batches(lengths, self.batch_size):
                todo = [i for i in batch if dec_seqs[i]]
                if todo:
                    ids, att = self._pad([enc_seqs[i] for i in todo])
                    labels, lab_mask = self._pad([dec_seqs[i] for i in todo], pad=0)
                    masked_labels = labels.masked_fill(lab_mask == 0, -100)
                    logits = self.model(input_ids=ids, attention_mask=att, labels=masked_labels).logits
                    lp = gather_logprobs(logits, labels).tolist()
                    for r, i in enumerate(todo):
                        out[i] = [float(v) for v in lp[r][: len(dec_seqs[i])]]
                bar.update(len(batch))
        return out

    def conditional_loglik(self, prefixes: Sequence[str], continuations: Sequence[str]) -> list[LogLik]:
        if len(prefixes) != len(continuations):
            raise ValueError("prefixes and continuations must have the same length")
        enc = self.encode(prefixes, add_special_tokens=True)
        dec = self.encode(continuations, add_special_tokens=False)
        lps = self.target_logprobs(enc, dec)
        return [LogLik.from_logprobs(lp) for lp in lps]

    def masked_logprobs(self, seqs, positions, targets=None, token_type_ids=None) -> list[float]:
        """One position replaced by the gap token in the encoder; the decoder predicts the original token."""
        targets = [s[p] for s, p in zip(seqs, positions, strict=True)] if targets is None else targets
        gap = self.tokenizer.convert_tokens_to_ids(self.gap_token)
        enc, dec, at = [], [], []
        for s, p, t in zip(seqs, positions, targets, strict=True):
            e = list(s)
            e[p] = gap
            enc.append(e)
            if self.sentinel_ids is not None:
                dec.append([self.sentinel_ids[0], t])
                at.append(1)
            else:
                dec.append([*s[:p], t])
                at.append(p)
        lps = self.target_logprobs(enc, dec)
        return [lp[k] for lp, k in zip(lps, at, strict=True)]

    def fill_logprobs(self, gapped_texts: Sequence[str], fills: Sequence[Sequence[int]]) -> list[list[float]]:
        """log-probs of the filler tokens for texts whose gap is already marked with :attr:`gap_token`."""
        enc = self.encode(gapped_texts, add_special_tokens=True)
        if self.sentinel_ids is None:
            raise ModelError("fill_logprobs needs sentinel tokens; use conditional_loglik for mask-token models.")
        s0 = self.sentinel_ids[0]
        dec = [[s0, *f] for f in fills]
        lps = self.target_logprobs(enc, dec)
        return [lp[1:] for lp in lps]
