"""Training objectives, chosen by model family (never by model name).

* masked (BERT, DistilBERT, ...): BERT-style masked LM: ``mlm_probability`` of the non-special tokens are chosen
  (whole words with ``whole_word_mask``); 80 % become the mask token, 10 % a random token, 10 % stay.
* causal (GPT-2, Llama, SmolLM2, any ``AutoModelForCausalLM``): next-token prediction over the whole sequence.
* seq2seq (T5): span corruption as in the T5 paper: noise spans (density ``noise_density``, mean length
  ``mean_span_length``) are replaced in the input by the tokenizer's sentinel tokens, and the target lists each
  sentinel followed by the tokens it hid, then EOS.

Every random choice draws from a ``numpy.random.Generator`` passed in by the caller, which seeds it from
(seed, epoch, batch): a batch is corrupted the same way whether or not training was interrupted and resumed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ModelError

IGNORE = -100


@dataclass
class Objective:
    family: str
    tokenizer: Any
    mlm_probability: float = 0.15
    whole_word_mask: bool = False
    noise_density: float = 0.15
    mean_span_length: float = 3.0

    def __post_init__(self) -> None:
        tok = self.tokenizer
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0)
        if self.family == "masked" and tok.mask_token_id is None:
            raise ModelError(f"{type(tok).__name__}: a masked LM needs a tokenizer with a mask token.")
        self.special_ids = set(getattr(tok, "all_special_ids", []) or [])
        if self.family == "seq2seq":
            self.sentinels = sentinel_ids(tok)
            if tok.eos_token_id is None:
                raise ModelError(f"{type(tok).__name__}: span corruption needs an EOS token.")
            self.special_ids |= set(self.sentinels)
        self.vocab_size = len(tok)

    def collate(self, examples: Sequence[dict[str, list[int]]], rng: np.random.Generator) -> dict[str, Any]:
        if self.family == "masked":
            return self._masked(examples, rng)
        if self.family == "causal":
            return self._causal(examples)
        if self.family == "seq2seq":
            return self._span_corruption(examples, rng)
        raise ModelError(f"unknown model family {self.family!r}")

    # ------------------------------------------------------------------------------------------------ causal
    def _causal(self, examples):

        ids, mask = _pad([e["input_ids"] for e in examples], self.pad_id)
        labels = ids.clone()
        labels[mask == 0] = IGNORE
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}

    # ------------------------------------------------------------------------------------------------ masked
    def _masked(self, examples, rng: np.random.Generator):
        import torch

        rows_in, rows_lab = [], []
        mask_id = self.tokenizer.mask_token_id
        for ex in examples:
            ids = np.asarray(ex["input_ids"], dtype=np.int64)
            candidates = np.array([t not in self.special_ids for t in ids.tolist()])
            if self.whole_word_mask and "word_ids" in ex:
                words = np.asarray(ex["word_ids"])
                uniq = np.unique(words[(words >= 0) & candidates])
                chosen_words = uniq[rng.random(len(uniq)) < self.mlm_probability]
                chosen = np.isin(words, chosen_words) & candidates
            else:
                chosen = (rng.random(len(ids)) < self.mlm_probability) & candidates
            if not chosen.any() and candidates.any():  # at least one prediction per sequence
                chosen[rng.choice(np.flatnonzero(candidates))] = True
            labels = np.where(chosen, ids, IGNORE)
            action = rng.random(len(ids))
            inp = ids.copy()
            inp[chosen & (action < 0.8)] = mask_id
            rand = chosen & (action >= 0.8) & (action < 0.9)
            inp[rand] = rng.integers(0, self.vocab_size, size=int(rand.sum()))
            rows_in.append(inp.tolist())
            rows_lab.append(labels.tolist())
        ids, attn = _pad(rows_in, self.pad_id)
        labels, _ = _pad(rows_lab, IGNORE)
        return {"input_ids": ids, "attention_mask": attn, "labels": labels.to(torch.long)}

    # ------------------------------------------------------------------------------------------------ seq2seq
    def _span_corruption(self, examples, rng: np.random.Generator):
        eos = self.tokenizer.eos_token_id
        inputs, targets = [], []
        for ex in examples:
            ids = [t for t in ex["input_ids"] if t != eos]
            if len(ids) < 2:
                ids = list(ex["input_ids"])
            noise = random_spans_noise_mask(len(ids), self.noise_density, self.mean_span_length, rng)
            inp, tgt = _corrupt(ids, noise, self.sentinels)
            inputs.append(inp + [eos])
            targets.append(tgt + [eos])
        ids, attn = _pad(inputs, self.pad_id)
        labels, _ = _pad(targets, IGNORE)
        return {"input_ids": ids, "attention_mask": attn, "labels": labels}


def _pad(rows: Sequence[Sequence[int]], value: int):
    import torch

    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), value, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(list(r), dtype=torch.long)
        mask[i, : len(r)] = 1
    return ids, mask


def sentinel_ids(tokenizer) -> list[int]:
    """Sentinel token ids in order (``<extra_id_0>``, ``<extra_id_1>``, ...), read from the tokenizer."""
    if hasattr(tokenizer, "get_sentinel_token_ids"):
        try:
            ids = [int(i) for i in tokenizer.get_sentinel_token_ids()]
            toks = tokenizer.convert_ids_to_tokens(ids)
            order = sorted(range(len(ids)), key=lambda i: _sentinel_number(toks[i]))
            ids = [ids[i] for i in order]
            if ids:
                return ids
        except Exception:  # noqa: BLE001 - fall back to scanning the vocabulary
            pass
    found: dict[int, int] = {}
    for tok, idx in tokenizer.get_vocab().items():
        n = _sentinel_number(tok)
        if n >= 0:
            found[n] = idx
    if not found:
        raise ModelError(
            f"{type(tokenizer).__name__}: no sentinel tokens (<extra_id_N>) found; span corruption needs them "
            "(T5 tokenizers have 100)."
        )
    return [found[n] for n in sorted(found)]


_SENTINEL = re.compile(r"^<extra_id_(\d+)>$")


def _sentinel_number(tok: str) -> int:
    m = _SENTINEL.match(tok or "")
    return int(m.group(1)) if m else -1


def random_spans_noise_mask(
    length: int, noise_density: float, mean_span_length: float, rng: np.random.Generator
) -> np.ndarray:
    """T5's noise mask: about ``noise_density`` of ``length`` tokens in spans of mean ``mean_span_length``.

    Same algorithm as ``random_spans_noise_mask`` in T5 / transformers' ``run_t5_mlm_flax.py``; at least one
    token is noise and at least one is not.
    """
    if length < 2:
        return np.zeros(length, dtype=bool)
    num_noise = int(np.round(length * noise_density))
    num_noise = min(max(num_noise, 1), length - 1)
    num_spans = max(int(np.round(num_noise / mean_span_length)), 1)
    num_nonnoise = length - num_noise
    num_spans = min(num_spans, num_noise, num_nonnoise)

    def segment(n_items: int, n_segments: int) -> np.ndarray:
        marks = np.arange(n_items - 1) < (n_segments - 1)
        rng.shuffle(marks)
        marks = np.pad(marks, [[1, 0]])
        seg_id = np.cumsum(marks)
        return np.bincount(seg_id, minlength=n_segments)

    noise_lengths = segment(num_noise, num_spans)
    nonnoise_lengths = segment(num_nonnoise, num_spans)
    interleaved = np.reshape(np.stack([nonnoise_lengths, noise_lengths], axis=1), [num_spans * 2])
    starts = np.cumsum(interleaved)[:-1]
    start_ind = np.zeros(length, dtype=np.int8)
    start_ind[starts] = 1
    span_num = np.cumsum(start_ind)
    return span_num % 2 == 1


def _corrupt(ids: list[int], noise: np.ndarray, sentinels: list[int]) -> tuple[list[int], list[int]]:
    inp: list[int] = []
    tgt: list[int] = []
    k = 0
    prev = False
    for t, is_noise in zip(ids, noise.tolist(), strict=True):
        if is_noise:
            if not prev:
                s = sentinels[min(k, len(sentinels) - 1)]
                inp.append(s)
                tgt.append(s)
                k += 1
            tgt.append(t)
        else:
            inp.append(t)
        prev = is_noise
    return inp, tgt
