"""Whole-word probabilities at BLANK for the next-token analysis with several-token gender words (``sequence``
candidates; causal and seq2seq LMs).

For a word w with mid-sentence tokens t_1 .. t_n after a context x (causal: the text before BLANK; T5: the
decoder after ``[start, <extra_id_0>]`` with BLANK as the sentinel in the encoder):

    log P(w | x) = sum_i log p(t_i | x, t_<i)  +  log p(boundary | x, t_1 .. t_n)

The first term is the chain rule over the word's tokens. The second (``word_boundary``, on by default) is the
probability that the token after them starts a new word: a token whose text begins with whitespace or with a
character that is not a letter or digit (punctuation, "'s"), or a special token (EOS, T5's next sentinel). Without
it a word also collects the probability of every longer word its tokens begin: "prince" would hold the mass of
"princess" when that is spelled "prince" + "ss", and "man" that of "manservant", which tilts a male/female
comparison whose female words are often the male word plus a suffix. With it the events "the next word is w" are
disjoint, so the probabilities of all words sum to at most 1.

Batched (batch size > 1), a causal LM reads each context's words as one prefix tree packed into rows with a
tree-shaped attention mask (the context runs once per row, shared word prefixes once); models that do not honour
such a mask, and seq2seq models, run right-padded batches of whole sequences. Batch size 1 is the reference: one
unpadded pass per (context, word), full logits. Both give the same values to float32 rounding (tested). The
output projection runs only at the positions read; log-softmax goes in blocks of rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_CHUNK = 64  # rows of logits per log-softmax block
Prefix = tuple[list[int], list[int] | None]  # (causal: context ids; seq2seq: encoder ids, decoder prefix ids)


def boundary_mask(tokenizer: Any, size: int) -> Any:
    """A (size,) bool tensor: True for the tokens that end the word before them (see the module docstring).

    Decided from the tokenizer's own decoding of ``the`` followed by the token (``"the cat"`` vs ``"thes"``), so
    byte-level BPE, WordPiece and SentencePiece are read alike; ids beyond the tokenizer's vocabulary (padding of
    the model's output layer) are False."""
    import torch

    anchor = [int(i) for i in tokenizer("the", add_special_tokens=False)["input_ids"]]
    base = tokenizer.decode(anchor, clean_up_tokenization_spaces=False)
    n = min(len(tokenizer), size)
    texts = tokenizer.batch_decode([[*anchor, v] for v in range(n)], clean_up_tokenization_spaces=False)
    mask = torch.zeros(size, dtype=torch.bool)
    for v, text in enumerate(texts):
        rest = text[len(base):] if text.startswith(base) else text
        head = rest[:1]
        mask[v] = not head or head.isspace() or (not head.isalnum() and head != "\ufffd")
    for v in getattr(tokenizer, "all_special_ids", []) or []:
        if 0 <= int(v) < size:
            mask[int(v)] = True
    return mask


