"""log p(s | x) of each sampled rephrasing s under the *target* model, through the shared ``Scorer``.

The scorer conditions on x by family: as a prefix (causal), as the encoder input (seq2seq), or as the first
segment with the sample's tokens masked one at a time (masked LMs, pseudo-log-likelihood). Both the summed and
the length-normalised (mean per token) log-likelihoods are returned.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..scoring import LogLik, Scorer


def sample_logliks(scorer: Scorer, xs: Sequence[str], samples: Sequence[Sequence[str]]) -> list[list[LogLik]]:
    """One ``LogLik`` per sample, grouped per item; all items' samples go to the scorer in one call (it batches)."""
    # causal scorers tokenize prefix and continuation separately and concatenate the ids: a leading space keeps
    # the continuation's first word a word-initial token (BPE); masked/seq2seq scorers take s as its own segment
    lead = " " if getattr(scorer, "family", "") == "causal" else ""
    prefixes: list[str] = []
    conts: list[str] = []
    for x, ss in zip(xs, samples, strict=True):
        for s in ss:
            prefixes.append(x.strip())
            conts.append(lead + s.strip())
    flat = scorer.conditional_loglik(prefixes, conts) if conts else []
    if len(flat) != len(conts):
        raise RuntimeError(f"scorer returned {len(flat)} log-likelihoods for {len(conts)} samples")
    out: list[list[LogLik]] = []
    i = 0
    for ss in samples:
        out.append(list(flat[i : i + len(ss)]))
        i += len(ss)
    return out
