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


def length_sorted_batches(
    lengths: Sequence[int], batch_size: int, max_pad: float | None = None
) -> Iterator[list[int]]:
    """Indices grouped into batches of similar length (longest first); batch_size 1 keeps the input order.

    With ``max_pad`` a batch also ends before a sequence shorter than ``(1 - max_pad)`` times its longest one,
    so no row is padded by more than that fraction (fewer padded tokens, at the price of a few more passes)."""
    if batch_size <= 1:
        for i in range(len(lengths)):
            yield [i]
        return
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batch: list[int] = []
    for i in order:
        if batch and (
            len(batch) >= batch_size or (max_pad is not None and lengths[i] < (1.0 - max_pad) * lengths[batch[0]])
        ):
            yield batch
            batch = []
        batch.append(i)
    if batch:
        yield batch


def gather_logprobs(
    logits: torch.Tensor, targets: torch.Tensor, rows: torch.Tensor | None = None, chunk: int = 32
) -> torch.Tensor:
    """log softmax(logits)[target] row by row, in float32.

    ``logits`` is (..., V) and ``targets`` has its leading shape; or, with ``rows``, ``logits`` is (N, V) and
    request j reads ``log_softmax(logits[rows[j]])[targets[j]]`` (a row may be read several times). The log-softmax runs over ``chunk`` rows at a time so that each block stays in cache (one pass over
    a large (N, V) tensor is several times slower per row) and no (N, V) float32 copy is made."""
    import torch

    if rows is None:
        lead = targets.shape
        flat = logits.reshape(-1, logits.shape[-1])
        t = targets.reshape(-1)
        r = torch.arange(flat.shape[0], device=flat.device)
    else:
        lead, flat, t, r = targets.shape, logits, targets, rows
    out = torch.empty(t.shape[0], dtype=torch.float32, device=flat.device)
    if t.shape[0] == 0:
        return out.reshape(lead)
    if rows is not None and bool((r[1:] < r[:-1]).any()):  # read in row order, answer in request order
        perm = torch.argsort(r, stable=True)
        out[perm] = gather_logprobs(flat, t[perm], rows=r[perm], chunk=chunk)
        return out.reshape(lead)
    if flat.device.type != "cpu":  # accelerators: bandwidth is plentiful, kernel launches are not
        chunk = max(chunk, 256)
    bounds = torch.searchsorted(r.cpu(), torch.arange(0, flat.shape[0] + chunk, chunk)).tolist()
    for c, start in enumerate(range(0, flat.shape[0], chunk)):
        a, b = bounds[c], bounds[c + 1]
        if a == b:
            continue
        block = torch.log_softmax(flat[start : start + chunk].float(), dim=-1)
        out[a:b] = block[r[a:b] - start, t[a:b]]
    return out.reshape(lead)


def linear_logprobs(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    targets: torch.Tensor,
    rows: torch.Tensor,
    chunk: int = 1024,
) -> torch.Tensor:
    """``log_softmax(hidden @ weight.T + bias)[rows[j], targets[j]]`` in float32, without the (N, V) logits.

    The vocabulary goes in blocks of ``chunk`` rows of ``weight`` with a running maximum and sum (an online
    log-sum-exp), so each block of logits is still in cache when it is reduced: on a CPU about a quarter faster
    than one large projection followed by a log-softmax pass (the projection's output, N x V floats, no longer
    goes out to memory and back). Each block is computed in the weight's dtype and read in float32, as the
    logits of a full pass are; a block's sum is taken in float32 (at most ``chunk`` terms, each <= 1) and the
    blocks' sums are added in float64. The targets are sorted once, so each block finds its own by bisection."""
    import torch

    n = hidden.shape[0]
    top = torch.full((n,), float("-inf"), dtype=torch.float32, device=hidden.device)
    total = torch.zeros(n, dtype=torch.float64, device=hidden.device)
    picked = torch.empty(targets.shape[0], dtype=torch.float32, device=hidden.device)
    order = torch.argsort(targets)
    edges = torch.arange(0, weight.shape[0] + chunk, chunk, device=targets.device)
    bounds = torch.searchsorted(targets[order], edges).tolist()
    for k, c in enumerate(range(0, weight.shape[0], chunk)):
        block = torch.nn.functional.linear(
            hidden, weight[c : c + chunk], None if bias is None else bias[c : c + chunk]
        ).float()
        if bounds[k + 1] > bounds[k]:  # the target logits, from the same product as a full pass's
            here = order[bounds[k] : bounds[k + 1]]
            picked[here] = block[rows[here], targets[here] - c]
        new_top = torch.maximum(top, block.amax(dim=1))
        block.sub_(new_top[:, None]).exp_()
        total = total * torch.exp(top - new_top).double() + block.sum(dim=1).double()
        top = new_top
    return picked - (top.double() + torch.log(total))[rows].float()


