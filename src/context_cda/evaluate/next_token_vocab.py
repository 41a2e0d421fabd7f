"""The candidate gender words of the next-token analysis in one tokenizer (:func:`gender_vocab`).

Every word is spelled as it appears mid-sentence (after a space): ``"Ġhe"`` in byte-level BPE, ``"he"`` in
WordPiece, ``"▁he"`` in SentencePiece. Three candidate sets (``evaluate.next_token.candidates``):

* ``pairs`` (default): the (male, female) counterpart pairs of the aligned word lists whose *both* sides are one
  token; every family. Male and female candidates come in matched pairs, so the chance share is (close to) 0.5.
* ``single``: every word that is one token, whatever its counterpart (the male and female counts differ by
  tokenizer: SmolLM2 keeps 86 male and 62 female Zhao et al. words).
* ``sequence``: every word, as its full token sequence, scored by the chain rule over its tokens (causal and
  seq2seq LMs; :mod:`.next_token_words`). A masked LM predicts one token at one mask, so it has no probability
  for a several-token word there: it takes ``pairs`` or ``single``.

Only the tokenizer decides the spelling, never the model name.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..errors import InputError, ModelError

if TYPE_CHECKING:  # pragma: no cover
    from transformers import PreTrainedTokenizerBase

    from .gender_words import GenderWords

log = logging.getLogger("context_cda.evaluate.next_token")

GENDERS = ("male", "female")
CANDIDATES = ("pairs", "single", "sequence")
Candidates = Literal["pairs", "single", "sequence"]
_ANCHOR = "the"  # a word every tokenizer knows; gender words are encoded after it (see _mid_sentence_ids)


@dataclass
class VocabMap:
    """The candidate gender words of a tokenizer: per gender the words and their token-id sequences (one id each
    for ``pairs`` and ``single``), in word-list order.

    Left out, per gender: ``dropped`` (several tokens, for ``pairs`` and ``single``), ``unknown`` (the unknown or a
    special token), ``collisions`` (``"word=kept"``: an earlier word has the same tokens), ``unpaired`` (``pairs``:
    one token, but no counterpart of one token); ``shared``: ``"male/female"`` words with the same tokens in both
    genders (dropped from both)."""

    male_words: list[str]
    female_words: list[str]
    male_seqs: list[tuple[int, ...]]
    female_seqs: list[tuple[int, ...]]
    dropped: dict[str, list[str]]
    unknown: dict[str, list[str]] = field(default_factory=dict)
    collisions: dict[str, list[str]] = field(default_factory=dict)
    unpaired: dict[str, list[str]] = field(default_factory=dict)
    shared: list[str] = field(default_factory=list)
    family: str = ""
    candidates: str = "single"

    @property
    def single_token(self) -> bool:
        return all(len(s) == 1 for s in (*self.male_seqs, *self.female_seqs))

    def _ids(self, seqs: list[tuple[int, ...]]) -> list[int]:
        if not self.single_token:
            raise ValueError("sequence candidates have no single token ids; read male_seqs / female_seqs.")
        return [s[0] for s in seqs]

    @property
    def male_ids(self) -> list[int]:
        return self._ids(self.male_seqs)

    @property
    def female_ids(self) -> list[int]:
        return self._ids(self.female_seqs)

    @property
    def union_ids(self) -> list[int]:
        return [*self.male_ids, *self.female_ids]

    @property
    def n_male(self) -> int:
        return len(self.male_seqs)

    @property
    def n_female(self) -> int:
        return len(self.female_seqs)

    @property
    def word_of(self) -> dict[int, str]:
        return {**dict(zip(self.male_ids, self.male_words, strict=True)),
                **dict(zip(self.female_ids, self.female_words, strict=True))}

    @property
    def gender_of(self) -> dict[int, str]:
        return {**dict.fromkeys(self.male_ids, "male"), **dict.fromkeys(self.female_ids, "female")}

    def summary(self) -> dict[str, Any]:
        """Counts for a manifest or a report: candidates per gender and why the other words were left out."""
        out: dict[str, Any] = {"candidates": self.candidates}
        for g in GENDERS:
            out[f"{g}_candidates"] = len(getattr(self, f"{g}_seqs"))
            out[f"{g}_single_token"] = sum(len(s) == 1 for s in getattr(self, f"{g}_seqs"))
            out[f"{g}_multi_token"] = len(self.dropped.get(g, []))
            out[f"{g}_unknown"] = len(self.unknown.get(g, []))
            out[f"{g}_collisions"] = len(self.collisions.get(g, []))
            out[f"{g}_unpaired"] = len(self.unpaired.get(g, []))
        out["shared"] = len(self.shared)
        return out


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


def _candidates_of(
    tokenizer: PreTrainedTokenizerBase, words: tuple[str, ...], multi: bool, gender: str, out: dict[str, Any]
) -> dict[tuple[int, ...], str]:
    """{token ids: word} of the usable words of one gender; the others go to ``out``'s lists with the reason."""
    anchor_ids = _encode(tokenizer, _ANCHOR)
    unk = tokenizer.unk_token_id
    specials = set(getattr(tokenizer, "all_special_ids", []) or [])
    kept: dict[tuple[int, ...], str] = {}
    for w in words:
        ids = tuple(_mid_sentence_ids(tokenizer, w, anchor_ids))
        if len(ids) != 1 and not multi:
            out["dropped"][gender].append(w)
        elif not ids or any((unk is not None and t == unk) or t in specials for t in ids):
            out["unknown"][gender].append(w)
        elif ids in kept:
            out["collisions"][gender].append(f"{w}={kept[ids]}")
        else:
            kept[ids] = w
    return kept


