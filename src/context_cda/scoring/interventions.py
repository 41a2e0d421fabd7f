"""A projection of a model's last hidden states, applied at scoring time (the ``inlp`` and ``sentence-debias`` arms).

Both arms leave the weights alone and change what the language-model head (or a task head) reads: every position's
last hidden state ``h`` becomes

* ``inlp``: ``P h`` with ``P`` the learnt nullspace projection (a d x d matrix, file key ``projection``);
* ``sentence-debias``: ``h - sum_j (h . v_j) v_j / (v_j . v_j)`` for the bias subspace's components ``v_j``
  (a k x d matrix, file key ``bias_direction``; k = 1 in bias-bench, whose formula this is).

Where (as McGill-NLP/bias-bench hooks ``model.bert`` / ``model.transformer``): a forward hook on the output of the
model's base stack, the tensor its head reads (after GPT-2's ``ln_f``, Llama's final norm); for a masked LM whose
base model has an ``encoder`` stack, the encoder's output, so that a pooler read by a task head sees the projected
states too (bias-bench's sequence classifiers hook the encoder). The hook looks at module structure, never at a
model's name. The matrices are stored as safetensors, never pickles.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError, ModelError

#: safetensors key -> the projection kind it holds
KEYS = {"projection": "inlp", "bias_direction": "sentence-debias"}


@dataclass
class Projection:
    """``key`` is ``projection`` (P, d x d) or ``bias_direction`` (V, k x d); ``tensor`` a float32 torch tensor."""

    key: str
    tensor: Any
    source: str = ""

    @property
    def dim(self) -> int:
        return int(self.tensor.shape[-1])

    @classmethod
    def load(cls, path: Path | str) -> Projection:
        """Read a projection file (one tensor under ``projection`` or ``bias_direction``)."""
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        p = Path(path)
        if not p.is_file():
            raise InputError(f"{p}: projection file not found; run `ccda debias` for this target and arm first.")
        try:
            tensors = load_file(str(p))
        except (SafetensorError, OSError, ValueError) as e:
            raise InputError(f"{p}: not a safetensors projection file ({e}).") from None
        found = [k for k in KEYS if k in tensors]
        if len(found) != 1:
            raise InputError(f"{p}: expected one tensor named {' or '.join(KEYS)}; found {', '.join(tensors) or 'none'}.")
        t = tensors[found[0]].float()
        if t.dim() != 2 or (found[0] == "projection" and t.shape[0] != t.shape[1]):
            raise InputError(f"{p}: {found[0]} has shape {tuple(t.shape)}; expected "
                             f"{'d x d' if found[0] == 'projection' else 'k x d'}.")
        return cls(found[0], t, str(p))

    def save(self, path: Path | str, metadata: dict[str, str] | None = None) -> Path:
        """Write the tensor (atomically) as safetensors, with string ``metadata``."""
        from safetensors.torch import save_file

        from ..io import atomic_path

        with atomic_path(Path(path)) as tmp:
            save_file({self.key: self.tensor.contiguous().float()}, str(tmp), metadata=metadata or {})
        return Path(path)

    def apply(self, h: Any) -> Any:
        """The projected states (any leading shape, last dimension d), in ``h``'s dtype."""
        x = h.float()
        t = self.tensor.to(x.device)
        if self.key == "projection":
            y = x @ t.T
        elif t.shape[0] == 1:  # bias-bench's formula: x - (x . v) v / (v . v)
            v = t[0]
            y = x - (x @ v).unsqueeze(-1) * v / v.dot(v)
        else:  # remove the span of the components: x - x V^T (V V^T)^-1 V
            y = x - (x @ t.T) @ _solve(t @ t.T, t)
        return y.to(h.dtype)

    def check(self, model: Any, what: str) -> None:
        """One clear error when the projection's dimension is not the model's hidden size."""
        size = hidden_size(model)
        if size is not None and size != self.dim:
            raise ModelError(
                f"{what}: the projection {self.source or self.key} is for {self.dim}-dimensional hidden states, and "
                f"this model's are {size}-dimensional. Learn it for this model (ccda debias --target T --arm ARM) "
                "or pass the projection of this model."
            )

    def attach(self, model: Any) -> Any:
        """Register the hook on ``model`` (:func:`hook_module`); returns the handle (``.remove()`` undoes it)."""
        self.check(model, type(model).__name__)

        def hook(_module: Any, _args: Any, output: Any) -> Any:
            return _replace_last_hidden(output, self.apply)

        return hook_module(model).register_forward_hook(hook)


def _solve(gram: Any, t: Any) -> Any:
    import torch

    return torch.linalg.solve(gram, t)


def _replace_last_hidden(output: Any, fn: Any) -> Any:
    if hasattr(output, "last_hidden_state") and output.last_hidden_state is not None:
        output.last_hidden_state = fn(output.last_hidden_state)
        return output
    if isinstance(output, tuple) and output:
        return (fn(output[0]), *output[1:])
    return fn(output)


def base_of(model: Any) -> Any:
    """The model's base stack (a LoRA wrapper unwrapped)."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    return getattr(inner, "base_model", inner)


def hook_module(model: Any) -> Any:
    """Where the projection hooks: the base stack's ``encoder`` (BERT-like masked and classification models), else
    the base model itself (GPT-2-, Llama-like causal models, DistilBERT)."""
    base = base_of(model)
    if getattr(base.config, "is_encoder_decoder", False):
        raise ModelError(f"{type(model).__name__}: a projection of the last hidden states is defined for masked and "
                         "causal LMs, not encoder-decoder models.")
    enc = getattr(base, "encoder", None)
    if enc is not None and hasattr(enc, "layer"):
        return enc
    return base


def hidden_size(model: Any) -> int | None:
    cfg = base_of(model).config
    for key in ("hidden_size", "n_embd", "d_model", "dim"):
        v = getattr(cfg, key, None)
        if isinstance(v, int):
            return v
    return None
