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

    @property
    def removed(self) -> int:
        """Dimensions of the hidden states the projection takes out: d - rank(P) for INLP (P's trace), k for a
        bias subspace of k independent directions."""
        return self.dim - int(round(float(self.tensor.double().trace()))) if self.key == "projection" else int(
            self.tensor.shape[0])

    @classmethod
    def load(cls, path: Path | str, arm: str | None = None) -> Projection:
        """Read a projection file (one tensor under ``projection`` or ``bias_direction``), checked for ``arm``
        (:meth:`validate`)."""
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
        return cls(found[0], t, str(p)).validate(arm)

    def validate(self, arm: str | None = None) -> Projection:
        """Refuse a matrix whose scores would not be the arm's (an :class:`InputError` naming the file): another
        arm's tensor (a SentenceDebias subspace passed as INLP), a value that is not finite, an INLP matrix that
        is no orthogonal projection or keeps no dimension (every hidden state 0) or removes none (the vanilla
        model), bias directions that are zero or linearly dependent, or as many as the dimensions."""
        import torch

        where = self.source or self.key
        if arm is not None and KEYS[self.key] != arm:
            held = "an INLP projection (d x d)" if self.key == "projection" else "a SentenceDebias bias subspace (k x d)"
            raise InputError(f"{where}: holds {held}, and the arm is {arm}: pass the {arm} file (its debias step's "
                             f"{_file(arm)}) or use --arm {KEYS[self.key]}.")
        t = self.tensor.double()
        if not bool(torch.isfinite(t).all()):
            raise InputError(f"{where}: the {self.key} holds {int((~torch.isfinite(t)).sum())} values that are not "
                             "finite (NaN or infinity); learn it again (ccda debias).")
        check = _check_projection if self.key == "projection" else _check_directions
        check(t, where)
        return self

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
        self.check_width(hidden_size(model), what)

    def check_width(self, size: int | None, what: str) -> None:
        """The same check against a hidden size read from the model's config (before the model is loaded)."""
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


#: how far a stored matrix may be from symmetric and idempotent (float32 rounding of a learnt projection)
PROJECTION_TOL = 1e-3


def _file(arm: str) -> str:
    from ..layout import BIAS_DIRECTION_FILE, PROJECTION_FILE

    return PROJECTION_FILE if arm == "inlp" else BIAS_DIRECTION_FILE


def _check_projection(p: Any, where: str) -> None:
    """P is an orthogonal projection (P = P^T = P^2) keeping at least one dimension and removing at least one."""
    d = p.shape[0]
    off = max(float((p - p.T).abs().max()), float((p @ p - p).abs().max()))
    if off > PROJECTION_TOL:
        raise InputError(f"{where}: not an orthogonal projection (P differs from P^T or P^2 by up to {off:.3g}); INLP "
                         "applies a nullspace projection, so this matrix would score some other model. Learn it with "
                         "ccda debias --arm inlp.")
    kept = int(round(float(p.trace())))
    if kept < 1:
        raise InputError(f"{where}: the projection removes all {d} dimensions of the hidden states (rank 0): every "
                         "state becomes 0 and the scores are the LM head's bias alone. Learn it with fewer classifiers "
                         "(baselines.inlp.n_classifiers).")
    if kept >= d:
        raise InputError(f"{where}: the projection removes no dimension (the identity): the arm would score the "
                         "vanilla model under another name. Learn it again (ccda debias --arm inlp).")


def _check_directions(v: Any, where: str) -> None:
    """k non-zero, linearly independent bias directions, fewer than the d dimensions."""
    import torch

    k, d = v.shape
    norms = v.norm(dim=1)
    if bool((norms <= 1e-8).any()):
        raise InputError(f"{where}: bias direction {int((norms <= 1e-8).nonzero()[0])} is zero: removing its span "
                         "divides by its length. Learn it again (ccda debias --arm sentence-debias).")
    if k >= d:
        raise InputError(f"{where}: {k} bias directions for {d}-dimensional states remove every dimension; use fewer "
                         "components (baselines.sentence_debias.n_components).")
    rank = int(torch.linalg.matrix_rank(v / norms[:, None]))
    if rank < k:
        raise InputError(f"{where}: the {k} bias directions span only {rank} dimensions (linearly dependent): their "
                         "span cannot be removed as given. Keep independent directions (fewer components, "
                         "baselines.sentence_debias.n_components) or learn them again.")


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
    return config_width(base_of(model).config)


def config_width(cfg: Any) -> int | None:
    """The hidden size a transformers config gives (hidden_size, n_embd, d_model or dim), else None."""
    for key in ("hidden_size", "n_embd", "d_model", "dim"):
        v = getattr(cfg, key, None)
        if isinstance(v, int):
            return v
    return None
