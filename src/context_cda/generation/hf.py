"""``hf`` backend: a transformers causal LM decoded in batches by our own loop, CPU or GPU.

Prompts are formatted with the tokenizer's chat template (a plain "System/User/Assistant" layout when the
tokenizer has none), tokenized once, sorted (so that prompts sharing a prefix land in the same batch) and decoded
``batch_size`` prompts at a time (``n`` rows per prompt). Each batch:

* **shares its common prefix**: the tokens every prompt of the batch starts with (the system prompt and few-shot
  examples of the augment prompt, the whole prompt for ``n > 1`` samples) run through the model once, and that
  KV cache is copied to every row; only each prompt's own suffix is prefilled per row (padding sits between the
  prefix and the suffix, masked, with position ids counted over real tokens only);
* **keeps a preallocated (static) KV cache** when transformers offers one, so a decoding step writes one slot
  instead of re-concatenating the whole cache;
* **compacts the batch**: a row that produced an EOS id, completed a stop string or reached ``max_tokens``
  is finished; once finished rows exceed an eighth of the running ones, the batch is cut down to the running
  rows (each cut copies the KV cache, so cuts wait for a few finished rows rather than one).

Stop strings that are single special tokens of the vocabulary (``<|eot_id|>``, ``<|im_end|>``) become extra EOS
ids; other stop strings end a row once its last few decoded tokens contain one, and are cut from the text.
Sampling applies ``temperature`` and ``top_p`` (nothing from the model's ``generation_config`` besides its EOS
ids) and draws each token by inverse-CDF from a per-row random stream seeded from ``(seed, prompt text, sample
index)``: a prompt's samples do not depend on which other prompts share its batch, on ``batch_size`` or on its
position in the call (up to floating-point rounding of batched matmuls, which moves a draw only when the uniform
number falls within rounding distance of a CDF boundary). Two identical prompts in one call get identical
samples, as with vLLM's per-request seeds. Greedy decoding is the argmax. ``seed=None`` samples from torch's
global generator.
"""

from __future__ import annotations

import hashlib
import inspect
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ModelError, out_of_memory
from ..runtime.progress import iterate
from .base import (
    EMPTY_PROMPT,
    PROMPT_TOO_LONG,
    Conversation,
    GenerationResult,
    SamplingParams,
    permanent_error,
    truncate_at_stop,
)


