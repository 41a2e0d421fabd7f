"""Next-token gender distribution (paper §4.4): which gender words does a model expect at StereoSet's BLANK?

For every StereoSet gender context the model's distribution at BLANK is restricted to the candidate gender words
(Zhao et al. 2018 lists, ~200 words per gender; :mod:`.next_token_vocab` picks the candidates a tokenizer allows),
and the top ``k`` (20) candidates are counted by gender. The headline number is the *imbalance*, the mean over
contexts of ``|male_share - 0.5|``; beside it :func:`chance_baseline` gives what a model with no gender preference
would show with the same candidates and ``k`` (the male share M / (M + F) and the imbalance of a hypergeometric
draw), because neither is 0.5 / 0 by construction. Histograms of the male count per context compare vanilla, CDA
and Context-CDA models.

How each family reads "the words at BLANK" (the family comes from the model's class, never its name):

* causal: the text before BLANK (trailing space stripped) is the context; the distribution of the next token
  after its last position. BOS follows our scorers: a tokenizer that adds BOS by itself keeps it, and an empty
  context (BLANK first) is conditioned on the start token (BOS, else EOS).
* masked: the full context with BLANK replaced by the tokenizer's mask token; the distribution at the mask
  (single-token candidates only: ``pairs`` or ``single``).
* seq2seq (T5): encoder input = the context with BLANK replaced by the first sentinel (``<extra_id_0>``), decoder
  input = ``[decoder_start, <extra_id_0>]``; the distribution of the next decoder token (the span's first token).

Probabilities: single-token candidates (``pairs``, ``single``) take a full-vocabulary log-softmax (float32) at
the position; ``sequence`` candidates (causal and seq2seq) take the word's probability by the chain rule over its
tokens, times the probability that a new word starts after it (:mod:`.next_token_words`). Either way the values
are renormalised over the candidates: the ranking is the same, and ``male_mass + female_mass = 1``. Ties are
broken by token id (single tokens) or list order (sequences), so results are deterministic; batched results equal
one-at-a-time ones.

``score`` (:func:`next_token_distributions`, needs a model, returns per-context rows) is separate from
:func:`aggregate` (pure). torch, transformers, numpy and matplotlib are imported inside the functions.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InputError, ModelError
from .gender_words import GenderWords, load_gender_words
from .next_token_vocab import CANDIDATES, VocabMap, _encode, gender_vocab

if TYPE_CHECKING:  # pragma: no cover
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from .data import StereoSetExample

log = logging.getLogger(__name__)

DEFAULT_TOP_K = 20
# Metric -> whether higher is better (None: descriptive, no direction).
METRICS: dict[str, bool | None] = {
    "imbalance": False,
    "male_share_mean": None,
    "male_share_std": None,
    "male_mass_mean": None,
    "female_mass_mean": None,
    "mass_imbalance": False,
    "male_majority": None,
    "female_majority": None,
    "even": True,
    "chance_male_share": None,
    "chance_imbalance": None,
    "male_share_excess": None,
    "imbalance_excess": False,
}
__all__ = [
    "CANDIDATES", "Context", "GenderWords", "VocabMap", "aggregate", "chance_baseline", "contexts_from_stereoset",
    "gender_vocab", "load_gender_words", "next_token_distributions", "plot_histograms",
]


# ------------------------------------------------------------------------------------------------ contexts


@dataclass(frozen=True)
class Context:
    """A context cut at BLANK: ``text_before_blank`` (trailing space stripped) and the ``full_context``."""

    id: str
    text_before_blank: str
    full_context: str
    target: str = ""
    source: str = ""


def contexts_from_stereoset(examples: Iterable[StereoSetExample]) -> list[Context]:
    """One :class:`Context` per StereoSet intrasentence example ("The chess player was BLANK." ->
    "The chess player was")."""
    out = []
    for ex in examples:
        _check_blank(ex.context, ex.source or ex.id)
        before = ex.context.split("BLANK", 1)[0].rstrip()
        out.append(Context(ex.id, before, ex.context, ex.target, ex.source))
    return out


def _check_blank(text: str, where: str) -> None:
    n = text.count("BLANK")
    if n == 0:
        raise InputError(f"{where}: the context has no BLANK: {text!r}; next-token analysis needs one BLANK.")
    if n > 1:
        raise InputError(f"{where}: the context has {n} BLANKs: {text!r}; next-token analysis needs exactly one.")


# ------------------------------------------------------------------------------------------------ scoring


@dataclass
class _Item:
    ids: list[int]  # encoder / model input
    pos: int  # position whose logits are read (causal, masked); -1 for seq2seq (last decoder position)
    text: str  # what the model was given, for the row


def _causal_items(scorer: Any, tokenizer: PreTrainedTokenizerBase, contexts: Sequence[Context]) -> list[_Item]:
    out = []
    for c in contexts:
        text_ids = _encode(tokenizer, c.text_before_blank) if c.text_before_blank else []
        # BLANK first: the empty context is the tokenizer's own lead (BOS) or, failing that, the start token
        ids = [*scorer.lead_ids, *text_ids] or [scorer.start_id]
        out.append(_Item(ids, len(ids) - 1, c.text_before_blank))
    return out


def _masked_items(model: Any, tokenizer: PreTrainedTokenizerBase, contexts: Sequence[Context]) -> list[_Item]:
    mask_id = tokenizer.mask_token_id
    if mask_id is None or tokenizer.mask_token is None:
        raise ModelError(
            f"{type(model).__name__}: the tokenizer ({type(tokenizer).__name__}) has no mask token, so BLANK "
            "cannot be filled for a masked LM. Load the tokenizer that belongs to the model (its mask_token set)."
        )
    out = []
    for c in contexts:
        _check_blank(c.full_context, c.source or c.id)
        text = c.full_context.replace("BLANK", tokenizer.mask_token)
        ids = [int(i) for i in tokenizer(text)["input_ids"]]
        where = [i for i, t in enumerate(ids) if t == mask_id]
        if len(where) != 1:
            raise InputError(
                f"{c.source or c.id}: the context encodes to {len(where)} mask tokens (expected 1): {text!r}."
            )
        out.append(_Item(ids, where[0], text))
    return out


def _seq2seq_items(scorer: Any, tokenizer: PreTrainedTokenizerBase, contexts: Sequence[Context]) -> list[_Item]:
    if scorer.sentinel_ids is None:
        raise ModelError(
            f"{type(scorer.model).__name__}: the tokenizer has no <extra_id_0> sentinel; next-token analysis of an "
            "encoder-decoder model fills BLANK with T5's first sentinel. Use a T5-style tokenizer."
        )
    sentinel = tokenizer.convert_ids_to_tokens(scorer.sentinel_ids[0])
    out = []
    for c in contexts:
        _check_blank(c.full_context, c.source or c.id)
        text = c.full_context.replace("BLANK", sentinel)
        out.append(_Item([int(i) for i in tokenizer(text)["input_ids"]], -1, text))
    return out


def _decoder_start(model: Any) -> int:
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    for cfg in (getattr(base, "config", None), getattr(base, "generation_config", None)):
        start = getattr(cfg, "decoder_start_token_id", None) if cfg is not None else None
        if start is not None:
            return int(start)
    raise ModelError(f"{type(base).__name__}: config.decoder_start_token_id is not set; set it on the model config.")


def _union_logprobs(
    model: Any, scorer: Any, family: str, items: Sequence[_Item], union: list[int], batch_size: int,
    progress: bool,
) -> list[list[float]]:
    """Full-vocabulary log-probabilities of the ``union`` token ids at each item's position."""
    import torch

    from ..scoring.base import _HeadAtPositions, length_sorted_batches

    out: list[list[float]] = [[] for _ in items]
    if not items:
        return out
    union_t = torch.tensor(union, dtype=torch.long)
    dec: list[int] = []
    if family == "seq2seq":
        dec = [_decoder_start(model), scorer.sentinel_ids[0]]
    lengths = [len(it.ids) for it in items]
    with torch.inference_mode(), scorer._progress(len(items), "next-token") as bar:
        for batch in length_sorted_batches(lengths, batch_size):
            ids, att = scorer._pad([items[i].ids for i in batch])
            if family == "seq2seq":
                dec_ids = torch.tensor([dec] * len(batch), dtype=torch.long, device=ids.device)
                logits = model(input_ids=ids, attention_mask=att, decoder_input_ids=dec_ids).logits[:, -1]
            else:
                pos = torch.tensor([items[i].pos for i in batch], dtype=torch.long, device=ids.device)
                # project to the vocabulary only at the position read (a (B, T, V) tensor is large for 128k vocabs)
                with _HeadAtPositions(model, pos[:, None], ids.shape[1]) as head:
                    full = model(input_ids=ids, attention_mask=att).logits
                logits = full[:, 0] if head.applied else full[torch.arange(len(batch), device=ids.device), pos]
            lp = torch.log_softmax(logits.float(), dim=-1)
            picked = lp.index_select(-1, union_t.to(lp.device)).cpu().tolist()
            for r, i in enumerate(batch):
                out[i] = [float(v) for v in picked[r]]
            bar.update(len(batch))
    return out


