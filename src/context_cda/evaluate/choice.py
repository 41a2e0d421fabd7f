"""Multiple-choice likelihoods: log p(continuation | context) for each (context, continuation), batched.

* causal LMs: as lm-evaluation-harness (0.4.13) scores a ``multiple_choice`` request (``_encode_pair`` and
  ``_loglikelihood_tokens``): trailing spaces of the context move to the continuation; the context and the whole
  string are encoded as the tokenizer encodes them by default (its own special tokens: a Llama-style tokenizer's
  ``<s>``, nothing for GPT-2's), the continuation's tokens are the whole string's tokens after the context's (so a
  merge across the boundary is scored as the whole string tokenizes); an empty context is conditioned on the
  model's start token; the continuation's summed log-probability is the score;
* masked LMs and seq2seq models (the harness defines no such formulation): the pseudo-log-likelihood of the
  continuation's tokens inside the whole string (each masked in turn, everything else visible; Salazar et al.
  2020), summed.

Every call returns :class:`~context_cda.scoring.base.LogLik` per pair; the decision of a benchmark is the
argmax of the sums (lm-eval's ``acc``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ..scoring import Scorer
    from ..scoring.base import LogLik
    from .stats import Items, Metrics

METHODS = {
    "causal": "lm-eval multiple-choice loglikelihood (summed continuation log-probability)",
    "masked": "pseudo-log-likelihood of the continuation tokens in context (summed)",
    "seq2seq": "pseudo-log-likelihood of the continuation tokens in context (sentinel span, summed)",
}


def split_pair(context: str, continuation: str) -> tuple[str, str]:
    """lm-eval's rule: trailing whitespace of the context belongs to the continuation."""
    n = len(context) - len(context.rstrip())
    return (context[:-n], context[-n:] + continuation) if n else (context, continuation)


def continuation_logliks(scorer: Scorer, contexts: Sequence[str], continuations: Sequence[str]) -> list[LogLik]:
    """log p(continuation | context) for each pair (see the module docstring)."""
    if len(contexts) != len(continuations):
        raise ValueError("contexts and continuations must have the same length")
    if not contexts:
        return []
    pairs = [split_pair(c, x) for c, x in zip(contexts, continuations, strict=True)]
    if scorer.family == "causal":
        return _causal(scorer, pairs)
    return _masked(scorer, pairs)


def _token_split(scorer: Scorer, pairs: Sequence[tuple[str, str]], special: bool = False
                 ) -> tuple[list[list[int]], list[list[int]]]:
    """(context ids, continuation ids) per pair: the whole string's tokens after the context's (``special``: both
    encoded with the tokenizer's own special tokens, as the harness encodes a causal LM's request)."""
    ctx = scorer.encode([c for c, _ in pairs], add_special_tokens=special)
    whole = scorer.encode([c + x for c, x in pairs], add_special_tokens=special)
    return ctx, [w[len(c):] for c, w in zip(ctx, whole, strict=True)]


def _causal(scorer, pairs) -> list[LogLik]:
    from ..scoring.base import LogLik

    ctx, cont = _token_split(scorer, pairs, special=True)
    seqs, starts = [], []
    for c, x in zip(ctx, cont, strict=True):
        c = c or [scorer.start_id]
        seqs.append(c + x)
        starts.append(len(c))
    lps = scorer.token_logprobs(seqs)  # lps[j] scores token j + 1
    return [LogLik.from_logprobs(lp[k - 1:]) for lp, k in zip(lps, starts, strict=True)]


def _masked(scorer, pairs) -> list[LogLik]:
    from ..scoring.base import LogLik

    ctx, cont = _token_split(scorer, pairs)
    fulls = scorer.encode([c + x for c, x in pairs], add_special_tokens=True)  # the model's own special tokens
    seqs, positions, owner = [], [], []
    for k, (c, x) in enumerate(zip(ctx, cont, strict=True)):
        plain = c + x
        full = fulls[k]
        offset = _offset(full, plain)
        for j in range(len(c), len(plain)):
            seqs.append(full)
            positions.append(offset + j)
            owner.append(k)
    lps = scorer.masked_logprobs(seqs, positions) if seqs else []
    per: list[list[float]] = [[] for _ in pairs]
    for k, v in zip(owner, lps, strict=True):
        per[k].append(v)
    return [LogLik.from_logprobs(v) for v in per]


def _offset(full: Sequence[int], plain: Sequence[int]) -> int:
    """Where ``plain`` starts inside ``full`` (the tokenizer's special tokens around it)."""
    n = len(plain)
    for i in range(len(full) - n + 1):
        if list(full[i:i + n]) == list(plain):
            return i
    raise ValueError("the tokenizer's special tokens changed the text's own tokens")


def point_and_intervals(items: Items, metrics: Metrics, bootstrap: Any = None) -> dict[str, Any]:
    """An aggregate's overall block: every metric's value on the items and its seeded bootstrap interval
    (``bootstrap``: the ``evaluate.bootstrap`` settings)."""
    from .stats import Block, Settings
    from .stats import bootstrap as resample

    st = Settings.of(bootstrap)
    intervals = resample(items, metrics, st)
    out: dict[str, Any] = {k: (None if v.point != v.point else v.point) for k, v in intervals.items()}
    out.update(Block(intervals, st).to_dict())
    return out