def format_chat(tokenizer: Any, messages: Conversation) -> str:
    """The prompt text for ``messages``: the chat template with a generation prompt, or a plain fallback."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    lines = [f"{m['role'].capitalize()}: {m['content']}" for m in messages]
    return "\n\n".join(lines) + "\n\nAssistant:"


def row_seed(seed: int, text: str, j: int) -> int:
    """The random stream of sample ``j`` of the prompt ``text`` under ``seed`` (a 63-bit integer)."""
    digest = hashlib.blake2b(f"{seed}\x1f{j}\x1f{text}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def common_prefix_length(seqs: Sequence[Sequence[int]]) -> int:
    """How many leading tokens all ``seqs`` share, at most the shortest length minus one (every row keeps at
    least one token of its own to prefill, whose logits start the decoding)."""
    first = seqs[0]
    p = min(len(s) for s in seqs) - 1
    for s in seqs[1:]:
        k = 0
        while k < p and s[k] == first[k]:
            k += 1
        p = k
    return max(p, 0)


NUCLEUS_CANDIDATES = 256


def sample_next(logits: Any, params: SamplingParams, uniforms: Any, torch: Any) -> Any:
    """The next token of each row: argmax when greedy, else an inverse-CDF draw with ``uniforms`` (one number in
    [0, 1) per row, or None for torch's global generator) from the temperature-scaled, top-p-truncated
    distribution (the smallest set of most probable tokens whose mass reaches ``top_p``)."""
    if params.greedy:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits.float() / params.temperature, dim=-1)
    u = torch.rand(probs.shape[0], device=probs.device) if uniforms is None else uniforms
    index = None
    if params.top_p < 1.0:  # the nucleus lies in the top 256 unless their mass falls short: then sort it all
        probs, index = probs.topk(min(probs.shape[1], NUCLEUS_CANDIDATES), dim=-1)
        if bool((probs.sum(dim=-1) < params.top_p).any()):
            probs, index = torch.softmax(logits.float() / params.temperature, dim=-1).sort(dim=-1, descending=True)
        mass_before = probs.cumsum(dim=-1) - probs
        probs = probs.masked_fill(mass_before >= params.top_p, 0.0)
    cdf = probs.cumsum(dim=-1)
    k = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(1)).clamp(max=probs.shape[1] - 1)
    return (k if index is None else index.gather(1, k)).squeeze(1)


@dataclass
class _Rows:
    """The live rows of one batch: which (prompt, sample) each is, what it generated, and its random stream."""

    owner: list[tuple[int, int]]
    rngs: list[random.Random] | None
    tokens: list[list[int]] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tokens = [[] for _ in self.owner]
        self.reasons = ["length"] * len(self.owner)


class HFGenerator:
    backend = "hf"
    #: compact the batch once finished rows exceed this share of the running ones (see :meth:`_decode`)
    compact_ratio = 0.125

    @classmethod
    def from_options(cls, model: str, opts: Any) -> HFGenerator:
        """:func:`context_cda.generation.make_generator`'s door: ``opts.loaded`` reuses loaded weights."""
        if opts.loaded is not None:
            gen = cls(opts.loaded[0], opts.loaded[1], batch_size=opts.batch_size)
            gen.model_id = model
            return gen
        return cls(model, device=opts.device, model_cache=opts.model_cache, batch_size=opts.batch_size)

    def __init__(self, model: str | Any, tokenizer: Any = None, *, device: str = "auto",
                 model_cache: str | None = None, batch_size: int = 16) -> None:
        """``model`` is a reference for :func:`context_cda.models.load_lm`, or an already loaded model (then
        pass its ``tokenizer``)."""
        if isinstance(model, str):
            from ..models import load_lm

            self.model_id = model
            self.model, self.tokenizer, family = load_lm(model, cache=model_cache, device=device)
            if family != "causal":
                raise ModelError(f"{model}: the hf generator needs a causal LM, this is a {family} model.")
        else:
            self.model, self.tokenizer = model, tokenizer
            self.model_id = getattr(model.config, "_name_or_path", "") or type(model).__name__
        self.batch_size = batch_size
        tok = self.tokenizer
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        self._chat = bool(getattr(tok, "chat_template", None))
        self._forward_args = set(inspect.signature(self.model.forward).parameters)
        self._cache_arg = "cache" if "cache" in self._forward_args else "past_key_values"
        if self._cache_arg not in self._forward_args and "kwargs" not in self._forward_args:
            raise ModelError(f"{self.model_id}: its forward takes no KV cache; the hf generator needs one.")

    def _eos_ids(self, stop: Sequence[str]) -> tuple[list[int], list[str]]:
        tok = self.tokenizer
        eos = self.model.generation_config.eos_token_id
        ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if tok.eos_token_id is not None:
            ids.add(tok.eos_token_id)
        rest = []
        vocab = tok.get_vocab()
        for s in stop:
            if s in vocab and s in tok.all_special_tokens + list(tok.get_added_vocab()):
                ids.add(vocab[s])
            else:
                rest.append(s)
        return sorted(ids), rest

    def _max_positions(self) -> int | None:
        cfg = self.model.config
        cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
        for name in ("max_position_embeddings", "n_positions"):
            v = getattr(cfg, name, None)
            if isinstance(v, int) and v > 0:
                return v
        return None

    def generate(self, prompts: Sequence[Conversation], params: SamplingParams) -> list[GenerationResult]:
        import torch

        results: list[GenerationResult | None] = [None] * len(prompts)
        texts = [format_chat(self.tokenizer, p) for p in prompts]
        ids = self.tokenizer(texts, add_special_tokens=not self._chat)["input_ids"] if texts else []
        eos_ids, stop_strings = self._eos_ids(params.stop)
        limit = self._max_positions()
        for i, seq in enumerate(ids):
            if not seq:
                results[i] = permanent_error(EMPTY_PROMPT, "it has no tokens")
            elif limit and len(seq) + params.max_tokens > limit:
                results[i] = permanent_error(
                    PROMPT_TOO_LONG, f"{len(seq)} + {params.max_tokens} new tokens > {limit} positions")
        order = sorted((i for i in range(len(ids)) if results[i] is None), key=lambda i: ids[i])
        for b in range(0, len(order), self.batch_size):
            idx = order[b: b + self.batch_size]
            try:
                batch = self._generate_batch([ids[i] for i in idx], [texts[i] for i in idx], params, eos_ids,
                                             stop_strings, torch)
            except (RuntimeError, ValueError, IndexError, MemoryError) as e:  # one bad batch fails alone ...
                if out_of_memory(e):  # ... but memory does not come back by retrying: final, with its cause
                    raise self._no_memory(e, len(idx), params) from None
                batch = [GenerationResult(error=f"hf generate failed: {e}"[:300]) for _ in idx]
            for i, r in zip(idx, batch, strict=True):
                results[i] = r
        return [r for r in results if r is not None]

    def _no_memory(self, err: BaseException, prompts: int, params: SamplingParams) -> ModelError:
        cause = (str(err).strip().splitlines() or [type(err).__name__])[0][:160]
        return ModelError(
            f"hf generator {getattr(self, 'model_id', type(self.model).__name__)}: not enough memory for a batch of "
            f"{prompts} prompts x {params.n} samples x up to {params.max_tokens} new tokens ({cause}). This is not "
            "transient (a rerun fails the same way; finished items are kept): lower the prompts per batch "
            "(augment.batch_size; entropy.batch_size for the sample step), the samples per prompt (entropy.n_samples) "
            "or the new tokens (max_tokens), or run where there is more memory.")

    def _generate_batch(self, ids: list[list[int]], texts: list[str], params: SamplingParams, eos_ids: list[int],
                        stop_strings: list[str], torch: Any) -> list[GenerationResult]:
        owner = [(i, j) for i in range(len(ids)) for j in range(params.n)]
        rngs = None
        if not params.greedy and params.seed is not None:
            rngs = [random.Random(row_seed(params.seed, texts[i], j)) for i, j in owner]
        rows = _Rows(owner, rngs)
        with torch.inference_mode():
            self._decode(ids, rows, params, set(eos_ids), stop_strings, torch)
        tok = self.tokenizer
        results = [GenerationResult(prompt_tokens=len(seq)) for seq in ids]
        for (i, _), seq, reason in zip(rows.owner, rows.tokens, rows.reasons, strict=True):
            text = tok.decode(seq, skip_special_tokens=True)
            cut = truncate_at_stop(text, stop_strings)
            results[i].texts.append(cut)
            results[i].completion_tokens += len(seq)
            results[i].finish_reasons.append("stop" if len(cut) < len(text) else reason)
        return results

    def _forward(self, input_ids: Any, cache: Any, mask: Any = None, positions: Any = None) -> Any:
        """The logits of the last position of each row (the cache is updated in place)."""
        kwargs: dict[str, Any] = {self._cache_arg: cache, "use_cache": True}
        if mask is not None:
            kwargs["attention_mask"] = mask
        if positions is not None and "position_ids" in self._forward_args:
            kwargs["position_ids"] = positions
        if "logits_to_keep" in self._forward_args:
            kwargs["logits_to_keep"] = 1
        return self.model(input_ids=input_ids, **kwargs).logits[:, -1]

    def _new_cache(self, max_len: int) -> Any:
        """A preallocated KV cache of ``max_len`` positions, or a growing one where transformers has no static
        cache for this model (or an older transformers without this constructor)."""
        import transformers

        try:
            return transformers.StaticCache(config=self.model.config, max_cache_len=max_len)
        except (AttributeError, TypeError, ValueError, NotImplementedError):
            try:
                return transformers.DynamicCache(config=self.model.config)
            except TypeError:
                return transformers.DynamicCache()

    def _prefill(self, ids: list[list[int]], rows: _Rows, max_new: int, torch: Any) -> tuple[Any, Any, Any, Any]:
        """Run the shared prefix once and each row's suffix; return (cache, logits, mask, last positions)."""
        dev = self.model.device
        n_rows, p = len(rows.owner), common_prefix_length(ids)
        s = max(len(x) for x in ids) - p
        cache = self._new_cache(p + s + max_new)
        if p > 0:
            self._forward(torch.tensor([ids[0][:p]], device=dev), cache)
        cache.reorder_cache(torch.zeros(n_rows, dtype=torch.long, device=dev))
        suffix = torch.full((n_rows, s), self.tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros((n_rows, p + s), dtype=torch.long)
        mask[:, :p] = 1
        for r, (i, _) in enumerate(rows.owner):
            own = ids[i][p:]
            suffix[r, s - len(own):] = torch.tensor(own, dtype=torch.long)
            mask[r, p + s - len(own):] = 1
        positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
        mask, positions = mask.to(dev), positions.to(dev)
        logits = self._forward(suffix.to(dev), cache, mask, positions[:, p:])
        return cache, logits, mask, positions[:, -1]

    def _decode(self, ids: list[list[int]], rows: _Rows, params: SamplingParams, eos: set[int],
                stop_strings: list[str], torch: Any) -> None:
        """Decode until every row has stopped. A finished row stays in the batch (its output ignored) until
        finished rows exceed :attr:`compact_ratio` x the running ones; then the batch is cut down to the running
        rows. A cut copies the KV cache (SmolLM2 on 2 CPU cores: ~2 ms per row kept), a finished row carried
        along costs its share of a step's compute (~6 ms per row and step there), so cuts are batched a little
        but not put off long."""
        cache, logits, mask, last = self._prefill(ids, rows, params.max_tokens, torch)
        slots = list(range(len(rows.owner)))  # the row in each slot of the batch
        running = set(slots)
        window = max(8, 2 * max((len(s) for s in stop_strings), default=0))
        tok = self.tokenizer
        # decoding a batch can take minutes on a CPU: its tokens are progress too (context_cda.runtime.progress)
        for step in iterate(range(params.max_tokens), f"generate {len(ids)} prompt(s) x {params.n}", "token",
                            bar=False):
            uniforms = None
            if rows.rngs is not None:
                uniforms = torch.tensor([rows.rngs[a].random() if a in running else 0.5 for a in slots],
                                        device=logits.device)
            nxt = sample_next(logits, params, uniforms, torch)
            for a, t in zip(slots, nxt.tolist(), strict=True):
                if a not in running:
                    continue
                rows.tokens[a].append(t)
                if t in eos or (stop_strings and any(
                        s in tok.decode(rows.tokens[a][-window:], skip_special_tokens=True) for s in stop_strings)):
                    rows.reasons[a] = "stop"
                    running.discard(a)
            if not running or step == params.max_tokens - 1:
                return
            if len(slots) - len(running) > self.compact_ratio * len(running):
                kept = torch.tensor([k for k, a in enumerate(slots) if a in running], dtype=torch.long,
                                    device=mask.device)
                cache.reorder_cache(kept)
                mask, last, nxt = mask[kept], last[kept], nxt[kept]
                slots = [a for a in slots if a in running]
            mask = torch.cat([mask, mask.new_ones((len(slots), 1))], dim=1)
            last = last + 1
            logits = self._forward(nxt[:, None], cache, mask, last[:, None])

    def close(self) -> None:
        self.model = None
        import gc

        gc.collect()