def _effective_k(top_k: int, vocab: VocabMap) -> int:
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    n = vocab.n_male + vocab.n_female
    if n == 0:
        raise ModelError(
            f"No gender word is a {vocab.candidates!r} candidate in this tokenizer (gender_vocab kept none; "
            "single-token candidates need words of one token); check the word lists and that the tokenizer "
            "belongs to the model."
        )
    if not vocab.n_male or not vocab.n_female:
        log.warning("next-token: only %s words are candidates; the counts cannot be balanced.",
                    "male" if vocab.n_male else "female")
    if n < top_k:
        log.warning("next-token: only %d candidate gender words (%d male, %d female) < top_k=%d; using top %d.",
                    n, vocab.n_male, vocab.n_female, top_k, n)
        return n
    return top_k


def _items(model: Any, tokenizer: Any, contexts: Sequence[Context], family: str, batch_size: int, progress: bool):
    """(scorer, per-context model inputs) for the family."""
    from ..scoring import scorer_for

    if family == "masked":
        items = _masked_items(model, tokenizer, contexts)  # checks the mask token before the scorer does
    scorer = scorer_for(model, tokenizer, batch_size=batch_size, progress=progress)
    if family == "causal":
        items = _causal_items(scorer, tokenizer, contexts)
    elif family == "seq2seq":
        items = _seq2seq_items(scorer, tokenizer, contexts)
    return scorer, items


