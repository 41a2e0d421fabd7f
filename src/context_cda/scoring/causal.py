"""Causal LMs (GPT-2, Llama, SmolLM2, Gemma, any ``*ForCausalLM``): left-to-right token log-probabilities.

BOS/EOS come from the tokenizer: the default *start token* (what an empty context is conditioned on) is the
tokenizer's BOS token, else its EOS token (GPT-2's ``<|endoftext|>`` is both); a tokenizer that adds BOS by itself
keeps it. ``evaluate.start_token`` chooses another (:func:`resolve_start_token`): ``bos``, ``eos``, a literal
token, or ``auto`` - for bias-bench's scoring (StereoSet; CrowS ``bias-bench`` mode) bias-bench's own literal
``<|endoftext|>`` when the tokenizer has it as one token (GPT-2, SmolLM2, ...), else BOS, else EOS; for
``lm-eval`` mode what lm-evaluation-harness uses (the tokenizer's own leading tokens, else BOS, else EOS).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ..errors import ConfigError, ModelError
from .base import LogLik, PositionScorerMixin, Scorer, _accepts, side_by_side

#: packed rows hold about this many tokens (more makes the masked attention grow quadratically)
PACK_WIDTH = 128
#: tokens per packed forward pass = batch_size * PACK_TOKENS_PER_SEQ
PACK_TOKENS_PER_SEQ = 8
#: the start token bias-bench hard-codes for every causal LM (GPT-2's BOS/EOS)
BIAS_BENCH_START = "<|endoftext|>"
#: whose rule ``auto`` follows: bias-bench's two-pass scoring, or lm-evaluation-harness's empty context
START_STYLES = ("bias-bench", "lm-eval")


@dataclass(frozen=True)
class StartToken:
    """The token an empty context is conditioned on: ``id`` (None: the scorer's default context, the tokenizer's
    own leading tokens or :attr:`CausalScorer.start_id`), its text as recorded in aggregates, and the rule."""

    id: int | None
    text: str
    rule: str


def _one_token(tokenizer: Any, text: str) -> int | None:
    """The id of ``text`` when the tokenizer encodes it as exactly one token, else None."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    unknown = getattr(tokenizer, "unk_token_id", None)
    if len(ids) != 1 or (ids[0] == unknown and text != getattr(tokenizer, "unk_token", None)):
        return None
    return int(ids[0])


