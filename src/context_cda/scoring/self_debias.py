"""Self-Debias (Schick et al., 2021) as a scorer: the ``self-debias`` arm changes how a model is scored, not its
weights.

Each scored position is run twice in one batch: as the benchmark gives it (the *regular* row) and after a
debiasing prefix ("The following text discriminates against people because of their gender: "). Where the prefix
makes a token more likely (its probability ``p_b`` exceeds the regular ``p``), that token's probability is decayed,
``p * max(exp(-lambda * (p_b - p)), epsilon)``, and the distribution renormalised. The benchmarks read these
probabilities where they read the model's own (StereoSet, CrowS-Pairs), so every scoring rule stays the same.

How the rows are built follows McGill-NLP/bias-bench (``MaskedLMWrapper.get_token_logits_self_debiasing``,
``GPT2Wrapper.compute_loss_self_debiasing``): the prefixes (``[CLS]`` and ``[CLS] <prefix>`` for masked LMs, ``""``
and ``<prefix>`` for causal LMs) are left-padded to one width and put before the input; position ids count the
attended tokens (masked LMs: from the embeddings' padding index when they have one, RoBERTa-style, else from 0).

One difference has a mode. bias-bench's causal runner reads the *first* token of a sentence at the last prefix
position, where the regular row holds padding only: the model attends there to nothing, so the value depends on
the attention implementation (this module uses the model's own, transformers' ``sdpa`` by default). With
``mode="bias-bench"`` that is what is computed; by default the regular distribution of the first token is the one
the plain scorer uses (after the start token), so self-debias changes only what the prefix changes. bias-bench also
hard-codes where the sentence starts in the prefixed row (13 for gender: GPT-2's token count of the prefix); the
default mode reads at the prefix's token count for the model's tokenizer (13 for GPT-2's), bias-bench mode at
bias-bench's number, whatever the tokenizer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate
from typing import Any

from ..errors import ModelError
from .base import _accepts, side_by_side
from .causal import CausalScorer
from .masked import MaskedScorer

#: where bias-bench's causal runners read the sentence in the prefixed row, by bias type (its hard-coded "lengths
#: of prompts": GPT-2's token counts of the prefixes); bias-bench mode reads there whatever the tokenizer
BIAS_BENCH_POSITIONS = {"gender": 13, "race": 15, "race-color": 15, "religion": 13}


@dataclass(frozen=True)
class SelfDebiasSettings:
    prefixes: tuple[str, ...]
    decay_constant: float = 50.0
    epsilon: float = 0.01
    mode: str = "default"  # default | bias-bench
    position: int | None = None  # bias-bench mode: its fixed sentence position (None: the prefix's token count)


def debiased_logprobs(logits: Any, n_prefixes: int, decay: float, epsilon: float) -> Any:
    """log of the self-debiased distribution of row 0 from ``logits`` (1 + n_prefixes, ..., V): bias-bench's
    ``SelfDebiasingLogitsProcessor`` (alpha = max(p_biased - p_regular, 0), the max over the prefixes' p)."""
    import torch

    p = logits[0].float().softmax(dim=-1)
    biased = logits[1 : 1 + n_prefixes].float().softmax(dim=-1).amax(dim=0)
    alpha = torch.clamp(biased - p, min=0.0)
    factor = torch.clamp(torch.exp(-alpha * decay), min=epsilon)
    q = p * factor
    return torch.log(q / q.sum(dim=-1, keepdim=True))


def debiased_target_logprobs(logits: Any, rows: Any, targets: Any, n_prefixes: int, decay: float, epsilon: float,
                             chunk: int = 8) -> Any:
    """``debiased_logprobs(logits, ...)[rows[j], targets[j]]`` for logits (1 + n_prefixes, N, V): the same
    operations in the same order, on ``chunk`` positions at a time (each block stays in cache), in place where
    the value is not needed again, and only the log-probabilities asked for are taken."""
    import torch

    out = torch.empty(len(rows), dtype=torch.float32, device=logits.device)
    rows = torch.as_tensor(rows, device=logits.device)
    targets = torch.as_tensor(targets, device=logits.device)
    for start in range(0, logits.shape[1], chunk):
        here = ((rows >= start) & (rows < start + chunk)).nonzero()[:, 0]
        if not here.numel():
            continue
        p = logits[0, start : start + chunk].float().softmax(dim=-1)
        factor = logits[1 : 1 + n_prefixes, start : start + chunk].float().softmax(dim=-1).amax(dim=0)
        factor.sub_(p).clamp_(min=0.0).mul_(-decay).exp_().clamp_(min=epsilon)  # max(exp(-alpha * decay), eps)
        q = p.mul_(factor)
        total = q.sum(dim=-1)
        r = rows[here] - start
        out[here] = torch.log(q[r, targets[here]] / total[r])
    return out


def _left_padded(tokenizer: Any, texts: Sequence[str], pad: int, add_special_tokens: bool) -> tuple[list, list]:
    """(ids, attention) rows of ``texts`` left-padded to one width (bias-bench pads right, flips the mask and
    rolls the ids: the same rows)."""
    enc = [list(map(int, tokenizer(t, add_special_tokens=add_special_tokens)["input_ids"])) for t in texts]
    width = max((len(e) for e in enc), default=0)
    return ([[pad] * (width - len(e)) + e for e in enc], [[0] * (width - len(e)) + [1] * len(e) for e in enc])


class _SelfDebiasMixin:
    settings: SelfDebiasSettings

    def _rows(self: Any, prefix_ids: list, prefix_att: list, seq: Sequence[int], right_pad: int = 0) -> dict[str, Any]:
        import torch

        tail = [int(prefix_ids[0][0]) if prefix_ids and prefix_ids[0] else 0] * right_pad  # masked out: any id
        ids = torch.tensor([p + list(seq) + tail for p in prefix_ids], dtype=torch.long)
        att = torch.tensor([a + [1] * len(seq) + [0] * right_pad for a in prefix_att], dtype=torch.long)
        pos = self._positions(att)
        return {"input_ids": ids.to(self.device), "attention_mask": att.to(self.device), "position_ids": pos.to(self.device)}

    def _debias(self: Any, logits: Any) -> Any:
        s = self.settings
        return debiased_logprobs(logits, len(s.prefixes), s.decay_constant, s.epsilon)

    def _debiased_reads(self: Any, kwargs: dict[str, Any], reqs: Sequence[tuple[int, int, int]], n_var: int) -> list[float]:
        """One pass over packed rows (batch row = row x ``n_var`` + variant); ``reqs`` (variant 0's batch row,
        column, target). The output layer runs at the positions read only, for every variant (through the base
        stack where the logits are its output layer's, :attr:`.CausalScorer.decomposable`, else a hook); each
        distinct position's distributions are debiased once."""
        import torch

        from .base import _HeadAtPositions

        pair: dict[tuple[int, int], int] = {}
        j_of = [pair.setdefault((r, c), len(pair)) for r, c, _t in reqs]
        rows = torch.tensor([r + v for v in range(n_var) for r, _c in pair], dtype=torch.long)
        cols = torch.tensor([c for _v in range(n_var) for _r, c in pair], dtype=torch.long)
        ids = kwargs["input_ids"]
        if getattr(self, "decomposable", False):
            with torch.inference_mode():
                flat = self.model.get_output_embeddings()(self._hidden_at(kwargs, rows.to(ids.device),
                                                                            cols.to(ids.device)))
        else:
            head = _HeadAtPositions(self.model, width=ids.shape[1], rows=rows, cols=cols, batch=ids.shape[0])
            with torch.inference_mode(), head:
                logits = self.model(**kwargs).logits
            flat = logits[0] if head.applied else logits[rows.to(logits.device), cols.to(logits.device)]
        s = self.settings
        picked = debiased_target_logprobs(flat.reshape(n_var, len(pair), -1), j_of, [t for _r, _c, t in reqs],
                                          len(s.prefixes), s.decay_constant, s.epsilon)
        return [float(v) for v in picked.tolist()]


class SelfDebiasMaskedScorer(_SelfDebiasMixin, MaskedScorer):
    """A masked LM scored with self-debiasing at every masked position (``batch_size`` sequences per forward pass;
    bias-bench runs one: ``batch_size=1`` is that reference path, the same scores to float rounding)."""

    def __init__(self, model: Any, tokenizer: Any, settings: SelfDebiasSettings, progress: bool = False,
                 batch_size: int = 1) -> None:
        super().__init__(model, tokenizer, batch_size=batch_size, progress=progress)
        if not _accepts(model, "position_ids"):
            raise ModelError(f"self-debias: {type(model).__name__} takes no position_ids, which the prefixed rows "
                             "need; use a BERT- or RoBERTa-style masked LM.")
        cls = tokenizer.cls_token
        if cls is None:
            raise ModelError(f"self-debias: the tokenizer of {type(model).__name__} has no CLS token to start the "
                             "prefixed rows with.")
        self.settings = settings
        texts = [cls, *(f"{cls} {p}" for p in settings.prefixes)]
        self._prefix_ids, self._prefix_att = _left_padded(tokenizer, texts, self.pad_id, False)

    def _positions(self, att: Any) -> Any:
        pos = att.cumsum(-1)
        emb = getattr(getattr(self.model, "base_model", self.model), "embeddings", None)
        pad_idx = getattr(emb, "padding_idx", None)
        pos = pos + int(pad_idx) if isinstance(pad_idx, int) else pos - 1
        return pos.masked_fill(att == 0, 1)

    def logprobs_at(self, seqs, positions, targets, token_type_ids=None) -> list[float]:
        """log p_debiased(target | seq) at ``position`` (the sequence holds its mask token; its first token is
        the CLS the prefixes replace). Batched: ``batch_size`` distinct sequences a pass, each as its prefixed
        rows, right-padded to the longest (an encoder attends to no padding), the output layer only at the
        positions read; one at a time (batch size 1): bias-bench's loop. (A bidirectional encoder's prefix
        depends on the sentence after it, so it is encoded with each.)"""
        import torch

        from .base import length_sorted_batches

        if self.batch_size == 1:
            return self._one_at_a_time(seqs, positions, targets)
        keys: dict[tuple[int, ...], int] = {}
        uniq: list[list[int]] = []
        needs: list[list[tuple[int, int, int]]] = []
        for i, (seq, pos, t) in enumerate(zip(seqs, positions, targets, strict=True)):
            u = keys.setdefault(tuple(seq), len(uniq))
            if u == len(uniq):
                uniq.append(list(seq))
                needs.append([])
            needs[u].append((int(pos), int(t), i))
        out = [0.0] * len(seqs)
        width, n_var = len(self._prefix_ids[0]), len(self._prefix_ids)
        with torch.inference_mode(), self._progress(len(seqs), "self-debias") as bar:
            for batch in length_sorted_batches([len(q) for q in uniq], self.batch_size):
                longest = max(len(uniq[u]) for u in batch)
                rows = [self._rows(self._prefix_ids, self._prefix_att, uniq[u][1:], longest - len(uniq[u]))
                        for u in batch]
                kwargs = {k: torch.cat([r[k] for r in rows]) for k in rows[0]}
                reqs = [(b * n_var, width + pos - 1, t) for b, u in enumerate(batch) for pos, t, _i in needs[u]]
                slots = [i for u in batch for _p, _t, i in needs[u]]
                for slot, v in zip(slots, self._debiased_reads(kwargs, reqs, n_var), strict=True):
                    out[slot] = v
                bar.update(len(slots))
        return out

    def _one_at_a_time(self, seqs, positions, targets) -> list[float]:
        """bias-bench's loop: one sequence's prefixed rows a pass, the full logits."""
        import torch

        out = []
        width = len(self._prefix_ids[0])
        with torch.inference_mode(), self._progress(len(seqs), "self-debias") as bar:
            for seq, pos, t in zip(seqs, positions, targets, strict=True):
                rows = self._rows(self._prefix_ids, self._prefix_att, list(seq)[1:])
                logits = self.model(**rows).logits
                lp = self._debias(logits[:, width + pos - 1])
                out.append(float(lp[int(t)]))
                bar.update(1)
        return out


class SelfDebiasCausalScorer(_SelfDebiasMixin, CausalScorer):
    """A causal LM scored with self-debiasing at every position (``batch_size`` sentences per forward pass;
    bias-bench runs one: ``batch_size=1`` is that reference path, the same scores to float rounding)."""

    def __init__(self, model: Any, tokenizer: Any, settings: SelfDebiasSettings, progress: bool = False,
                 batch_size: int = 1) -> None:
        super().__init__(model, tokenizer, batch_size=batch_size, progress=progress)
        if not _accepts(model, "position_ids"):
            raise ModelError(f"self-debias: {type(model).__name__} takes no position_ids, which the prefixed rows "
                             "need.")
        self.settings = settings
        pad = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else self.pad_id  # bias-bench: pad = EOS
        # the regular row's "prefix" is "" - bias-bench encodes it with the special tokens, so a tokenizer that adds
        # BOS puts one before the sentence there; the default mode keeps the sentence alone, as the plain scorer
        regular = _left_padded(tokenizer, [""], int(pad), settings.mode == "bias-bench")
        prefixed = _left_padded(tokenizer, list(settings.prefixes), int(pad), True)
        width = max(len(regular[0][0]), len(prefixed[0][0]))
        rows = [(ids, att) for part in (regular, prefixed) for ids, att in zip(*part, strict=True)]
        self._prefix_ids = [[int(pad)] * (width - len(i)) + i for i, _ in rows]
        self._prefix_att = [[0] * (width - len(a)) + a for _, a in rows]

    @property
    def prefix_length(self) -> int:
        """Where the sentence is read in the prefixed rows: the prefix's token count (bias-bench mode: its fixed
        position, 13 for gender, GPT-2's count)."""
        fixed = self.settings.position if self.settings.mode == "bias-bench" else None
        return int(fixed) if fixed is not None else len(self._prefix_ids[0])

    def _positions(self, att: Any) -> Any:
        return (att.cumsum(-1) - 1).masked_fill(att == 0, 1)

    def _sentences(self, seqs: Sequence[Sequence[int]], start_id: int | None) -> list[list[float]]:
        """Debiased log p of every token of each sequence: token 0 at the last prefix position, token i after
        tokens 0..i-1 (the regular row holds the sentence alone, as bias-bench's two-pass scoring). The sequences
        run in one batch, right-padded after the left-padded prefixes (a causal LM reads no position after the
        one it predicts from, so the padding changes nothing but float rounding)."""
        import torch

        width = self.prefix_length
        if width > len(self._prefix_ids[0]) + 1:
            raise ModelError(f"self-debias (bias-bench mode) reads the sentence at position {width} (bias-bench's fixed "
                             f"number, GPT-2's prefix length), but this tokenizer's prefix has only "
                             f"{len(self._prefix_ids[0])} tokens; use baselines.mode=default.")
        n_rows, longest = len(self._prefix_ids), max(len(q) for q in seqs)
        rows = [self._rows(self._prefix_ids, self._prefix_att, list(q), longest - len(q)) for q in seqs]
        batch = {k: torch.cat([r[k] for r in rows]) for k in rows[0]}
        with torch.inference_mode():
            logits = self.model(**batch).logits
        out = []
        for j, q in enumerate(seqs):
            read = logits[j * n_rows:(j + 1) * n_rows, width - 1 : width - 1 + len(q)].clone()
            if self.settings.mode != "bias-bench" and start_id is not None:
                read[0, 0] = self._start_logprobs(int(start_id)).to(read.device)  # the plain scorer's first token
            lp = self._debias(read)
            out.append([float(lp[i, int(t)]) for i, t in enumerate(q)])
        return out

    def _batches(self, seqs: Sequence[Sequence[int]], start_id: int | None) -> list[list[float]]:
        """Every sequence's debiased log-probabilities, in the order given: batched, through the prefix tree with
        the prefixes encoded once (:meth:`_tree_sentences`) where the model can continue a cached prefix, else
        :meth:`_sentences` over ``batch_size`` sequences at a time, longest first (one at a time: the reference)."""
        if self.batch_size > 1 and seqs and self._context is not None and \
                self._can_pack(len(self._prefix_ids[0]) + max(len(q) for q in seqs)):
            flat = self._tree_sentences(seqs, start_id, self._context)
            out, k = [], 0
            for q in seqs:
                out.append(flat[k : k + len(q)])
                k += len(q)
            return out
        order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))
        out = [[] for _ in seqs]
        with self._progress(len(seqs), "self-debias") as bar:
            for b in range(0, len(order), self.batch_size):
                idx = [i for i in order[b: b + self.batch_size] if len(seqs[i])]
                for i, lps in zip(idx, self._sentences([seqs[i] for i in idx], start_id) if idx else [], strict=True):
                    out[i] = lps
                bar.update(len(order[b: b + self.batch_size]))
        return out

    @cached_property
    def _context(self) -> Any:
        """The prefix rows run once (:class:`.packed.PrefixContext`), if a probe sentence scored through their
        cached keys and values equals the whole rows' scores (else None: whole rows, prefix included, per pass)."""
        import torch

        from .packed import PrefixContext

        probe = self.encode(["The doctor said that the nurse was tired today"], add_special_tokens=False)
        if not self.packable or len(probe[0]) < 4:
            return None
        try:
            ctx = PrefixContext(self.model, self._prefix_ids, self._prefix_att, self.device)
            probe = [probe[0], probe[0][:3] + probe[0][5:]]
            got = self._tree_sentences(probe, self.start_id, ctx)
        except Exception:  # noqa: BLE001 - any failure means: no cached prefix
            return None
        want = [v for lps in self._sentences(probe, self.start_id) for v in lps]
        err = max(abs(a - b) for a, b in zip(got, want, strict=True))
        return ctx if err <= 1e-4 * max(1.0, *map(abs, want)) and torch.isfinite(ctx.logits).all() else None

    def _tree_sentences(self, seqs: Sequence[Sequence[int]], start_id: int | None, ctx: Any) -> list[float]:
        """:meth:`_sentences`, flattened, from the prefix tree of the sequences packed into rows that continue the
        cached prefixes (each row once per prefix variant, in one pass). A read at a prefix position (the first
        token, or bias-bench's fixed position before the sentence) is the same for every sentence: its debiased
        distribution is computed once from the prefixes' own pass."""
        from .causal import PACK_WIDTH
        from .packed import build_tree, pack

        width, n_prefix = self.prefix_length, ctx.width
        swap_first = self.settings.mode != "bias-bench" and start_id is not None
        offsets = [0, *accumulate(len(q) for q in seqs)]
        out = [0.0] * sum(len(q) for q in seqs)
        reads: list[list[tuple[int, int, int]]] = [[] for _ in seqs]
        fixed: dict[tuple[int, bool], list[tuple[int, int]]] = {}
        for i, q in enumerate(seqs):
            for j, t in enumerate(q):
                a = width - 1 + j  # where the whole row reads token j
                if a < n_prefix:
                    fixed.setdefault((a, swap_first and j == 0), []).append((int(t), offsets[i] + j))
                else:
                    reads[i].append((a - n_prefix + 1, int(t), offsets[i] + j))
        for (a, swap), items in fixed.items():
            read = ctx.logits[:, a].clone()
            if swap:  # the plain scorer's first token (default mode)
                read[0] = self._start_logprobs(int(start_id)).to(read.device)
            lp = self._debias(read)
            for t, slot in items:
                out[slot] = float(lp[t])
        tree = build_tree(seqs, reads)
        n_var = len(self._prefix_ids)
        passes = self._packed_passes(tree, pack(tree, seqs, PACK_WIDTH), len(seqs), "self-debias", ctx, n_var)
        for slots, values in side_by_side(passes, lambda kw, rq: self._debiased_reads(kw, rq, n_var),
                                          self._workers()):
            for slot, v in zip(slots, values, strict=True):
                out[slot] = v
        return out

    def two_pass_logprobs(self, seqs: Sequence[Sequence[int]], start_id: int | None = None) -> list[list[float]]:
        return self._batches(seqs, self.start_id if start_id is None else start_id)

    def token_logprobs(self, seqs: Sequence[Sequence[int]], desc: str = "self-debias") -> list[list[float]]:
        """[log p_debiased(s[i] | s[:i]) for i in 1..len-1] per sequence (the context is the sequence's start)."""
        return [lps[1:] if len(s) > 1 else [] for s, lps in zip(seqs, self._batches([list(s) for s in seqs], None),
                                                                    strict=True)]


def self_debias_scorer(scorer: Any, settings: SelfDebiasSettings, progress: bool = False) -> Any:
    """The self-debiasing counterpart of a loaded masked or causal scorer (same model and tokenizer)."""
    if scorer.family == "masked":
        out = SelfDebiasMaskedScorer(scorer.model, scorer.tokenizer, settings, progress, scorer.batch_size)
    elif scorer.family == "causal":  # whole-row batches (no cached prefix) hold every position's logits: <= 16
        out = SelfDebiasCausalScorer(scorer.model, scorer.tokenizer, settings, progress, min(scorer.batch_size, 16))
    else:
        raise ModelError(f"self-debias is defined for masked and causal LMs; {type(scorer.model).__name__} is "
                         f"{scorer.family}.")
    out.model_ref = getattr(scorer, "model_ref", None)
    return out
