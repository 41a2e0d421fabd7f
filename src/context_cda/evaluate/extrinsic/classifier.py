"""Fine-tune a classification (or regression) head on top of a checkpoint, then predict: the shared machinery of
the extrinsic benchmarks (GLUE, Bias in Bios, STS-B, NLI-Bias).

Every family gets transformers' ``AutoModelForSequenceClassification`` head on the checkpoint's body: a pooled
[CLS] head for encoders (BERT, DistilBERT, RoBERTa), the last non-padding token for causal LMs (GPT-2, Llama,
SmolLM2), the EOS representation for T5. The body is the checkpoint's own weights (loaded with safetensors); the
head is new and seeded.

* :class:`HeadFactory` — turns a model reference, a checkpoint folder or an already loaded model into fresh
  sequence-classification models, one per task (a loaded model is saved once to a temporary folder).
* :func:`fine_tune` — AdamW with linear warm-up/decay over seeded shuffled batches; cross-entropy, or MSE for
  regression (``num_labels == 1``); every weight, or only the head (``freeze_body``: a linear probe).
* :func:`predict` — logits for many examples in length-sorted, padded batches (attention masks), returned in the
  input order; batched and one-at-a-time predictions agree to float32 precision.
"""

from __future__ import annotations

import contextlib
import logging
import math
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import ModelError

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from ...config import HeadConfig
    from .data import Example

logger = logging.getLogger(__name__)

PAIR_SEPARATOR = "\n"  # joins a text pair for tokenizers without a separator token (GPT-2, Llama, T5)


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Silence "newly initialized weights" chatter: a fresh head is the point here."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


class HeadFactory:
    """Fresh sequence-classification models on one checkpoint body.

    ``source`` is a model reference (hub id, folder, .gguf, package:NAME, tiny:ARCH) or a loaded
    ``PreTrainedModel`` (with ``tokenizer``), which is saved once (safetensors) to a temporary folder that
    :meth:`close` removes. Use as a context manager."""

    def __init__(self, source: Any, tokenizer: Any = None, cache: str | None = None, device: str = "auto",
                 intervention: Any = None) -> None:
        from ...models import pick_device, resolve_pretrained

        self.device = pick_device(device)
        self.intervention = intervention  # attached to every new model (``.attach(model)``: a projection arm)
        self._tmp: Path | None = None
        if isinstance(source, str | Path):
            self.path = resolve_pretrained(str(source), cache)
        else:
            if tokenizer is None:
                raise ModelError("HeadFactory: a loaded model needs its tokenizer.")
            self._tmp = Path(tempfile.mkdtemp(prefix="ccda-head-"))
            model = getattr(source, "get_base_model", lambda: source)()  # LoRA: the wrapped model
            model.save_pretrained(self._tmp, safe_serialization=True)
            tokenizer.save_pretrained(self._tmp)
            self.path = str(self._tmp)
        self._tokenizer: Any = None

    def __enter__(self) -> HeadFactory:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    @property
    def tokenizer(self) -> Any:
        """The checkpoint's tokenizer (its own instance), with a padding token (EOS when it has none)."""
        if self._tokenizer is None:
            from ...models import load_tokenizer

            tok = load_tokenizer(self.path)
            if tok.pad_token_id is None:
                if tok.eos_token is None:
                    raise ModelError(f"{self.path}: the tokenizer has neither a padding nor an EOS token.")
                tok.pad_token = tok.eos_token
            self._tokenizer = tok
        return self._tokenizer

    def new(self, num_labels: int, seed: int = 0) -> Any:
        """A sequence-classification model: the checkpoint's body and a new head seeded by ``seed``
        (``num_labels == 1``: regression)."""
        import torch
        from transformers import AutoModelForSequenceClassification

        torch.manual_seed(seed)
        kwargs: dict[str, Any] = {"num_labels": num_labels}
        if num_labels == 1:
            kwargs["problem_type"] = "regression"
        try:
            with _quiet_transformers():
                model = AutoModelForSequenceClassification.from_pretrained(self.path, **kwargs)
        except (OSError, ValueError) as e:
            raise ModelError(
                f"{self.path}: cannot put a sequence-classification head on this checkpoint ({e})."
            ) from e
        model.config.pad_token_id = self.tokenizer.pad_token_id
        if self.intervention is not None:
            self.intervention.attach(model)
        return model.to(self.device)


def encode(tokenizer: Any, examples: Sequence[Example], max_len: int) -> list[list[int]]:
    """Token ids per example: the tokenizer's own pair encoding where it has a separator token, else
    ``text + "\\n" + text_pair``; truncated to ``max_len`` (longest text first for pairs)."""
    native_pairs = tokenizer.sep_token is not None
    texts = [e.text for e in examples]
    pairs = [e.text_pair for e in examples]
    if all(p is None for p in pairs):
        enc = tokenizer(texts, truncation=True, max_length=max_len)
    elif native_pairs:
        enc = tokenizer(texts, [p or "" for p in pairs], truncation="longest_first", max_length=max_len)
    else:
        joined = [t if p is None else f"{t}{PAIR_SEPARATOR}{p}" for t, p in zip(texts, pairs, strict=True)]
        enc = tokenizer(joined, truncation=True, max_length=max_len)
    return [list(ids) for ids in enc["input_ids"]]


