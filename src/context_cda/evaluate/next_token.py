"""Next-token gender distribution (paper §4.4): which gender words does a model expect at StereoSet's BLANK?

For every StereoSet gender context the model's distribution over the token at BLANK is restricted to a gender
word list (Zhao et al. 2018: 222 male and 222 female words), and the top ``k`` (20) of those tokens are counted by
gender. A model whose top-``k`` lists hold as many female as male words in every context is balanced; the
headline number is the *imbalance*, the mean over contexts of ``|male_share - 0.5|`` (0 = balanced, lower is
better). Histograms of the male count per context compare vanilla, CDA and Context-CDA models.

How each family reads "the token at BLANK" (the family comes from the model's class, never its name):

* causal: the text before BLANK (trailing space stripped) is the context; the distribution of the next token
  after its last position. BOS follows our scorers: a tokenizer that adds BOS by itself keeps it, and an empty
  context (BLANK first) is conditioned on the start token (BOS, else EOS).
* masked: the full context with BLANK replaced by the tokenizer's mask token; the distribution at the mask.
* seq2seq (T5): encoder input = the context with BLANK replaced by the first sentinel (``<extra_id_0>``), decoder
  input = ``[decoder_start, <extra_id_0>]``; the distribution of the next decoder token (the span's first token).

Gender words count only when the tokenizer spells them as ONE token in the mid-sentence form (``"Ġhe"`` in
byte-level BPE, ``"he"`` in WordPiece, ``"▁he"`` in SentencePiece); :func:`gender_vocab` reports the rest.

Probabilities: a full-vocabulary log-softmax (float32) at the position, then renormalised over the gender
vocabulary (male ∪ female token ids): ranking is the same, and ``male_mass + female_mass = 1``. Ties are broken by
token id, so results are deterministic; batched results equal one-at-a-time ones.

``score`` (:func:`next_token_distributions`, needs a model, returns per-context rows) is separate from
:func:`aggregate` (pure). torch, transformers, numpy and matplotlib are imported inside the functions.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InputError, ModelError
from .data import download as _download  # a module global, so tests can replace it to stay offline
from .data import fetch

if TYPE_CHECKING:  # pragma: no cover
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from .data import StereoSetExample

log = logging.getLogger(__name__)

GENDER_WORDS_URLS = {
    "male": "https://raw.githubusercontent.com/uclanlp/gn_glove/master/wordlist/male_word_file.txt",
    "female": "https://raw.githubusercontent.com/uclanlp/gn_glove/master/wordlist/female_word_file.txt",
}
GENDER_WORDS_FILES = {"male": "male_word_file.txt", "female": "female_word_file.txt"}
GENDER_WORDS_CACHE = "gn_glove"  # sub-folder of the data cache
GENDERS = ("male", "female")
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
}
_ANCHOR = "the"  # a word every tokenizer knows; gender words are encoded after it (see gender_vocab)


# ------------------------------------------------------------------------------------------------ word lists


@dataclass(frozen=True)
class GenderWords:
    """Male and female word lists (deduplicated, disjoint). ``removed``: words listed under both genders
    (dropped from both); ``duplicates``: repeated entries dropped within a list."""

    male: tuple[str, ...]
    female: tuple[str, ...]
    source: str
    removed: tuple[str, ...] = ()
    duplicates: tuple[str, ...] = ()


def _read_words(path: Path) -> list[str]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError as e:
        raise InputError(f"{path}: word-list file not found.") from e
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text ({e.reason}); expected one word per line.") from e
    return [w.strip() for w in lines if w.strip() and not w.lstrip().startswith("#")]


def load_gender_words(path: str | os.PathLike[str] | None = None, cache: str | None = None) -> GenderWords:
    """The Zhao et al. (2018) gender word lists.

    ``path``: a folder holding ``male_word_file.txt`` and ``female_word_file.txt`` (one word per line). Without
    it the files are read from the data cache (:func:`context_cda.evaluate.data.data_cache_dir`, sub-folder
    ``gn_glove``), downloaded from uclanlp/gn_glove on first use. Repeated words are kept once; words listed under
    both genders are dropped from both (and reported in ``removed``)."""
    from .data import data_cache_dir

    if path is not None:
        folder = Path(path).expanduser()
        if not folder.is_dir():
            raise InputError(
                f"{folder}: not a folder. Pass the folder that holds {GENDER_WORDS_FILES['male']} and "
                f"{GENDER_WORDS_FILES['female']} (Zhao et al. 2018, uclanlp/gn_glove wordlist/)."
            )
        files = {g: folder / name for g, name in GENDER_WORDS_FILES.items()}
        missing = [str(p) for p in files.values() if not p.is_file()]
        if missing:
            raise InputError(
                f"{', '.join(missing)}: word-list file not found. The folder must hold "
                f"{GENDER_WORDS_FILES['male']} and {GENDER_WORDS_FILES['female']} (one word per line)."
            )
        source = str(folder)
    else:
        folder = data_cache_dir(cache) / GENDER_WORDS_CACHE
        files = {g: folder / name for g, name in GENDER_WORDS_FILES.items()}
        hint = f"Pass the folder holding {GENDER_WORDS_FILES['male']} and {GENDER_WORDS_FILES['female']} as path="
        for g, dest in files.items():
            fetch(GENDER_WORDS_URLS[g], dest, what="gender word list", hint=hint, download_fn=_download)
        source = f"{GENDER_WORDS_URLS['male'].rsplit('/', 1)[0]} (cached in {folder})"

    lists: dict[str, list[str]] = {}
    dups: list[str] = []
    for g, p in files.items():
        words = _read_words(p)
        if not words:
            raise InputError(f"{p}: empty word list; expected one {g} word per line.")
        seen: set[str] = set()
        kept = []
        for w in words:
            if w in seen:
                dups.append(w)
                continue
            seen.add(w)
            kept.append(w)
        lists[g] = kept
    both = set(lists["male"]) & set(lists["female"])
    removed = tuple(w for w in lists["male"] if w in both)
    if removed:
        log.warning("%s: %d word(s) listed as both male and female, dropped: %s", source, len(removed),
                    ", ".join(removed))
    male = tuple(w for w in lists["male"] if w not in both)
    female = tuple(w for w in lists["female"] if w not in both)
    for g, ws in (("male", male), ("female", female)):
        if not ws:
            raise InputError(f"{files[g]}: no {g} words left after dropping words listed under both genders.")
    return GenderWords(male=male, female=female, source=source, removed=removed, duplicates=tuple(dups))


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


# ------------------------------------------------------------------------------------------------ vocabulary


@dataclass
class VocabMap:
    """Gender words that are ONE token in a tokenizer, in their mid-sentence form.

    ``dropped``: per gender, words that take several tokens; ``unknown``: words the tokenizer maps to its unknown
    token; ``collisions``: per gender, ``"word=kept"`` for words whose token an earlier word already holds;
    ``shared``: ``"male/female"`` word pairs whose single token is the same (dropped from both genders)."""

    male_ids: list[int]
    female_ids: list[int]
    male_words: list[str]
    female_words: list[str]
    dropped: dict[str, list[str]]
    unknown: dict[str, list[str]] = field(default_factory=dict)
    collisions: dict[str, list[str]] = field(default_factory=dict)
    shared: list[str] = field(default_factory=list)
    family: str = ""

    @property
    def union_ids(self) -> list[int]:
        return [*self.male_ids, *self.female_ids]

    @property
    def word_of(self) -> dict[int, str]:
        return {
            **dict(zip(self.male_ids, self.male_words, strict=True)),
            **dict(zip(self.female_ids, self.female_words, strict=True)),
        }

    @property
    def gender_of(self) -> dict[int, str]:
        return {**dict.fromkeys(self.male_ids, "male"), **dict.fromkeys(self.female_ids, "female")}

    def summary(self) -> dict[str, Any]:
        """Counts for a manifest or a report: single-token words per gender and why the others were left out."""
        return {
            "male_single_token": len(self.male_ids),
            "female_single_token": len(self.female_ids),
            "male_multi_token": len(self.dropped.get("male", [])),
            "female_multi_token": len(self.dropped.get("female", [])),
            "male_unknown": len(self.unknown.get("male", [])),
            "female_unknown": len(self.unknown.get("female", [])),
            "male_collisions": len(self.collisions.get("male", [])),
            "female_collisions": len(self.collisions.get("female", [])),
            "shared": len(self.shared),
        }


def _encode(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    return [int(i) for i in tokenizer(text, add_special_tokens=False)["input_ids"]]


def _mid_sentence_ids(tokenizer: PreTrainedTokenizerBase, word: str, anchor_ids: list[int]) -> list[int]:
    """The token ids of ``word`` as it appears after a space mid-sentence.

    The word is encoded after an anchor word ("the word") and the anchor's ids are removed: this gives
    ``"Ġword"`` for byte-level BPE (GPT-2, Llama-3, SmolLM2), ``"word"`` (lowercased when the tokenizer
    lowercases) for WordPiece, and ``"▁word"`` for SentencePiece (T5, Llama-2, Gemma) without the stray ``"▁"``
    that encoding ``" word"`` alone gives some SentencePiece tokenizers. Whitespace is a pre-tokenisation
    boundary in all of them, so the anchor never merges with the word."""
    full = _encode(tokenizer, f"{_ANCHOR} {word}")
    if full[: len(anchor_ids)] == anchor_ids and len(full) > len(anchor_ids):
        return full[len(anchor_ids) :]
    return _encode(tokenizer, f" {word}")  # pragma: no cover - a tokenizer that merges across spaces


def gender_vocab(tokenizer: PreTrainedTokenizerBase, words: GenderWords, family: str) -> VocabMap:
    """Map gender words to single token ids of ``tokenizer`` (see :class:`VocabMap`).

    All three families see the word in its mid-sentence spelling (after a space): a causal LM predicts it after
    "... was", a masked LM at a mask between words, T5 as the first token of the sentinel span. Only the
    tokenizer decides the spelling, never the model name. Words that take several tokens, or the unknown token,
    are left out; two words on one token keep the first; a token that is both male and female is dropped."""
    if family not in ("masked", "causal", "seq2seq"):
        raise ValueError(f"family must be masked, causal or seq2seq, got {family!r}")
    if not words.male or not words.female:
        raise InputError(f"{words.source}: the male and the female word lists must both be non-empty.")
    anchor_ids = _encode(tokenizer, _ANCHOR)
    unk = tokenizer.unk_token_id
    specials = set(getattr(tokenizer, "all_special_ids", []) or [])
    kept: dict[str, dict[int, str]] = {g: {} for g in GENDERS}
    dropped: dict[str, list[str]] = {g: [] for g in GENDERS}
    unknown: dict[str, list[str]] = {g: [] for g in GENDERS}
    collisions: dict[str, list[str]] = {g: [] for g in GENDERS}
    for g, ws in (("male", words.male), ("female", words.female)):
        for w in ws:
            ids = _mid_sentence_ids(tokenizer, w, anchor_ids)
            if len(ids) != 1:
                dropped[g].append(w)
                continue
            tid = ids[0]
            if (unk is not None and tid == unk) or tid in specials:
                unknown[g].append(w)
                continue
            if tid in kept[g]:
                collisions[g].append(f"{w}={kept[g][tid]}")
                continue
            kept[g][tid] = w
    both = set(kept["male"]) & set(kept["female"])
    shared = [f"{kept['male'][t]}/{kept['female'][t]}" for t in kept["male"] if t in both]
    if shared:
        log.warning("gender_vocab: %d token(s) are both male and female words, dropped: %s", len(shared),
                    ", ".join(shared))
    vm = VocabMap(
        male_ids=[t for t in kept["male"] if t not in both],
        female_ids=[t for t in kept["female"] if t not in both],
        male_words=[w for t, w in kept["male"].items() if t not in both],
        female_words=[w for t, w in kept["female"].items() if t not in both],
        dropped=dropped,
        unknown=unknown,
        collisions=collisions,
        shared=shared,
        family=family,
    )
    log.info("gender_vocab: %s", vm.summary())
    return vm


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
    n = len(vocab.male_ids) + len(vocab.female_ids)
    if n == 0:
        raise ModelError(
            "No gender word is a single token in this tokenizer (gender_vocab kept none); check the word lists "
            "and that the tokenizer belongs to the model."
        )
    if not vocab.male_ids or not vocab.female_ids:
        log.warning("next-token: only %s words are single tokens; the counts cannot be balanced.",
                    "male" if vocab.male_ids else "female")
    if n < top_k:
        log.warning("next-token: only %d single-token gender words (%d male, %d female) < top_k=%d; using top %d.",
                    n, len(vocab.male_ids), len(vocab.female_ids), top_k, n)
        return n
    return top_k


def next_token_distributions(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    contexts: Sequence[Context],
    vocab: VocabMap,
    *,
    top_k: int = DEFAULT_TOP_K,
    batch_size: int = 32,
    progress: bool = False,
) -> list[dict[str, Any]]:
    """Per context: the model's distribution at BLANK restricted to the gender vocabulary, and its top ``k``.

    Each row: ``id``, ``context`` (the StereoSet context), ``input`` (the text the model read), ``target``,
    ``k`` (top_k, capped at the gender vocabulary size), ``male_count``, ``female_count``, ``male_share``
    (= male_count / k), ``male_mass`` / ``female_mass`` (probability on the male / female tokens after
    renormalising over the gender vocabulary; they sum to 1), ``gender_mass`` (the full-vocabulary probability of
    any listed gender token) and ``top_tokens``: ``k`` tuples ``(word, gender, prob)``, prob renormalised over the
    gender vocabulary, highest first (ties: lower token id first)."""
    from ..models import family_of
    from ..scoring import scorer_for

    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    contexts = list(contexts)
    family = family_of(model)
    k = _effective_k(top_k, vocab)
    if vocab.family and vocab.family != family:
        log.warning("next-token: the gender vocabulary was built for a %s LM but the model is %s.",
                    vocab.family, family)
    if family == "masked":
        items = _masked_items(model, tokenizer, contexts)  # checks the mask token before the scorer does
    scorer = scorer_for(model, tokenizer, batch_size=batch_size, progress=progress)
    if family == "causal":
        items = _causal_items(scorer, tokenizer, contexts)
    elif family == "seq2seq":
        items = _seq2seq_items(scorer, tokenizer, contexts)
    union = vocab.union_ids
    n_male = len(vocab.male_ids)
    words = [*vocab.male_words, *vocab.female_words]
    lps = _union_logprobs(model, scorer, family, items, union, batch_size, progress)
    rows = []
    for c, it, lp in zip(contexts, items, lps, strict=True):
        top = max(lp)
        z = top + math.log(sum(math.exp(v - top) for v in lp))  # log of the full-vocab mass on the union
        probs = [math.exp(v - z) for v in lp]
        order = sorted(range(len(union)), key=lambda j: (-lp[j], union[j]))[:k]
        male_count = sum(1 for j in order if j < n_male)
        rows.append(
            {
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
                "top_tokens": [(words[j], "male" if j < n_male else "female", probs[j]) for j in order],
            }
        )
    return rows


# ------------------------------------------------------------------------------------------------ aggregate


def aggregate(rows: Sequence[Mapping[str, Any]], top_k: int) -> dict[str, Any]:
    """Balance statistics over contexts (pure).

    ``overall``: ``count``; ``male_share_mean`` and ``male_share_std`` (population std) of male_count / k;
    ``imbalance`` = mean |male_share - 0.5| (0 = balanced; the headline number, lower is better);
    ``mass_imbalance`` = mean |male_mass - 0.5|; ``male_mass_mean``, ``female_mass_mean``; ``male_majority`` /
    ``female_majority`` / ``even``: the share of contexts with more male / more female / equal counts.
    ``histogram``: male_count -> number of contexts, for every count 0..top_k."""
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    if not rows:
        raise InputError("next-token aggregate: no contexts (rows is empty); score at least one context.")
    hist = dict.fromkeys(range(top_k + 1), 0)
    shares, male_mass, female_mass = [], [], []
    more_m = more_f = even = 0
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
        more_m += m > f
        more_f += f > m
        even += m == f
    n = len(rows)
    mean = sum(shares) / n
    return {
        "overall": {
            "count": n,
            "male_share_mean": mean,
            "male_share_std": math.sqrt(sum((s - mean) ** 2 for s in shares) / n),
            "imbalance": sum(abs(s - 0.5) for s in shares) / n,
            "mass_imbalance": sum(abs(v - 0.5) for v in male_mass) / n,
            "male_mass_mean": sum(male_mass) / n,
            "female_mass_mean": sum(female_mass) / n,
            "male_majority": more_m / n,
            "female_majority": more_f / n,
            "even": even / n,
        },
        "histogram": hist,
    }


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
