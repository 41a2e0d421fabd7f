"""Encoder-decoder LMs (T5, BART, ...): the prefix is the encoder input, the continuation the decoder target.

Filling a gap uses the tokenizer's first sentinel token (T5's ``<extra_id_0>``) when it has one: the encoder
reads the text with the gap replaced by the sentinel and the decoder target is ``sentinel + filler``, as in T5's
span-corruption pre-training. Tokenizers without sentinels but with a mask token (BART) fall back to that token
and the decoder reconstructs the whole text up to the scored token.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import cached_property
from itertools import accumulate

from ..errors import ModelError
from .base import LogLik, Scorer, _accepts, gather_logprobs, length_sorted_batches


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
        """[log p(dec[i] | enc, dec[:i]) for every decoder target token] (decoder start token from the model).

        Batched, once :attr:`shares_encoder` has checked it on the model: each distinct encoder input runs through
        the encoder once however many targets it has, a decoder input that is a prefix of another one under the
        same encoder input is read from the longer (the decoder is causal), and the vocabulary is projected only
        at the positions read (StereoSet's three candidates share their gapped context and, for a one-token word,
        the whole decoder input). Else, and for batch size 1 (the reference): one padded pass per batch of
        (encoder, target) pairs with full logits."""
        if self.batch_size > 1 and self.shares_encoder:
            return self._shared_target_logprobs(enc_seqs, dec_seqs, desc)
        return self._paired_target_logprobs(enc_seqs, dec_seqs, desc)

    def _paired_target_logprobs(self, enc_seqs: Sequence[Sequence[int]], dec_seqs: Sequence[Sequence[int]],
                                desc: str) -> list[list[float]]:
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

    @cached_property
    def decoder_start_id(self) -> int | None:
        cfg = self.model.config
        start = getattr(cfg, "decoder_start_token_id", None)
        if start is None:
            start = getattr(getattr(self.model, "generation_config", None), "decoder_start_token_id", None)
        return None if start is None else int(start)

    @cached_property
    def shares_encoder(self) -> bool:
        """Whether the model takes precomputed ``encoder_outputs`` and ``decoder_input_ids`` (the decoder start
        token followed by the target but its last token) with the values of a pass from labels: checked once on
        a probe, two targets of one encoder input, one a prefix of the other, against :meth:`_paired_target_logprobs`."""
        if self.decoder_start_id is None or not all(_accepts(self.model, k) for k in ("encoder_outputs",
                                                                                      "decoder_input_ids")):
            return False
        enc = self.encode(["The doctor said that the nurse was tired today."], add_special_tokens=True)[0]
        dec = self.encode(["the nurse was tired"], add_special_tokens=False)[0]
        if len(dec) < 3:
            return False
        encs, decs = [enc, enc, enc[:-2] + enc[-1:]], [dec, dec[:2], dec]
        try:
            got = self._shared_target_logprobs(encs, decs, "probe", quiet=True)
        except Exception:  # noqa: BLE001 - any failure means: the paired passes
            return False
        want = self._paired_target_logprobs(encs, decs, "probe")
        flat_g, flat_w = [v for x in got for v in x], [v for x in want for v in x]
        scale = max(1.0, *map(abs, flat_w))
        return len(flat_g) == len(flat_w) and max(abs(a - b) for a, b in zip(flat_g, flat_w, strict=True)) <= 1e-5 * scale

    def _shared_target_logprobs(self, enc_seqs: Sequence[Sequence[int]], dec_seqs: Sequence[Sequence[int]],
                                desc: str, quiet: bool = False) -> list[list[float]]:
        """:meth:`target_logprobs`, batched with shared encoder inputs and decoder prefixes (see there)."""
        import torch

        offsets = [0, *accumulate(len(d) for d in dec_seqs)]
        flat = [0.0] * offsets[-1]
        enc_of, rows, needs = _decoder_rows(enc_seqs, dec_seqs, offsets, int(self.decoder_start_id))
        uniq = list(enc_of)
        with torch.inference_mode(), self._progress(0 if quiet else len(enc_seqs), desc) as bar:
            for batch in _rows_by_encoder([len(uniq[u]) for u, _ in rows], [u for u, _ in rows], self.batch_size):
                reqs, slots = [], []
                for r, k in enumerate(batch):
                    for pos, t, slot in needs[k]:
                        reqs.append((r, pos, t))
                        slots.append(slot)
                values = self._decoder_pass([uniq[rows[k][0]] for k in batch], [rows[k][0] for k in batch],
                                            [rows[k][1] for k in batch], reqs)
                for slot, v in zip(slots, values, strict=True):
                    flat[slot] = v
                if not quiet:
                    bar.update(len(batch))
            if not quiet:
                bar.update(len(enc_seqs) - bar.n)
        return [flat[offsets[i] : offsets[i + 1]] for i in range(len(dec_seqs))]

    def _decoder_pass(self, encs: Sequence[Sequence[int]], enc_keys: Sequence[int],
                      dec_inputs: Sequence[Sequence[int]], reqs: Sequence[tuple[int, int, int]]) -> list[float]:
        """One encoder pass over the distinct inputs of a batch and one decoder pass over its rows (row r decodes
        ``dec_inputs[r]`` from ``encs[r]``); ``reqs`` (row, position, target) are read, the output layer at those
        positions only."""
        import torch
        from transformers.modeling_outputs import BaseModelOutput

        from .base import _HeadAtPositions, request_tensors

        first: dict[int, int] = {}
        for r, key in enumerate(enc_keys):
            first.setdefault(key, r)
        ids, att = self._pad([encs[r] for r in first.values()])
        hidden = self.model.get_encoder()(input_ids=ids, attention_mask=att).last_hidden_state
        pick = torch.tensor([list(first).index(key) for key in enc_keys], device=ids.device)
        dec, _ = self._pad(dec_inputs)
        rows_t, cols_t, targets, j_t = request_tensors(reqs, dec.device)
        head = _HeadAtPositions(self.model, width=dec.shape[1], rows=rows_t, cols=cols_t, batch=dec.shape[0])
        with head:
            logits = self.model(encoder_outputs=BaseModelOutput(last_hidden_state=hidden[pick]),
                                attention_mask=att[pick], decoder_input_ids=dec).logits
        flat = logits[0] if head.applied and logits.shape[:2] == (1, len(rows_t)) else logits[rows_t, cols_t]
        return [float(v) for v in gather_logprobs(flat, targets, rows=j_t).tolist()]
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


def _decoder_rows(enc_seqs: Sequence[Sequence[int]], dec_seqs: Sequence[Sequence[int]], offsets: Sequence[int],
                  start: int) -> tuple[dict[tuple[int, ...], int], list[tuple[int, list[int]]], list[list[tuple]]]:
    """The distinct encoder inputs (ids -> key), the decoder rows to run ((encoder key, decoder input = start +
    target but its last token)) and each row's reads (position, target, slot: ``offsets[i] + position``). A
    target whose decoder input is a prefix of a longer one under the same encoder input is read from the longer."""
    enc_of: dict[tuple[int, ...], int] = {}
    keys = [enc_of.setdefault(tuple(e), len(enc_of)) for e in enc_seqs]
    order = sorted((i for i in range(len(dec_seqs)) if dec_seqs[i]), key=lambda i: -len(dec_seqs[i]))
    owner: dict[tuple[int, tuple[int, ...]], int] = {}
    rows: list[tuple[int, list[int]]] = []
    needs: list[list[tuple]] = []
    row_of: dict[int, int] = {}
    for i in order:
        din = [start, *map(int, dec_seqs[i][:-1])]
        whole = (keys[i], tuple(din))
        o = owner.get(whole)
        if o is None:  # not inside a longer row: a row of its own, owning its prefixes not owned yet
            o = row_of[i] = len(rows)
            rows.append((keys[i], din))
            needs.append([])
            for k in range(1, len(din) + 1):
                owner.setdefault((keys[i], tuple(din[:k])), o)
        for p, t in enumerate(dec_seqs[i]):
            needs[owner[(keys[i], tuple(din[: p + 1]))]].append((p, int(t), offsets[i] + p))
    return enc_of, rows, needs


def _rows_by_encoder(enc_lengths: Sequence[int], enc_keys: Sequence[int], batch_size: int,
                     max_pad: float = 0.1) -> Iterator[list[int]]:
    """Batches of at most ``batch_size`` decoder rows, longest encoder input first and the rows of one encoder
    input together (its encoder pass is shared), a batch ending before an encoder input shorter than ``1 -
    max_pad`` times its first."""
    order = sorted(range(len(enc_keys)), key=lambda k: (-enc_lengths[k], enc_keys[k]))
    batch: list[int] = []
    for k in order:
        if batch and (len(batch) >= batch_size or enc_lengths[k] < (1.0 - max_pad) * enc_lengths[batch[0]]):
            yield batch
            batch = []
        batch.append(k)
    if batch:
        yield batch
