"""Log-likelihoods of text under a target model, one backend per family (masked, causal, seq2seq).
May import: the run contract, models.

``Scorer`` backends (chosen from the model's class via :func:`context_cda.models.family_of`, never its name):

* :class:`~context_cda.scoring.masked.MaskedScorer`: pseudo-log-likelihood, one mask at a time (BERT, RoBERTa...);
* :class:`~context_cda.scoring.causal.CausalScorer`: left-to-right log-likelihood, BOS/EOS from the tokenizer;
* :class:`~context_cda.scoring.seq2seq.Seq2SeqScorer`: encoder input -> decoder target (T5, sentinel spans).

Every backend offers :meth:`Scorer.conditional_loglik` and runs its forward passes in padded, length-sorted batches
(``batch_size`` sequences each), projecting to the vocabulary only at the positions read (on a CPU, in
cache-sized vocabulary blocks straight from the hidden states); causal LMs instead pack the prefix tree of their
sequences into the passes, so a shared prefix is computed once (``batch_size * 8`` tokens per pass); masked LMs
compute their last encoder layer only at the masked positions. ``batch_size=1`` is the one-at-a-time reference
path (no padding at all, full logits, as the original scripts); the two agree to float32 precision on every
item, which the tests check. docs/architecture.md lists each saving and the check that guards it.

torch and transformers are imported inside the backends, so importing this package stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import LogLik, Scorer

if TYPE_CHECKING:  # pragma: no cover
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["LogLik", "Scorer", "load_scorer", "scorer_for"]


def scorer_for(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    batch_size: int = 32,
    progress: bool = False,
) -> Scorer:
    """Wrap a loaded model: the backend follows ``family_of(model)`` (masked / causal / seq2seq)."""
    from ..models import family_of

    family = family_of(model)
    if family == "masked":
        from .masked import MaskedScorer

        return MaskedScorer(model, tokenizer, batch_size=batch_size, progress=progress)
    if family == "causal":
        from .causal import CausalScorer

        return CausalScorer(model, tokenizer, batch_size=batch_size, progress=progress)
    from .seq2seq import Seq2SeqScorer

    return Seq2SeqScorer(model, tokenizer, batch_size=batch_size, progress=progress)


def load_scorer(
    model_ref: str,
    device: str = "auto",
    batch_size: int = 32,
    cache: str | None = None,
    progress: bool = False,
    **load_kwargs: Any,
) -> Scorer:
    """Load a model reference (hub id, folder, .gguf, package:NAME, tiny:ARCH) and wrap it in its scorer."""
    from ..models import load_lm

    model, tokenizer, _family = load_lm(model_ref, cache=cache, device=device, **load_kwargs)
    scorer = scorer_for(model, tokenizer, batch_size=batch_size, progress=progress)
    scorer.model_ref = model_ref
    return scorer