def _row(c: Context, it: _Item, lp: list[float], vocab: VocabMap, k: int, ties: list[int]) -> dict[str, Any]:
    """One context's row from the log-probabilities of the candidates (male first, then female)."""
    n_male = vocab.n_male
    words = [*vocab.male_words, *vocab.female_words]
    top = max(lp)
    z = top + math.log(sum(math.exp(v - top) for v in lp))  # log of the full-vocab mass on the candidates
    probs = [math.exp(v - z) for v in lp]
    order = sorted(range(len(lp)), key=lambda j: (-lp[j], ties[j]))[:k]
    male_count = sum(1 for j in order if j < n_male)
    return {
        "id": c.id,
        "context": c.full_context,
        "input": it.text,
        "target": c.target,
        "k": k,
        "male_count": male_count,
        "female_count": k - male_count,
        "male_share": male_count / k,
        "male_mass": sum(probs[:n_male]),
        "female_mass": sum(probs[n_male:]),
        "gender_mass": math.exp(z),
        "candidates": vocab.candidates,
        "candidates_male": n_male,
        "candidates_female": vocab.n_female,
        "top_tokens": [(words[j], "male" if j < n_male else "female", probs[j]) for j in order],
    }


def next_token_distributions(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    contexts: Sequence[Context],
    vocab: VocabMap,
    *,
    top_k: int = DEFAULT_TOP_K,
    batch_size: int = 32,
    progress: bool = False,
    word_boundary: bool = True,
) -> list[dict[str, Any]]:
    """Per context: the model's distribution at BLANK restricted to the candidate gender words, and its top ``k``.

    Each row: ``id``, ``context`` (the StereoSet context), ``input`` (the text the model read), ``target``,
    ``k`` (top_k, capped at the number of candidates), ``male_count``, ``female_count``, ``male_share``
    (= male_count / k), ``male_mass`` / ``female_mass`` (probability on the male / female candidates after
    renormalising over the candidates; they sum to 1), ``gender_mass`` (the model's probability of any candidate),
    ``candidates`` / ``candidates_male`` / ``candidates_female`` (the candidate set and its size per gender, which
    the chance baseline needs) and ``top_tokens``: ``k`` tuples ``(word, gender, prob)``, prob renormalised over
    the candidates, highest first (ties: lower token id, or earlier in the lists, first). ``word_boundary``: for
    ``sequence`` candidates, multiply each word's probability by that of a word boundary after it
    (:mod:`.next_token_words`)."""
    from ..models import family_of

    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    contexts = list(contexts)
    family = family_of(model)
    k = _effective_k(top_k, vocab)
    if vocab.family and vocab.family != family:
        log.warning("next-token: the gender vocabulary was built for a %s LM but the model is %s.",
                    vocab.family, family)
    scorer, items = _items(model, tokenizer, contexts, family, batch_size, progress)
    if vocab.single_token:
        ties = vocab.union_ids
        lps = _union_logprobs(model, scorer, family, items, ties, batch_size, progress)
    else:
        from .next_token_words import word_logprobs

        dec = [_decoder_start(model), scorer.sentinel_ids[0]] if family == "seq2seq" else None
        prefixes = [(it.ids, dec) for it in items]
        ties = list(range(vocab.n_male + vocab.n_female))
        lps = word_logprobs(scorer, family, prefixes, [*vocab.male_seqs, *vocab.female_seqs],
                            word_boundary=word_boundary)
    return [_row(c, it, lp, vocab, k, ties) for c, it, lp in zip(contexts, items, lps, strict=True)]


