"""The Scorer interface and the batching machinery the three backends share (torch imported lazily)."""

from __future__ import annotations

import abc
import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


@dataclass(frozen=True)
class LogLik:
    """Log-likelihood of a continuation: ``sum`` of natural-log token probabilities, ``mean`` = sum / n_tokens."""

    sum: float
    mean: float
    n_tokens: int

    @classmethod
    def from_logprobs(cls, logprobs: Sequence[float]) -> LogLik:
        n = len(logprobs)
        s = float(sum(logprobs))
        return cls(sum=s, mean=s / n if n else 0.0, n_tokens=n)


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> Iterator[list[int]]:
    """Indices grouped into batches of similar length (longest first); batch_size 1 keeps the input order."""
    if batch_size <= 1:
        for i in range(len(lengths)):
            yield [i]
        return
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]


def gather_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[target] row by row, in float32, without materialising the full log-softmax."""
    import torch

    logits = logits.float()
    picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


class Scorer(abc.ABC):
    """Log-likelihoods under one model. Subclasses implement the family-specific passes.

    ``batch_size`` is the number of sequences per forward pass; 1 is the one-at-a-time reference path.
    """

    family: ClassVar[str] = ""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        batch_size: int = 32,
        progress: bool = False,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.progress = progress
        self.model_ref: str | None = None
        model.eval()

    # ------------------------------------------------------------------------------------------ helpers
    @property
    def device(self) -> Any:
        return next(self.model.parameters()).device

    @property
    def pad_id(self) -> int:
        tok = self.tokenizer
        for cand in (tok.pad_token_id, tok.eos_token_id, tok.unk_token_id):
            if cand is not None:
                return int(cand)
        return 0

    def with_batch_size(self, batch_size: int) -> Scorer:
        """A shallow copy sharing the model, with another batch size (1: the reference path)."""
        other = copy.copy(self)
        other.batch_size = batch_size
        return other

    def reference(self) -> Scorer:
        """The one-at-a-time reference scorer (batch size 1, no padding)."""
        return self.with_batch_size(1)

    def encode(self, texts: Sequence[str], add_special_tokens: bool) -> list[list[int]]:
        if not texts:
            return []
        out = self.tokenizer(list(texts), add_special_tokens=add_special_tokens)["input_ids"]
        return [list(map(int, ids)) for ids in out]

    def _progress(self, total: int, desc: str):
        from tqdm.auto import tqdm

        return tqdm(
            total=total, desc=desc, unit="seq", disable=not self.progress or total == 0, mininterval=0.5,
            dynamic_ncols=True, leave=False,
        )

    def _pad(self, seqs: Sequence[Sequence[int]], pad: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Right-pad to a (B, T) id tensor and its attention mask, on the model's device."""
        import torch

        pad = self.pad_id if pad is None else pad
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for r, s in enumerate(seqs):
            ids[r, : len(s)] = torch.tensor(list(s), dtype=torch.long)
            mask[r, : len(s)] = 1
        return ids.to(self.device), mask.to(self.device)

    # ------------------------------------------------------------------------------------------ interface
    @abc.abstractmethod
    def conditional_loglik(self, prefixes: Sequence[str], continuations: Sequence[str]) -> list[LogLik]:
        """log p(continuation | prefix) for each pair; only the continuation's tokens are scored."""

    def sentence_loglik(self, sentences: Sequence[str]) -> list[LogLik]:
        """log p(sentence) with an empty prefix (causal: conditioned on BOS/EOS; masked: full PLL)."""
        return self.conditional_loglik([""] * len(sentences), sentences)

    def masked_logprobs(
        self, seqs: Sequence[Sequence[int]], positions: Sequence[int], targets: Sequence[int] | None = None
    ) -> list[float]:
        """log p(target at ``position`` | the sequence with that one position masked) for each request.

        ``seqs`` hold the unmasked ids (special tokens included); ``targets`` default to ``seq[position]``.
        Masked LMs put the mask token there; seq2seq models a sentinel span. Causal LMs do not support it.
        """
        from ..errors import ModelError

        raise ModelError(f"{type(self).__name__} cannot score masked positions (a causal LM has no mask token)")


def _accepts(model: Any, name: str) -> bool:
    import inspect

    try:
        return name in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):  # pragma: no cover
        return False


class _HeadAtPositions:
    """Apply the model's output projection (hidden -> vocabulary, the costliest matmul for short inputs) only at
    the positions that are read: a forward pre-hook on ``get_output_embeddings()`` gathers those hidden states.

    If the hook does not see a (batch, time, hidden) input, it leaves it alone and :attr:`applied` stays False,
    so the caller gathers from full logits instead. Numerically this equals slicing the full logits up to
    float32 rounding."""

    def __init__(self, model: Any, index: Any, width: int) -> None:
        self.module = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        self.index = index  # (B, k) long tensor of positions
        self.width = width
        self.applied = False
        self._handle = None

    def _hook(self, module: Any, args: tuple) -> tuple | None:
        h = args[0] if args else None
        if h is None or h.dim() != 3 or h.shape[0] != self.index.shape[0] or h.shape[1] != self.width:
            return None
        self.applied = True
        idx = self.index.to(h.device).unsqueeze(-1).expand(-1, -1, h.shape[-1])
        return (h.gather(1, idx), *args[1:])

    def __enter__(self) -> _HeadAtPositions:
        if self.module is not None:
            self._handle = self.module.register_forward_pre_hook(self._hook)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._handle is not None:
            self._handle.remove()