def _keep_pairs(
    kept: dict[str, dict[tuple[int, ...], str]], pairs: tuple[tuple[str, str], ...], out: dict[str, Any]
) -> dict[str, dict[tuple[int, ...], str]]:
    """Only the words of a pair whose both sides are candidates; the rest: unpaired."""
    seq_of = {g: {w: s for s, w in kept[g].items()} for g in GENDERS}
    paired: dict[str, set[str]] = {g: set() for g in GENDERS}
    for m, f in pairs:
        if m in seq_of["male"] and f in seq_of["female"]:
            paired["male"].add(m)
            paired["female"].add(f)
    for g in GENDERS:
        out["unpaired"][g] = [w for w in kept[g].values() if w not in paired[g]]
    return {g: {s: w for s, w in kept[g].items() if w in paired[g]} for g in GENDERS}


_WARNED: set[tuple] = set()


def gender_vocab(
    tokenizer: PreTrainedTokenizerBase, words: GenderWords, family: str, candidates: Candidates = "pairs"
) -> VocabMap:
    """The candidate gender words of ``tokenizer`` (see the module docstring and :class:`VocabMap`).

    All three families see a word in its mid-sentence spelling: a causal LM predicts it after "... was", a masked
    LM at a mask between words, T5 as the first tokens of the sentinel span. Words that take several tokens
    (``pairs``/``single``) or hold the unknown token are left out; two words on the same tokens keep the first; the
    same tokens in both genders are dropped from both."""
    if family not in ("masked", "causal", "seq2seq"):
        raise ValueError(f"family must be masked, causal or seq2seq, got {family!r}")
    if candidates not in CANDIDATES:
        raise ValueError(f"candidates must be one of {', '.join(CANDIDATES)}, got {candidates!r}")
    if candidates == "sequence" and family == "masked":
        raise ModelError(
            "next-token: a masked LM predicts one token at the mask, so several-token words have no probability "
            "there; set evaluate.next_token.candidates to pairs (default) or single for masked LMs."
        )
    if not words.male or not words.female:
        raise InputError(f"{words.source}: the male and the female word lists must both be non-empty.")
    if candidates == "pairs" and not words.pairs:
        raise InputError(
            f"{words.source}: candidates 'pairs' needs word lists aligned line by line (line i of the male file "
            "the counterpart of line i of the female file); these are not. Use candidates 'single' or 'sequence'."
        )
    out: dict[str, Any] = {k: {g: [] for g in GENDERS} for k in ("dropped", "unknown", "collisions", "unpaired")}
    multi = candidates == "sequence"
    kept = {g: _candidates_of(tokenizer, getattr(words, g), multi, g, out) for g in GENDERS}
    both = set(kept["male"]) & set(kept["female"])
    shared = [f"{kept['male'][s]}/{kept['female'][s]}" for s in kept["male"] if s in both]
    said = (getattr(tokenizer, "name_or_path", ""), family, candidates, tuple(shared))
    if shared and said not in _WARNED:  # once per tokenizer: every evaluation builds the same map
        _WARNED.add(said)
        log.warning("gender_vocab: %d token sequence(s) are both male and female words, dropped: %s", len(shared),
                    ", ".join(shared))
    kept = {g: {s: w for s, w in kept[g].items() if s not in both} for g in GENDERS}
    if candidates == "pairs":
        kept = _keep_pairs(kept, words.pairs, out)
    final = {g: list(kept[g].items()) for g in GENDERS}
    vm = VocabMap(
        male_words=[w for _, w in final["male"]], female_words=[w for _, w in final["female"]],
        male_seqs=[s for s, _ in final["male"]], female_seqs=[s for s, _ in final["female"]],
        dropped=out["dropped"], unknown=out["unknown"], collisions=out["collisions"], unpaired=out["unpaired"],
        shared=shared, family=family, candidates=candidates,
    )
    log.debug("gender_vocab: %s", vm.summary())  # in every next-token aggregate ("vocab"), not the log
    return vm