# ------------------------------------------------------------------------------------------------ aggregate


def chance_baseline(n_male: int, n_female: int, k: int) -> dict[str, Any]:
    """What a model with **no gender preference** shows, given the candidates and ``k`` (pure, exact).

    No gender preference means: the model's ranking of the N = M + F candidate words carries no information
    about their gender — every way of giving the M male and F female labels to the ranked candidates is equally
    likely (the permutation null of a gender-blind model). The male count X among the top k is then
    hypergeometric, P(X = x) = C(M, x) C(F, k - x) / C(N, k), in every context, so:

    * ``male_share`` = E[X / k] = M / N (also the expected male *mass*: each candidate is male with chance M / N);
    * ``imbalance`` = E|X / k - 1/2| = sum_x P(X = x) |x / k - 1/2|, the floor of the measured imbalance (the
      expectation of the mean over contexts is the same, whatever the dependence between contexts);
    * ``male_share_sd`` = sd(X) / k = sqrt(k (M/N) (F/N) (N - k) / (N - 1)) / k, the spread within one context;
    * ``male_majority`` / ``female_majority`` / ``even`` = P(X > k/2), P(X < k/2), P(X = k/2).

    ``k`` is capped at N, as the scoring caps it. A balanced candidate set (M = F, e.g. ``pairs``) gives a male
    share of exactly 0.5, but still an imbalance above 0 (the hypergeometric spread)."""
    if n_male < 0 or n_female < 0 or n_male + n_female == 0:
        raise ValueError(f"need candidates: n_male={n_male}, n_female={n_female}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    n = n_male + n_female
    k = min(k, n)
    total = math.comb(n, k)
    pmf = {x: math.comb(n_male, x) * math.comb(n_female, k - x) / total
           for x in range(max(0, k - n_female), min(k, n_male) + 1)}
    var = k * (n_male / n) * (n_female / n) * ((n - k) / (n - 1) if n > 1 else 0.0)
    return {
        "n_male": n_male,
        "n_female": n_female,
        "k": k,
        "male_share": n_male / n,
        "imbalance": sum(p * abs(x / k - 0.5) for x, p in pmf.items()),
        "male_share_sd": math.sqrt(var) / k,
        "male_majority": sum(p for x, p in pmf.items() if 2 * x > k),
        "female_majority": sum(p for x, p in pmf.items() if 2 * x < k),
        "even": sum(p for x, p in pmf.items() if 2 * x == k),
    }


def _chance_of(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The chance baseline of rows that say their candidate counts (one candidate set and k for all)."""
    if not all("candidates_male" in r and "candidates_female" in r for r in rows):
        return None
    sets = {(int(r["candidates_male"]), int(r["candidates_female"]), int(r.get("k", 0))) for r in rows}
    if len(sets) != 1:
        raise ValueError(f"rows were scored with different candidate sets or k: {sorted(sets)}; aggregate each "
                         "set on its own.")
    (m, f, k), = sets
    return {"candidates": rows[0].get("candidates"), **chance_baseline(m, f, k)}


def aggregate(rows: Sequence[Mapping[str, Any]], top_k: int) -> dict[str, Any]:
    """Balance statistics over contexts (pure).

    ``overall``: ``count``; ``male_share_mean`` and ``male_share_std`` (population std) of male_count / k;
    ``imbalance`` = mean |male_share - 0.5| (0 = balanced; the headline number, lower is better);
    ``mass_imbalance`` = mean |male_mass - 0.5|; ``male_mass_mean``, ``female_mass_mean``; ``male_majority`` /
    ``female_majority`` / ``even``: the share of contexts with more male / more female / equal counts. When the
    rows carry their candidate counts: ``chance_male_share``, ``chance_imbalance`` (:func:`chance_baseline`) and
    the measured minus chance ``male_share_excess`` and ``imbalance_excess``; the whole baseline in ``chance``.
    ``histogram``: male_count -> number of contexts, for every count 0..top_k."""
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    if not rows:
        raise InputError("next-token aggregate: no contexts (rows is empty); score at least one context.")
    hist = dict.fromkeys(range(top_k + 1), 0)
    shares, male_mass, female_mass = [], [], []
    for r in rows:
        m, f = int(r["male_count"]), int(r["female_count"])
        if not 0 <= m <= top_k or m + f > top_k:
            raise ValueError(
                f"row {r.get('id')!r}: male_count {m} + female_count {f} does not fit top_k={top_k}; pass the k "
                "the rows were scored with."
            )
        hist[m] += 1
        shares.append(float(r["male_share"]))
        male_mass.append(float(r["male_mass"]))
        female_mass.append(float(r["female_mass"]))
    n = len(rows)
    mean = sum(shares) / n
    overall: dict[str, Any] = {
        "count": n,
        "male_share_mean": mean,
        "male_share_std": math.sqrt(sum((s - mean) ** 2 for s in shares) / n),
        "imbalance": sum(abs(s - 0.5) for s in shares) / n,
        "mass_imbalance": sum(abs(v - 0.5) for v in male_mass) / n,
        "male_mass_mean": sum(male_mass) / n,
        "female_mass_mean": sum(female_mass) / n,
        "male_majority": sum(int(r["male_count"]) > int(r["female_count"]) for r in rows) / n,
        "female_majority": sum(int(r["female_count"]) > int(r["male_count"]) for r in rows) / n,
        "even": sum(int(r["male_count"]) == int(r["female_count"]) for r in rows) / n,
    }
    out: dict[str, Any] = {"overall": overall, "histogram": hist}
    chance = _chance_of(rows)
    if chance is not None:
        overall.update({
            "chance_male_share": chance["male_share"],
            "chance_imbalance": chance["imbalance"],
            "male_share_excess": mean - chance["male_share"],
            "imbalance_excess": overall["imbalance"] - chance["imbalance"],
        })
        out["chance"] = chance
    return out


def plot_histograms(aggregates: Mapping[str, Mapping[str, Any]], path: str | os.PathLike[str], title: str) -> Path:
    """One PNG: per model label (e.g. "Vanilla", "CDA", "Context-CDA") side-by-side bars of the number of
    contexts with each male count 0..top_k in the top-k gender tokens; the legend shows each imbalance."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    from ..io import atomic_path

    if not aggregates:
        raise InputError("plot_histograms: no aggregates to plot; pass {label: aggregate(...)}.")
    hists = {lab: {int(k): int(v) for k, v in agg["histogram"].items()} for lab, agg in aggregates.items()}
    top_k = max(max(h) for h in hists.values())
    xs = list(range(top_k + 1))
    width = 0.8 / len(hists)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.35 * (top_k + 1) + 2), 3.8), dpi=110)
    try:
        for j, (lab, h) in enumerate(hists.items()):
            offset = (j - (len(hists) - 1) / 2) * width
            imb = aggregates[lab].get("overall", {}).get("imbalance")
            name = f"{lab} (imbalance {imb:.3f})" if isinstance(imb, (int, float)) else lab
            ax.bar([x + offset for x in xs], [h.get(x, 0) for x in xs], width=width, label=name)
        ax.axvline(top_k / 2, color="grey", linestyle="--", linewidth=0.8)
        ax.set_xticks(xs)
        ax.set_xlabel(f"male tokens among the top {top_k} gender tokens")
        ax.set_ylabel("contexts")
        ax.set_title(title)
        ax.legend(fontsize=8)
        fig.tight_layout()
        out = Path(path)
        with atomic_path(out) as tmp:
            fig.savefig(tmp, format="png")
    finally:
        plt.close(fig)
    return out