class PositionScorerMixin:
    """Shared engine for "log p(target | logits at a position of a sequence)" requests.

    ``needs[u]`` lists ``(position, target, slot)`` for the unique input sequence ``u``; the result for each
    ``slot`` is one log-probability. Batched (batch size > 1): length-sorted, right-padded batches, and the
    output projection runs only at the positions read. Reference (batch size 1): one unpadded forward per
    sequence with full logits, as the original scripts do.
    """

    def _run_needs(
        self: Any,
        seqs: Sequence[Sequence[int]],
        needs: Sequence[Sequence[tuple[int, int, int]]],
        n_slots: int,
        token_type_ids: Sequence[Sequence[int]] | None = None,
        desc: str = "scoring",
        unit_counts: Sequence[int] | None = None,
    ) -> list[float]:
        import torch

        out = [0.0] * n_slots
        if not seqs:
            return out
        use_tti = token_type_ids is not None and _accepts(self.model, "token_type_ids")
        lengths = [len(s) for s in seqs]
        batched = self.batch_size > 1
        total = sum(unit_counts) if unit_counts is not None else len(seqs)
        with torch.inference_mode(), self._progress(total, desc) as bar:
            for batch in length_sorted_batches(lengths, self.batch_size):
                rows = [b for b in batch if needs[b]]
                if not rows:
                    bar.update(sum(unit_counts[b] for b in batch) if unit_counts is not None else len(batch))
                    continue
                ids, att = self._pad([seqs[i] for i in rows])
                kwargs: dict[str, Any] = {"input_ids": ids, "attention_mask": att}
                if use_tti:
                    kwargs["token_type_ids"] = self._pad([token_type_ids[i] for i in rows], pad=0)[0]
                # unique positions per row -> column in the gathered logits
                cols: list[dict[int, int]] = []
                for i in rows:
                    c: dict[int, int] = {}
                    for pos, _t, _s in needs[i]:
                        c.setdefault(pos, len(c))
                    cols.append(c)
                k = max(len(c) for c in cols)
                index = torch.zeros((len(rows), k), dtype=torch.long)
                for r, c in enumerate(cols):
                    for pos, j in c.items():
                        index[r, j] = pos
                head = _HeadAtPositions(self.model, index, ids.shape[1]) if batched else None
                if head is not None:
                    with head:
                        logits = self.model(**kwargs).logits
                else:
                    logits = self.model(**kwargs).logits
                applied = head is not None and head.applied and logits.shape[1] == k
                r_idx, c_idx, t_idx, slots = [], [], [], []
                for r, i in enumerate(rows):
                    for pos, t, slot in needs[i]:
                        r_idx.append(r)
                        c_idx.append(cols[r][pos] if applied else pos)
                        t_idx.append(t)
                        slots.append(slot)
                dev = logits.device
                picked = logits[torch.tensor(r_idx, device=dev), torch.tensor(c_idx, device=dev)]
                lp = gather_logprobs(picked, torch.tensor(t_idx, device=dev)).tolist()
                for slot, v in zip(slots, lp, strict=True):
                    out[slot] = float(v)
                bar.update(sum(unit_counts[b] for b in batch) if unit_counts is not None else len(batch))
        return out

    def _position_logprobs(
        self: Any,
        seqs: Sequence[Sequence[int]],
        positions: Sequence[int],
        targets: Sequence[int],
        token_type_ids: Sequence[Sequence[int]] | None = None,
        desc: str = "scoring",
    ) -> list[float]:
        """One request per sequence; identical inputs share one forward pass when batching."""
        n = len(seqs)
        use_tti = token_type_ids is not None
        if self.batch_size > 1:
            keys: dict[tuple, int] = {}
            uniq: list[int] = []
            needs: list[list[tuple[int, int, int]]] = []
            for i in range(n):
                key = (tuple(seqs[i]), tuple(token_type_ids[i]) if use_tti else None)
                u = keys.get(key)
                if u is None:
                    u = keys[key] = len(uniq)
                    uniq.append(i)
                    needs.append([])
                needs[u].append((positions[i], targets[i], i))
        else:
            uniq = list(range(n))
            needs = [[(positions[i], targets[i], i)] for i in range(n)]
        return self._run_needs(
            [seqs[i] for i in uniq],
            needs,
            n,
            [token_type_ids[i] for i in uniq] if use_tti else None,
            desc=desc,
            unit_counts=[len(x) for x in needs],
        )
