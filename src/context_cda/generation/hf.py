"""``hf`` backend: transformers ``generate`` in batches (left padding), CPU or GPU.

Prompts are formatted with the tokenizer's chat template (a plain "System/User/Assistant" layout when the
tokenizer has none), sorted by length and generated ``batch_size`` at a time. Stop strings that are single
special tokens of the vocabulary (``<|eot_id|>``, ``<|im_end|>``) become extra EOS ids; other stop strings
end a row through a cheap stopping criterion and are cut from the decoded text. With a seed, ``torch`` is seeded
once per batch, so sampled outputs are reproducible for the same batch composition.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import ModelError
from .base import Conversation, GenerationResult, SamplingParams, truncate_at_stop


def format_chat(tokenizer: Any, messages: Conversation) -> str:
    """The prompt text for ``messages``: the chat template with a generation prompt, or a plain fallback."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    lines = [f"{m['role'].capitalize()}: {m['content']}" for m in messages]
    return "\n\n".join(lines) + "\n\nAssistant:"


def _stop_on_strings(tok: Any, stops: list[str], prompt_len: int, torch: Any) -> Any:
    """A cheap stopping criterion: decode the last few new tokens of each row and look for a stop string.

    (transformers' own ``stop_strings`` precomputes tables over the whole vocabulary on every ``generate`` call,
    about a second for a 49k vocabulary on CPU: more than a short one-prompt generation itself.)
    """
    from transformers import StoppingCriteria

    window = max(8, 2 * max(len(s) for s in stops))

    class StopOnStrings(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):
            n = input_ids.shape[1]
            start = max(prompt_len, n - window)
            tails = tok.batch_decode(input_ids[:, start:], skip_special_tokens=True)
            return torch.tensor([any(s in t for s in stops) for t in tails], dtype=torch.bool,
                                device=input_ids.device)

    return StopOnStrings()


class HFGenerator:
    backend = "hf"

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
        from ..models import load_lm

        if isinstance(model, str):
            self.model_id = model
            self.model, self.tokenizer, family = load_lm(model, cache=model_cache, device=device)
            if family != "causal":
                raise ModelError(f"{model}: the hf generator needs a causal LM, this is a {family} model.")
        else:
            self.model, self.tokenizer = model, tokenizer
            self.model_id = getattr(model.config, "_name_or_path", "") or type(model).__name__
        self.batch_size = batch_size
        tok = self.tokenizer
        tok.padding_side = "left"
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        self._chat = bool(getattr(tok, "chat_template", None))

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
        lengths = [len(self.tokenizer(t, add_special_tokens=not self._chat)["input_ids"]) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: -lengths[i])
        eos_ids, stop_strings = self._eos_ids(params.stop)
        limit = self._max_positions()
        if limit:
            for i in order:
                if lengths[i] + params.max_tokens > limit:
                    results[i] = GenerationResult(
                        error=f"prompt too long: {lengths[i]} + {params.max_tokens} new tokens > {limit} positions"
                    )
            order = [i for i in order if results[i] is None]
        for b in range(0, len(order), self.batch_size):
            idx = order[b: b + self.batch_size]
            try:
                batch = self._generate_batch([texts[i] for i in idx], params, eos_ids, stop_strings, torch)
            except (RuntimeError, ValueError, IndexError) as e:  # one bad batch (e.g. too long for the model) fails alone
                batch = [GenerationResult(error=f"hf generate failed: {e}"[:300]) for _ in idx]
            for i, r in zip(idx, batch, strict=True):
                results[i] = r
        return [r for r in results if r is not None]

    def _generate_batch(self, texts: list[str], params: SamplingParams, eos_ids: list[int],
                        stop_strings: list[str], torch: Any) -> list[GenerationResult]:
        tok, model = self.tokenizer, self.model
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=not self._chat).to(model.device)
        kwargs: dict[str, Any] = {
            "max_new_tokens": params.max_tokens,
            "num_return_sequences": params.n,
            "pad_token_id": tok.pad_token_id,
            "eos_token_id": eos_ids,
        }
        if params.greedy:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        else:
            kwargs.update(do_sample=True, temperature=params.temperature, top_p=params.top_p, top_k=0)
        if stop_strings:
            kwargs["stopping_criteria"] = [_stop_on_strings(tok, stop_strings, enc["input_ids"].shape[1], torch)]
        if params.seed is not None:
            torch.manual_seed(params.seed)
        with torch.inference_mode():
            out = model.generate(**enc, **kwargs)
        new = out[:, enc["input_ids"].shape[1]:]
        prompt_tokens = enc["attention_mask"].sum(dim=1).tolist()
        results = []
        eos_set = set(eos_ids)
        for i in range(len(texts)):
            r = GenerationResult(prompt_tokens=int(prompt_tokens[i]))
            for j in range(params.n):
                seq = new[i * params.n + j].tolist()
                n_tok, reason = len(seq), "length"
                for k, t in enumerate(seq):
                    if t in eos_set:
                        n_tok, reason = k + 1, "stop"
                        break
                text = tok.decode(seq[:n_tok], skip_special_tokens=True)
                cut = truncate_at_stop(text, stop_strings)
                if len(cut) < len(text):
                    reason = "stop"
                r.texts.append(cut)
                r.completion_tokens += n_tok
                r.finish_reasons.append(reason)
            results.append(r)
        return results

    def close(self) -> None:
        self.model = None
        import gc

        gc.collect()