def _collate(seqs: Sequence[Sequence[int]], pad_id: int, device: str):
    import torch

    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, : len(s)] = 1
    return ids.to(device), mask.to(device)


@dataclass
class FitStats:
    steps: int
    examples: int
    epochs: float
    seconds: float
    final_loss: float
    losses: list[float]


def freeze_body(model: Any) -> int:
    """Freeze the checkpoint's body (``model.base_model``), leaving the head trainable; returns the number of
    trainable parameters left."""
    body = {id(p) for p in model.base_model.parameters()}
    for p in model.parameters():
        p.requires_grad_(id(p) not in body)
    left = sum(p.numel() for p in model.parameters() if p.requires_grad)
    if not left:
        raise ModelError(f"{type(model).__name__}: no head parameters outside the body to train.")
    return left


def fine_tune(
    model: Any,
    tokenizer: Any,
    train: Sequence[Example],
    hcfg: HeadConfig,
    desc: str = "fine-tune",
    progress: bool = False,
) -> FitStats:
    """Train ``model`` (a sequence-classification model from :meth:`HeadFactory.new`) on ``train`` in place."""
    import numpy as np
    import torch

    from ...models.optim import epoch_batches, linear_schedule, param_groups
    from ...runtime.progress import Progress

    if not train:
        raise ModelError(f"{desc}: no training examples.")
    regression = model.config.num_labels == 1
    seqs = encode(tokenizer, train, hcfg.max_seq_len)
    labels = [float(e.label) if regression else int(e.label) for e in train]
    if not regression:
        bad = [e.id for e in train if not 0 <= int(e.label) < model.config.num_labels]
        if bad:
            raise ModelError(f"{desc}: label out of range for {len(bad)} example(s), e.g. {bad[0]}.")
    if hcfg.freeze_body:
        freeze_body(model)
    per_epoch = math.ceil(len(train) / hcfg.batch_size)
    total = max(1, math.ceil(per_epoch * hcfg.epochs))
    if hcfg.max_steps:
        total = min(total, hcfg.max_steps)
    opt = torch.optim.AdamW(param_groups(model, hcfg.weight_decay), lr=hcfg.learning_rate)
    sched = linear_schedule(opt, int(hcfg.warmup_ratio * total), total)
    torch.manual_seed(hcfg.seed)  # dropout
    model.train()
    losses: list[float] = []
    t0 = time.perf_counter()
    step, epoch = 0, 0
    with Progress(total, desc, "step", bar=progress) as bar:
        while step < total:
            for batch in epoch_batches(len(train), hcfg.batch_size, hcfg.seed, epoch):
                if step >= total:
                    break
                ids, mask = _collate([seqs[i] for i in batch], tokenizer.pad_token_id, model.device)
                dtype = torch.float32 if regression else torch.long
                y = torch.tensor([labels[i] for i in batch], dtype=dtype, device=model.device)
                out = model(input_ids=ids, attention_mask=mask, labels=y)
                out.loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)
                loss = float(out.loss.detach())
                if not np.isfinite(loss):
                    raise ModelError(f"{desc}: the loss became {loss} at step {step + 1}; lower evaluate.head."
                                     "learning_rate.")
                losses.append(loss)
                step += 1
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.3f}", refresh=False)
            epoch += 1
    model.eval()
    return FitStats(steps=step, examples=len(train), epochs=step / per_epoch, seconds=time.perf_counter() - t0,
                    final_loss=float(np.mean(losses[-max(1, per_epoch // 4):])), losses=losses)


def predict(
    model: Any,
    tokenizer: Any,
    examples: Sequence[Example],
    max_len: int,
    batch_size: int = 32,
    desc: str = "predict",
    progress: bool = False,
) -> np.ndarray:
    """Logits, shape (len(examples), num_labels), in the order of ``examples``; length-sorted padded batches."""
    import numpy as np
    import torch

    from ...runtime.progress import Progress

    seqs = encode(tokenizer, examples, max_len)
    out = np.zeros((len(seqs), model.config.num_labels), dtype=np.float32)
    order = sorted(range(len(seqs)), key=lambda i: (len(seqs[i]), i))
    model.eval()
    with torch.inference_mode(), Progress(len(seqs), desc, "ex", bar=progress) as bar:
        for k in range(0, len(order), batch_size):
            idx = order[k : k + batch_size]
            ids, mask = _collate([seqs[i] for i in idx], tokenizer.pad_token_id, model.device)
            logits = model(input_ids=ids, attention_mask=mask).logits.float().cpu().numpy()
            out[idx] = logits
            bar.update(len(idx))
    return out


def softmax(logits: np.ndarray) -> np.ndarray:
    import numpy as np

    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


__all__ = ["FitStats", "HeadFactory", "encode", "fine_tune", "freeze_body", "predict", "softmax"]