def side_by_side(passes: Iterator[tuple[Any, Any, Any]], fn: Any, workers: int = 1) -> Iterator[tuple[Any, Any]]:
    """``(slots, fn(inputs, requests))`` for each ``(inputs, requests, slots)`` of ``passes``, in order.

    With ``workers`` > 1 that many passes run at a time, each in a thread of its own with one intra-op thread
    (torch's thread count is restored afterwards): on a CPU, whole passes side by side keep every core busy
    where one pass split across cores waits at each operation's barrier (and stalls whenever another process
    takes a core). ``fn`` must be safe to call from several threads (no hooks on shared modules)."""
    from collections import deque

    if workers <= 1:
        for inputs, reqs, slots in passes:
            yield slots, fn(inputs, reqs)
        return
    from concurrent.futures import ThreadPoolExecutor

    import torch

    def call(inputs: Any, reqs: Any) -> Any:
        torch.set_num_threads(1)  # this thread's OpenMP team and MKL
        with torch.inference_mode():
            return fn(inputs, reqs)

    before = torch.get_num_threads()
    try:
        with ThreadPoolExecutor(workers) as pool:
            pending: deque = deque()
            for inputs, reqs, slots in passes:
                pending.append((slots, pool.submit(call, inputs, reqs)))
                if len(pending) > workers:
                    done_slots, fut = pending.popleft()
                    yield done_slots, fut.result()
            while pending:
                done_slots, fut = pending.popleft()
                yield done_slots, fut.result()
    finally:
        torch.set_num_threads(before)


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
        """A shallow copy sharing the model (and its caches), with another batch size (1: the reference path) and
        a ledger of its own."""
        other = copy.copy(self)
        other.batch_size = batch_size
        other.__dict__.pop("_ledger", None)
        return other

    @property
    def ledger(self) -> Any:
        """The work this scorer's passes needed and did since the ledger was made (:mod:`.flops`; a causal scorer
        keeps it); ``del scorer.ledger`` starts a new one."""
        from .flops import Ledger

        return self.__dict__.setdefault("_ledger", Ledger())

    @ledger.deleter
    def ledger(self) -> None:
        self.__dict__.pop("_ledger", None)

    def reference(self) -> Scorer:
        """The one-at-a-time reference scorer (batch size 1, no padding)."""
        return self.with_batch_size(1)

    def encode(self, texts: Sequence[str], add_special_tokens: bool) -> list[list[int]]:
        if not texts:
            return []
        out = self.tokenizer(list(texts), add_special_tokens=add_special_tokens)["input_ids"]
        return [list(map(int, ids)) for ids in out]

    def _progress(self, total: int, desc: str):
        """A bar on a terminal with ``progress``, else a line every few seconds (:mod:`context_cda.runtime.progress`)."""
        from ..runtime.progress import Progress

        return Progress(total, desc, "seq", bar=self.progress)

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


def request_tensors(reqs: Sequence[tuple[int, int, int]], device: Any) -> tuple[Any, Any, Any, Any]:
    """(rows, columns) of the distinct positions the (row, position, target) requests read, the targets, and each
    request's index into those positions."""
    import torch

    pair: dict[tuple[int, int], int] = {}
    j_of = [pair.setdefault((r, pos), len(pair)) for r, pos, _t in reqs]
    rows = torch.tensor([r for r, _p in pair], dtype=torch.long, device=device)
    cols = torch.tensor([p for _r, p in pair], dtype=torch.long, device=device)
    targets = torch.tensor([t for _r, _p, t in reqs], dtype=torch.long, device=device)
    return rows, cols, targets, torch.tensor(j_of, dtype=torch.long, device=device)


def _accepts(model: Any, name: str) -> bool:
    import inspect

    try:
        return name in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):  # pragma: no cover
        return False