class _Masks:
    """:func:`boundary_mask` per logits width, computed once."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.by_size: dict[int, Any] = {}

    def __call__(self, size: int) -> Any:
        if size not in self.by_size:
            self.by_size[size] = boundary_mask(self.tokenizer, size)
        return self.by_size[size]


def _read(flat: Any, tok_reqs: Sequence[tuple[int, int]], bound_reqs: Sequence[int], masks: _Masks):
    """From logits ``flat`` (N, V): log p(target) at (row j, target) requests and log p(boundary) at rows j."""
    import torch

    dev = flat.device
    tj = torch.tensor([j for j, _ in tok_reqs], dtype=torch.long, device=dev)
    tt = torch.tensor([t for _, t in tok_reqs], dtype=torch.long, device=dev)
    bj = torch.tensor(list(bound_reqs), dtype=torch.long, device=dev)
    tok_out = torch.zeros(len(tok_reqs), dtype=torch.float32, device=dev)
    bound_out = torch.zeros(len(bound_reqs), dtype=torch.float32, device=dev)
    m = masks(int(flat.shape[-1])).to(dev) if len(bound_reqs) else None
    for start in range(0, flat.shape[0], _CHUNK):
        lp = torch.log_softmax(flat[start : start + _CHUNK].float(), dim=-1)
        here = ((tj >= start) & (tj < start + _CHUNK)).nonzero()[:, 0]
        if here.numel():
            tok_out[here] = lp[tj[here] - start, tt[here]]
        here = ((bj >= start) & (bj < start + _CHUNK)).nonzero()[:, 0]
        if here.numel():
            bound_out[here] = torch.logsumexp(lp[bj[here] - start][:, m], dim=-1)
    return tok_out.cpu().tolist(), bound_out.cpu().tolist()


def _logits_at(scorer: Any, kwargs: dict[str, Any], rows: list[int], cols: list[int], width: int) -> Any:
    """(N, V) logits at (row, col) pairs; batched passes project only there, the reference pass everywhere."""
    import torch

    from ..scoring.base import _HeadAtPositions

    dev = scorer.device
    rr = torch.tensor(rows, dtype=torch.long, device=dev)
    cc = torch.tensor(cols, dtype=torch.long, device=dev)
    if scorer.batch_size > 1:
        head = _HeadAtPositions(scorer.model, width=width, rows=rr, cols=cc, batch=int(kwargs["input_ids"].shape[0]))
        with head:
            logits = scorer.model(**kwargs).logits
        if head.applied and tuple(logits.shape[:2]) == (1, len(rows)):
            return logits[0]
    else:
        logits = scorer.model(**kwargs).logits
    return logits[rr.to(logits.device), cc.to(logits.device)]


def _sum_word(tok: list[float], bound: list[float], spans: list[tuple[int, int, int]]) -> list[float]:
    """Per word: the sum of its token log-probs (tok[a:b]) plus its boundary log-prob (bound[k], k >= 0)."""
    return [sum(tok[a:b]) + (bound[k] if k >= 0 else 0.0) for a, b, k in spans]


def _flat_logprobs(scorer: Any, family: str, prefixes: Sequence[Prefix], seqs: Sequence[tuple[int, ...]],
                   mask: _Masks, word_boundary: bool) -> list[list[float]]:
    """One sequence per (context, word), right-padded batches of ``scorer.batch_size`` (1: unpadded)."""
    import torch

    from ..scoring.base import length_sorted_batches

    reqs = [(c, w) for c in range(len(prefixes)) for w in range(len(seqs))]

    def stream(c: int, w: int) -> list[int]:
        ctx, dec = prefixes[c]
        return [*(dec if family == "seq2seq" else ctx), *seqs[w]]

    out = [[0.0] * len(seqs) for _ in prefixes]
    lengths = [len(stream(c, w)) + (len(prefixes[c][0]) if family == "seq2seq" else 0) for c, w in reqs]
    with torch.inference_mode(), scorer._progress(len(reqs), "next-token words") as bar:
        for batch in length_sorted_batches(lengths, scorer.batch_size):
            streams = [stream(*reqs[i]) for i in batch]
            if family == "seq2seq":
                ids, att = scorer._pad([prefixes[reqs[i][0]][0] for i in batch])
                dec_ids, dec_att = scorer._pad(streams)
                kwargs = {"input_ids": ids, "attention_mask": att, "decoder_input_ids": dec_ids,
                          "decoder_attention_mask": dec_att}
            else:
                ids, att = scorer._pad(streams)
                kwargs = {"input_ids": ids, "attention_mask": att}
            rows, cols, tok_reqs, bound_reqs, spans = [], [], [], [], []
            for r, i in enumerate(batch):
                c, w = reqs[i]
                r0 = len(streams[r]) - len(seqs[w]) - 1  # the position that predicts the word's first token
                a = len(tok_reqs)
                for j, t in enumerate(seqs[w]):
                    tok_reqs.append((len(rows), t))
                    rows.append(r)
                    cols.append(r0 + j)
                k = -1
                if word_boundary:
                    k = len(bound_reqs)
                    bound_reqs.append(len(rows))
                    rows.append(r)
                    cols.append(r0 + len(seqs[w]))
                spans.append((a, len(tok_reqs), k))
            flat = _logits_at(scorer, kwargs, rows, cols, int(max(len(s) for s in streams)))
            tok, bound = _read(flat, tok_reqs, bound_reqs, mask)
            for (c, w), v in zip((reqs[i] for i in batch), _sum_word(tok, bound, spans), strict=True):
                out[c][w] = v
            bar.update(len(batch))
    return out


def _tree_rows(ctx: list[int], seqs: Sequence[tuple[int, ...]], width: int):
    """The context's word prefix tree in rows of at most ``width`` tokens (the context heads every row).

    Yields (tokens, parents, words): ``parents[j]`` is the column of token j's parent (-1: the first token), and
    ``words`` maps each word of the row to the columns that predict its tokens and the column after its end."""
    order = sorted(range(len(seqs)), key=lambda w: seqs[w])
    tokens: list[int] = []
    parents: list[int] = []
    col: dict[tuple[int, ...], int] = {}
    words: dict[int, tuple[list[int], int]] = {}
    for w in order:
        t = seqs[w]
        new = sum(1 for j in range(1, len(t) + 1) if t[:j] not in col)
        if not tokens or len(tokens) + new > width:
            if tokens:
                yield tokens, parents, words
            tokens, parents = list(ctx), [-1, *range(len(ctx) - 1)]
            col, words = {(): len(ctx) - 1}, {}
        for j in range(1, len(t) + 1):
            if t[:j] not in col:
                col[t[:j]] = len(tokens)
                parents.append(col[t[: j - 1]])
                tokens.append(t[j - 1])
        words[w] = ([col[t[:j]] for j in range(len(t))], col[t])
    if tokens:
        yield tokens, parents, words


def _tree_logprobs(scorer: Any, prefixes: Sequence[Prefix], seqs: Sequence[tuple[int, ...]], mask: _Masks,
                   word_boundary: bool) -> list[list[float]]:
    """Causal LMs, batched: every context's words as packed prefix-tree rows (see :func:`_tree_rows`)."""
    import torch

    from ..scoring.causal import PACK_TOKENS_PER_SEQ, PACK_WIDTH

    longest = max(len(s) for s in seqs)
    rows = []
    for c, (ctx, _) in enumerate(prefixes):
        width = max(PACK_WIDTH, len(ctx) + longest)
        rows += [(c, *row) for row in _tree_rows(ctx, seqs, width)]
    out = [[0.0] * len(seqs) for _ in prefixes]
    per_pass = max(1, scorer.batch_size * PACK_TOKENS_PER_SEQ // PACK_WIDTH)
    with torch.inference_mode(), scorer._progress(len(rows), "next-token words") as bar:
        for start in range(0, len(rows), per_pass):
            batch = rows[start : start + per_pass]
            kwargs = scorer._packed_inputs([b[1] for b in batch], [b[2] for b in batch])
            rr, cc, tok_reqs, bound_reqs, spans, owners = [], [], [], [], [], []
            for r, (c, _tokens, _par, words) in enumerate(batch):
                at: dict[int, int] = {}  # column -> index of its logits row
                for w, (cols, end) in words.items():
                    for x in (*cols, end):
                        if x not in at:
                            at[x] = len(rr)
                            rr.append(r)
                            cc.append(x)
                    a = len(tok_reqs)
                    tok_reqs += [(at[x], t) for x, t in zip(cols, seqs[w], strict=True)]
                    k = -1
                    if word_boundary:
                        k = len(bound_reqs)
                        bound_reqs.append(at[end])
                    spans.append((a, len(tok_reqs), k))
                    owners.append((c, w))
            flat = _logits_at(scorer, kwargs, rr, cc, int(kwargs["input_ids"].shape[1]))
            tok, bound = _read(flat, tok_reqs, bound_reqs, mask)
            for (c, w), v in zip(owners, _sum_word(tok, bound, spans), strict=True):
                out[c][w] = v
            bar.update(len(batch))
    return out


def word_logprobs(
    scorer: Any, family: str, prefixes: Sequence[Prefix], seqs: Sequence[Sequence[int]], *, word_boundary: bool = True
) -> list[list[float]]:
    """``out[c][w]`` = log P(word w | context c) (module docstring) for every context and candidate word.

    ``prefixes[c]``: causal, (context ids incl. BOS / the start token, None); seq2seq, (encoder ids, decoder
    prefix ``[decoder_start, sentinel]``). ``seqs[w]``: the word's mid-sentence token ids."""
    if family not in ("causal", "seq2seq"):
        raise ValueError(f"whole-word probabilities need a causal or seq2seq LM, got {family!r}")
    seqs = [tuple(int(t) for t in s) for s in seqs]
    if not prefixes or not seqs:
        return [[] for _ in prefixes]
    if any(not s for s in seqs):
        raise ValueError("every candidate word needs at least one token")
    mask = _Masks(scorer.tokenizer)
    longest = max(len(p[0]) for p in prefixes) + max(len(s) for s in seqs)
    if family == "causal" and scorer.batch_size > 1 and scorer._can_pack(longest):
        return _tree_logprobs(scorer, prefixes, seqs, mask, word_boundary)
    return _flat_logprobs(scorer, family, prefixes, seqs, mask, word_boundary)
