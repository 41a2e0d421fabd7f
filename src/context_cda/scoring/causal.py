"""Causal LMs (GPT-2, Llama, SmolLM2, Gemma, any ``*ForCausalLM``): left-to-right token log-probabilities.

BOS/EOS come from the tokenizer: the *start token* (what an empty context is conditioned on) is the tokenizer's
BOS token, else its EOS token (GPT-2's ``<|endoftext|>`` is both); a tokenizer that adds BOS by itself keeps it.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

from ..errors import ModelError
from .base import LogLik, PositionScorerMixin, Scorer


class CausalScorer(PositionScorerMixin, Scorer):
    family = "causal"

    @cached_property
    def start_id(self) -> int:
        tok = self.tokenizer
        for cand in (tok.bos_token_id, tok.eos_token_id):
            if cand is not None:
                return int(cand)
        raise ModelError(f"{type(self.model).__name__}: the tokenizer has neither a BOS nor an EOS token.")

    @cached_property
    def lead_ids(self) -> list[int]:
        """Special tokens the tokenizer itself puts before a text (e.g. Llama-3's BOS); often none."""
        with_sp = self.tokenizer("a")["input_ids"]
        plain = self.tokenizer("a", add_special_tokens=False)["input_ids"]
        for k in range(len(with_sp) - len(plain) + 1):
            if list(with_sp[k : k + len(plain)]) == list(plain):
                return list(map(int, with_sp[:k]))
        return []

    def token_logprobs(self, seqs: Sequence[Sequence[int]], desc: str = "causal LM") -> list[list[float]]:
        """For each sequence, [log p(s[i] | s[:i]) for i in 1..len-1] (one pass over the sequence).

        Batched, the logits row of a prefix shared by several sequences (StereoSet's three candidates, CrowS
        pairs, M samples after one prompt) is projected to the vocabulary once; every sequence still runs
        its own forward pass, so the values equal the reference path's to float32 rounding."""
        offsets, n_slots = [], 0
        for s in seqs:
            offsets.append(n_slots)
            n_slots += max(len(s) - 1, 0)
        needs: list[list[tuple[int, int, int]]] = [[] for _ in seqs]
        if self.batch_size > 1:
            owner: dict[tuple[int, ...], int] = {}
            for i, s in enumerate(seqs):
                for p in range(len(s) - 1):
                    key = tuple(s[: p + 1])
                    o = owner.setdefault(key, i)
                    needs[o].append((p, s[p + 1], offsets[i] + p))
        else:
            for i, s in enumerate(seqs):
                needs[i] = [(p, s[p + 1], offsets[i] + p) for p in range(len(s) - 1)]
        flat = self._run_needs(seqs, needs, n_slots, desc=desc)
        return [flat[offsets[i] : offsets[i] + max(len(s) - 1, 0)] for i, s in enumerate(seqs)]

    @cached_property
    def _start_logprobs(self):
        """log p(token | start token) over the vocabulary, from one pass over the start token alone."""
        import torch

        with torch.inference_mode():
            ids = torch.tensor([[self.start_id]], device=self.device)
            logits = self.model(input_ids=ids).logits[0, -1].float()
            return torch.log_softmax(logits, dim=-1).cpu()

    def first_token_logprobs(self, token_ids: Sequence[int]) -> list[float]:
        lp = self._start_logprobs
        return [float(lp[t]) for t in token_ids]

    def two_pass_logprobs(self, seqs: Sequence[Sequence[int]]) -> list[list[float]]:
        """bias-bench's sentence scoring: the first token from a pass over the start token alone, the rest from
        a separate pass over the sentence with no prefix (so token 1 sees only token 0)."""
        firsts = self.first_token_logprobs([s[0] for s in seqs])
        rest = self.token_logprobs(seqs)
        return [[f, *r] for f, r in zip(firsts, rest, strict=True)]

    def conditional_loglik(self, prefixes: Sequence[str], continuations: Sequence[str]) -> list[LogLik]:
        if len(prefixes) != len(continuations):
            raise ValueError("prefixes and continuations must have the same length")
        pre_ids = self.encode(prefixes, add_special_tokens=False)
        cont_ids = self.encode(continuations, add_special_tokens=False)
        seqs, n_ctx = [], []
        for p, c in zip(pre_ids, cont_ids, strict=True):
            ctx = self.lead_ids + p
            if not ctx:
                ctx = [self.start_id]
            seqs.append(ctx + c)
            n_ctx.append(len(ctx))
        lps = self.token_logprobs(seqs)
        return [LogLik.from_logprobs(lp[k - 1 :]) for lp, k in zip(lps, n_ctx, strict=True)]