class _HeadAtPositions:
    """Apply the model's output projection (hidden -> vocabulary, the costliest matmul for short inputs) only at
    the positions that are read: a forward pre-hook on ``get_output_embeddings()`` gathers those hidden states.

    ``index`` (B, k) keeps k positions per row: the logits come out (B, k, V). Or ``rows`` and ``cols`` (1-D,
    equal length N) name (row, position) pairs: the logits come out (1, N, V), with no padding positions.
    If ``unless`` (a :class:`~context_cda.scoring.last_layer.LastLayerAtPositions`) has already kept only those
    positions, the input is (1, N, hidden) as it comes. If the hook sees neither, it leaves the input alone and
    :attr:`applied` stays False. Numerically this equals slicing the full logits up to float32 rounding.

    ``capture`` keeps the selected hidden states, (N, hidden), in :attr:`captured`; ``skip`` then hands the
    projection an empty selection, so the caller computes from :attr:`captured` itself (:func:`linear_logprobs`)."""

    def __init__(
        self,
        model: Any,
        index: Any = None,
        width: int = 0,
        *,
        rows: Any = None,
        cols: Any = None,
        batch: int = 0,
        unless: Any = None,
        capture: bool = False,
        skip: bool = False,
    ) -> None:
        self.module = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        self.index = index  # (B, k) long tensor of positions
        self.rows, self.cols = rows, cols
        self.batch = int(index.shape[0]) if index is not None else batch
        self.width = width
        self.unless = unless
        self.capture, self.skip = capture, skip
        self.captured: Any = None
        self.applied = False
        self._handle = None

    def _hook(self, module: Any, args: tuple) -> tuple | None:
        h = args[0] if args else None
        if h is None or h.dim() != 3:
            return None
        if getattr(self.unless, "applied", False):  # an earlier layer already kept only the positions read
            if h.shape[0] != 1:
                return None
            sel = h
        elif h.shape[0] == self.batch and h.shape[1] == self.width:
            if self.index is not None:
                sel = h.gather(1, self.index.to(h.device).unsqueeze(-1).expand(-1, -1, h.shape[-1]))
            else:
                sel = h[self.rows.to(h.device), self.cols.to(h.device)].unsqueeze(0)
        else:
            return None
        self.applied = True
        if self.capture:
            self.captured = sel.reshape(-1, sel.shape[-1])
        if self.skip:
            return (sel[:, :0], *args[1:])
        return None if sel is h else (sel, *args[1:])

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
        total = sum(unit_counts) if unit_counts is not None else len(seqs)
        with torch.inference_mode(), self._progress(total, desc) as bar:
            for batch in length_sorted_batches(lengths, self.batch_size, max_pad=0.1):
                rows = [b for b in batch if needs[b]]
                if not rows:
                    bar.update(sum(unit_counts[b] for b in batch) if unit_counts is not None else len(batch))
                    continue
                ids, att = self._pad([seqs[i] for i in rows])
                kwargs: dict[str, Any] = {"input_ids": ids, "attention_mask": att}
                if use_tti:
                    kwargs["token_type_ids"] = self._pad([token_type_ids[i] for i in rows], pad=0)[0]
                reqs, slots = [], []
                for r, i in enumerate(rows):
                    for pos, t, slot in needs[i]:
                        reqs.append((r, pos, t))
                        slots.append(slot)
                for slot, v in zip(slots, self._forward_logprobs(kwargs, reqs), strict=True):
                    out[slot] = v
                bar.update(sum(unit_counts[b] for b in batch) if unit_counts is not None else len(batch))
        return out

    def _read_only_at(self: Any, rows: Any, cols: Any, shape: Any) -> Any:
        """A context for the batched forward pass that may skip work at the positions not read (none here)."""
        from contextlib import nullcontext

        return nullcontext()

    def _forward_logprobs(self: Any, kwargs: dict[str, Any], reqs: Sequence[tuple[int, int, int]]) -> list[float]:
        """One forward pass; ``reqs`` are (row, position, target) and the result their log-probabilities.

        Batched, the output projection runs once per distinct (row, position) and nowhere else; the reference
        path (batch size 1) computes the full logits, as the original scripts do, and reads them."""
        ids = kwargs["input_ids"]
        rows_t, cols_t, targets, j_t = request_tensors(reqs, ids.device)
        applied, captured = False, None
        if self.batch_size > 1:
            cut = self._read_only_at(rows_t, cols_t, ids.shape)
            fused = self._fused_head()
            head = _HeadAtPositions(
                self.model, width=ids.shape[1], rows=rows_t, cols=cols_t, batch=ids.shape[0], unless=cut,
                capture=fused is not False, skip=fused is True,
            )
            with head, cut:
                logits = self.model(**kwargs).logits
            captured = head.captured
            if fused is True and captured is not None:
                lp = linear_logprobs(captured, head.module.weight, head.module.bias, targets, j_t)
                return [float(v) for v in lp.tolist()]
            kept = head.applied or getattr(cut, "applied", False)  # the cut layer alone also leaves (1, N, .)
            applied = kept and tuple(logits.shape[:2]) == (1, len(rows_t))
        else:
            logits = self.model(**kwargs).logits
        flat = logits[0] if applied else logits[rows_t.to(logits.device), cols_t.to(logits.device)]
        dev = flat.device
        lp = gather_logprobs(flat, targets.to(dev), rows=j_t.to(dev))
        if captured is not None and applied:  # a first batched pass: does the fused head give these values?
            fast = linear_logprobs(captured, head.module.weight, head.module.bias, targets, j_t).to(dev)
            self.__dict__["_fused_ok"] = bool((fast - lp).abs().max() <= 1e-5 * max(1.0, float(lp.abs().max())))
        return [float(v) for v in lp.tolist()]

    def _fused_head(self: Any) -> bool | None:
        """Whether the batched path computes the log-probabilities from the hidden states itself
        (:func:`linear_logprobs`) rather than through the model's output layer: only on a CPU, only for a plain
        ``nn.Linear`` output layer, and only once the first batched pass has shown both ways agree (a model that
        scales or caps its logits after that layer does not). None: not checked yet."""
        import torch

        if self.device.type != "cpu":  # accelerators: no cache to gain, and one more kernel per block
            return False
        module = self.model.get_output_embeddings() if hasattr(self.model, "get_output_embeddings") else None
        if type(module) is not torch.nn.Linear:
            return False
        return self.__dict__.get("_fused_ok")

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