def resolve_start_token(tokenizer: Any, spec: str = "auto", style: str = "bias-bench",
                        default_ids: Sequence[int] | None = None) -> StartToken:
    """The start token ``evaluate.start_token`` = ``spec`` names for a ``style`` of scoring (see the module).

    ``default_ids``: what the scorer conditions an empty context on by default (lm-eval's ``auto``)."""
    if style not in START_STYLES:
        raise ValueError(f"start token style {style!r}; use {' or '.join(START_STYLES)}")

    def special(kind: str) -> StartToken | None:
        tid = getattr(tokenizer, f"{kind}_token_id", None)
        return None if tid is None else StartToken(int(tid), str(getattr(tokenizer, f"{kind}_token")), kind)

    if spec in ("bos", "eos"):
        found = special(spec)
        if found is None:
            raise ConfigError(f"evaluate.start_token={spec}: the tokenizer has no {spec.upper()} token; use auto, "
                              f"{'eos' if spec == 'bos' else 'bos'} or a literal token of its vocabulary.")
        return found
    if spec != "auto":
        tid = _one_token(tokenizer, spec)
        if tid is None:
            n = len(tokenizer(spec, add_special_tokens=False)["input_ids"])
            raise ConfigError(f"evaluate.start_token={spec!r}: the tokenizer encodes it as {n} tokens, not one; "
                              "name one token of its vocabulary, or bos, eos, auto.")
        return StartToken(tid, spec, "literal")
    if style == "lm-eval" and default_ids:
        return StartToken(None, tokenizer.decode(list(default_ids)), "auto: the tokenizer's leading tokens")
    if style == "bias-bench":
        tid = _one_token(tokenizer, BIAS_BENCH_START)
        if tid is not None:
            return StartToken(tid, BIAS_BENCH_START, "auto: bias-bench's literal start token")
    for kind in ("bos", "eos"):
        found = special(kind)
        if found is not None:
            return StartToken(found.id, found.text, f"auto: {kind}")
    raise ModelError("the tokenizer has neither a BOS nor an EOS token; set evaluate.start_token to a literal token.")


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

        Batched, every distinct prefix is computed once: the sequences form a prefix tree, and rows of that
        tree are packed into the forward pass with a tree-shaped attention mask and explicit position ids
        (:meth:`_packed_token_logprobs`), so a prefix shared by several sequences (StereoSet's three
        candidates, CrowS pairs, M samples after one prompt) runs through the model and the vocabulary
        projection once. Models that do not honour such a mask (checked once on a probe, :attr:`packable`)
        get right-padded batches, still projecting each shared prefix once. The values equal the reference
        path's (one unpadded pass per sequence) to float32 rounding."""
        from .packed import build_tree

        offsets, n_slots = [], 0
        for s in seqs:
            offsets.append(n_slots)
            n_slots += max(len(s) - 1, 0)
        reads = [[(p + 1, s[p + 1], offsets[i] + p) for p in range(len(s) - 1)] for i, s in enumerate(seqs)]
        tree = build_tree(seqs, reads)
        self.ledger.add_tree(tree)  # the plan: each distinct prefix once
        if self.batch_size > 1 and self._can_pack(max((len(s) for s in seqs), default=0)):
            flat = self._packed_token_logprobs(seqs, tree, n_slots, desc=desc)
            return [flat[offsets[i] : offsets[i] + max(len(s) - 1, 0)] for i, s in enumerate(seqs)]
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

    # ------------------------------------------------------------------------------------ packed prefix tree
    @cached_property
    def packable(self) -> bool:
        """Whether the model honours a 4-D additive attention mask with explicit ``position_ids`` (so that
        packed prefix-tree rows give the same log-probabilities as separate passes): checked once on a probe,
        two short sequences sharing a prefix, packed into one row vs run one by one."""
        import torch

        if not (_accepts(self.model, "position_ids") and _accepts(self.model, "attention_mask")):
            return False
        if getattr(self.model.config, "is_encoder_decoder", False):
            return False
        probe = self.encode(["The doctor said that the nurse was tired today"], add_special_tokens=False)[0]
        if len(probe) < 6:
            return False
        a = [self.start_id, *probe[:5]]
        b = [self.start_id, *probe[:2], *probe[5:8]][: len(a)]
        try:
            with torch.inference_mode():
                ref = [self.model(input_ids=torch.tensor([x], device=self.device)).logits[0].float() for x in (a, b)]
                # row: a, then b's nodes after the shared prefix (3 tokens: start + 2)
                shared = 3
                tokens = a + b[shared:]
                parents = [*range(-1, len(a) - 1), shared - 1, *range(len(a), len(tokens) - 1)]
                got = self.model(**self._packed_inputs([tokens], [parents])).logits[0].float()
                # what ignoring the tree mask would change: b's tokens would also see a's
                unpacked = self.model(input_ids=torch.tensor([tokens], device=self.device)).logits[0].float()
        except Exception:  # noqa: BLE001 - any failure means: do not pack
            return False
        want = torch.cat([ref[0], ref[1][shared:]])
        if got.shape != want.shape:
            return False
        err = float((got - want).abs().max())
        sensitivity = float((unpacked[len(a) :] - want[len(a) :]).abs().max())
        scale = max(1.0, float(want.abs().max()))
        return err <= 1e-4 * scale and err <= 0.01 * sensitivity + 1e-6 * scale

    def _can_pack(self, longest: int) -> bool:
        """Pack unless the probe failed or a sliding attention window is shorter than the longest sequence (a
        custom mask replaces the window, which only matters beyond it)."""
        window = getattr(self.model.config, "sliding_window", None)
        if isinstance(window, int) and 0 < window < longest:
            return False
        return self.packable

    def _packed_inputs(self, rows: Sequence[Sequence[int]], parents: Sequence[Sequence[int]],
                       context: Any = None, variants: Sequence[int] | None = None) -> dict[str, Any]:
        """Model inputs for packed rows (:func:`.packed.tree_inputs`), in the model's float dtype."""
        from .packed import tree_inputs

        dtype = next(self.model.parameters()).dtype
        return tree_inputs(rows, parents, self.pad_id, dtype, self.device, context, variants)

    def _packed_token_logprobs(self, seqs: Sequence[Sequence[int]], tree: Any, n_slots: int, desc: str
                               ) -> list[float]:
        """The prefix tree of ``seqs`` (only the nodes whose next-token distribution is read) packed into rows
        of about :data:`PACK_WIDTH` tokens (:mod:`.packed`); each node's logits are projected in one row only."""
        from .packed import pack

        packed = pack(tree, seqs, PACK_WIDTH)
        out = [0.0] * n_slots
        passes = self._packed_passes(tree, packed, len(seqs), desc)
        for slots, values in side_by_side(passes, self._forward_logprobs, self._workers()):
            for slot, v in zip(slots, values, strict=True):
                out[slot] = v
        return out

    # ------------------------------------------------------------------------ passes from the base stack
    @cached_property
    def decomposable(self) -> bool:
        """Whether the logits are the output layer applied to the base stack's last hidden states, nothing in
        between (no scaling or capping): checked once on a probe. Then a batched pass runs the base stack and
        projects only the positions read itself (:meth:`_decomposed_logprobs`), with no hook on a shared module,
        so that passes can run side by side (:meth:`_workers`)."""
        import torch

        from .interventions import base_of

        head = self.model.get_output_embeddings() if hasattr(self.model, "get_output_embeddings") else None
        base = base_of(self.model)
        probe = self.encode(["The doctor said that the nurse was tired today"], add_special_tokens=False)[0][:8]
        if head is None or base is self.model or not probe:
            return False
        try:
            with torch.inference_mode():
                ids = torch.tensor([[self.start_id, *probe]], device=self.device)
                want = self.model(input_ids=ids).logits[0].float()
                got = head(base(input_ids=ids).last_hidden_state)[0].float()
        except Exception:  # noqa: BLE001 - any failure means: through the model's own forward
            return False
        return got.shape == want.shape and float((got - want).abs().max()) <= 1e-5 * max(1.0, float(want.abs().max()))

    def _workers(self) -> int:
        """Passes run side by side (:func:`.base.side_by_side`): on a CPU, one per torch thread (at most 8), when
        batched and :attr:`decomposable`; else 1."""
        import torch

        if self.batch_size <= 1 or self.device.type != "cpu" or torch.get_num_threads() < 2:
            return 1
        return min(torch.get_num_threads(), 8) if self.decomposable else 1

    def _hidden_at(self, kwargs: dict[str, Any], rows: Any, cols: Any) -> Any:
        """The base stack's last hidden states at (rows, cols) of one pass, (N, hidden). A pass that continues no
        cache keeps none (a fresh cache would copy every layer's keys and values)."""
        from .interventions import base_of

        base = base_of(self.model)
        if "use_cache" not in kwargs and _accepts(base, "use_cache"):
            kwargs = {**kwargs, "use_cache": False}
        return base(**kwargs).last_hidden_state[rows, cols]

    def _forward_logprobs(self, kwargs: dict[str, Any], reqs: Sequence[tuple[int, int, int]]) -> list[float]:
        rows, width = kwargs["input_ids"].shape
        self.ledger.add_pass(rows, width, len({(r, c) for r, c, _t in reqs}) if self.batch_size > 1 else rows * width)
        if self.batch_size > 1 and self.decomposable:
            return self._decomposed_logprobs(kwargs, reqs)
        return super()._forward_logprobs(kwargs, reqs)

    def _decomposed_logprobs(self, kwargs: dict[str, Any], reqs: Sequence[tuple[int, int, int]]) -> list[float]:
        """One pass through the base stack; the output layer at the distinct positions read only (on a CPU with a
        plain linear layer, straight from the hidden states in vocabulary blocks: :func:`.base.linear_logprobs`)."""
        import torch

        from .base import gather_logprobs, linear_logprobs, request_tensors

        rows, cols, targets, j_of = request_tensors(reqs, kwargs["input_ids"].device)
        hidden = self._hidden_at(kwargs, rows, cols)
        head = self.model.get_output_embeddings()
        if hidden.device.type == "cpu" and type(head) is torch.nn.Linear:
            lp = linear_logprobs(hidden, head.weight, head.bias, targets, j_of)
        else:
            lp = gather_logprobs(head(hidden), targets, rows=j_of)
        return [float(v) for v in lp.tolist()]

    def _packed_passes(self, tree: Any, packed: Any, n_seqs: int, desc: str, context: Any = None,
                       n_variants: int = 1, tokens: int | None = None):
        """The forward passes over packed rows: (model inputs, requests (batch row, column, target),
        their slots) per pass, at most ``tokens`` (default ``batch_size`` x :data:`PACK_TOKENS_PER_SEQ`) padded
        positions each (rows come longest first: a pass is as wide as its first row). With a ``context``, each
        row goes in ``n_variants`` times (batch row = row x n_variants + variant), and the requests name variant
        0's batch row."""
        import torch

        from .packed import row_tokens

        budget = (tokens or self.batch_size * PACK_TOKENS_PER_SEQ) // n_variants
        with torch.inference_mode(), self._progress(n_seqs, desc) as bar:
            start = 0
            while start < len(packed.rows):
                per_pass = max(1, budget // max(1, len(packed.rows[start])))
                batch = range(start, min(start + per_pass, len(packed.rows)))
                start = batch.stop
                toks_b, pars_b, reqs, slots = [], [], [], []
                for r, k in enumerate(batch):
                    toks, pars = row_tokens(tree, packed, k)
                    toks_b.extend([toks] * n_variants)
                    pars_b.extend([pars] * n_variants)
                    for c, n in enumerate(packed.rows[k]):
                        if packed.owner[n] == (k, c):
                            for t, slot in tree.reads[n]:
                                reqs.append((r * n_variants, c, t))
                                slots.append(slot)
                if reqs:
                    variants = list(range(n_variants)) * len(batch) if context is not None else None
                    yield self._packed_inputs(toks_b, pars_b, context, variants), reqs, slots
                bar.update(sum(packed.done[k] for k in batch))
            bar.update(n_seqs - bar.n)

    def start_token(self, spec: str = "auto", style: str = "bias-bench") -> StartToken:
        """The start token ``evaluate.start_token`` = ``spec`` gives for ``style`` (:func:`resolve_start_token`)."""
        return resolve_start_token(self.tokenizer, spec, style, self.lead_ids or [self.start_id])

    def _start_logprobs(self, start_id: int):
        """log p(token | start token) over the vocabulary, from one pass over the start token alone (cached)."""
        import torch

        cache = self.__dict__.setdefault("_start_cache", {})
        if start_id not in cache:
            with torch.inference_mode():
                ids = torch.tensor([[int(start_id)]], device=self.device)
                logits = self.model(input_ids=ids).logits[0, -1].float()
                cache[start_id] = torch.log_softmax(logits, dim=-1).cpu()
            self.ledger.add_both(1, 1, 1)
        return cache[start_id]

    def first_token_logprobs(self, token_ids: Sequence[int], start_id: int | None = None) -> list[float]:
        lp = self._start_logprobs(self.start_id if start_id is None else start_id)
        return [float(lp[t]) for t in token_ids]

    def two_pass_logprobs(self, seqs: Sequence[Sequence[int]], start_id: int | None = None) -> list[list[float]]:
        """bias-bench's sentence scoring: the first token from a pass over the start token alone (``start_id``,
        default :attr:`start_id`), the rest from a separate pass over the sentence with no prefix (so token 1
        sees only token 0)."""
        firsts = self.first_token_logprobs([s[0] for s in seqs], start_id)
        rest = self.token_logprobs(seqs)
        return [[f, *r] for f, r in zip(firsts, rest, strict=True)]

    def sentence_loglik(self, sentences: Sequence[str], start_id: int | None = None) -> list[LogLik]:
        """log p(sentence | empty context): the context is ``[start_id]`` when given, else the default."""
        return self.conditional_loglik([""] * len(sentences), sentences, start_id=start_id)

    def conditional_loglik(self, prefixes: Sequence[str], continuations: Sequence[str],
                           start_id: int | None = None) -> list[LogLik]:
        """``start_id``: what an *empty* prefix is conditioned on instead of the tokenizer's leading tokens (or
        :attr:`start_id` when it adds none)."""
        if len(prefixes) != len(continuations):
            raise ValueError("prefixes and continuations must have the same length")
        pre_ids = self.encode(prefixes, add_special_tokens=False)
        cont_ids = self.encode(continuations, add_special_tokens=False)
        seqs, n_ctx = [], []
        for p, c in zip(pre_ids, cont_ids, strict=True):
            ctx = [int(start_id)] if start_id is not None and not p else self.lead_ids + p
            if not ctx:
                ctx = [self.start_id]
            seqs.append(ctx + c)
            n_ctx.append(len(ctx))
        lps = self.token_logprobs(seqs)
        return [LogLik.from_logprobs(lp[k - 1 :]) for lp, k in zip(lps, n_ctx, strict=True)]

