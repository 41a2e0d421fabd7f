"""Training corpora per arm, and the shared token budget that keeps the arms comparable.

A fine-tuning step's ``inputs`` are the validated tables and the target's filtered corpora (see the stage table,
:mod:`context_cda.stages`, and the run layout, :mod:`context_cda.layout`): ``cda`` (what validation kept of the
counterfactuals), ``augmented`` (what it kept of the augmented table) and ``filtered`` (the ``filter/<target>``
folder). Each arm reads one of them:

* ``cda``: the validated counterfactuals; what a CDA-trained model sees follows ``cda.mode``
  (:func:`context_cda.cda.training_rows`: two-sided = originals + changed counterfactuals);
* ``context-cda``: ``filter/<target>/k<train.k>/corpus.parquet`` (column ``text``), the semantic-entropy
  filtered contextual counterfactuals for this target model;
* ``context-cda-k<K>``: the same with another k (ablation: k20, k40);
* ``context-cda-nofilter``: the validated augmented table (column ``augmented``), nothing filtered;
* ``dropout``: the originals of the validated counterfactual table (the corpus as it is), trained with raised
  dropout (:func:`context_cda.train.finetune.dropout_overrides`), as bias-bench's dropout debiasing.
* ``context-neutral``: the validated neutral rewrites (the ``neutral`` step's table, column ``augmented``): the
  generator's gender-neutral rewrite of each original, reviewed (no gendered word left, nothing else changed);
* ``cda-neutral``: its lexicon-only baseline, computed here from the validated counterfactuals' originals
  (:class:`~context_cda.cda.neutral.NeutralRewriter`; sentences with a gendered word it cannot rewrite are left
  out and counted in the step's log).

An explicit ``corpus`` input (``ccda finetune --input``) replaces the arm's table. Every arm is trained on the
same number of tokens (``train.token_budget``; null: the smallest arm's count), taken from a seeded shuffle of its
texts, so the arms differ only in *what* they see.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .. import schemas as S
from ..arms import corpus_input
from ..arms import parse as parse_arm
from ..errors import InputError
from ..io import read_table, require_columns, stable_id
from ..layout import filtered_in

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..config import Config


def arm_corpus(inputs: Mapping[str, Path | str], arm: str, default_k: float) -> tuple[str, Path]:
    """(kind, table) that ``arm`` trains on: kind ``cda`` (a counterfactual table), ``original`` (its originals
    only: the dropout arm), ``cda-neutral`` (one to be rewritten neutrally) or ``corpus`` (a text table)."""
    spec = parse_arm(arm, default_k)
    if not spec.trained:
        raise InputError(f"finetune {arm}: {arm} is not fine-tuned (a {spec.kind} arm, applied to the vanilla model "
                         "by the evaluate step); fine-tune one of the trained arms.")
    k = spec.k
    if "corpus" in inputs:
        return "corpus", Path(inputs["corpus"])
    need = corpus_input(arm, default_k)
    if need not in inputs:
        hint = " (the neutral step runs when train.arms holds context-neutral)" if need == "neutral" else ""
        raise InputError(
            f"finetune {arm}: inputs need {need!r} (the stage table's finetune inputs: cda, augmented, filtered, "
            f"neutral){hint} or an explicit 'corpus'; got {', '.join(inputs) or 'nothing'}."
        )
    if k is not None:
        return "corpus", filtered_in(inputs["filtered"], k)
    return (spec.corpus if need == "cda" else "corpus"), Path(inputs[need])


def load_arm_rows(kind: str, path: Path, cda_mode: str = "two-sided", lexicon=None, config=None) -> pd.DataFrame:
    """The rows an arm may train on: ``id`` (of the source row; a hash of the text for a table without ids),
    ``text`` and ``side``, empty texts dropped. ``lexicon``: the ``lexicon`` config section (``cda-neutral``);
    ``config``: the run's config, whose evaluation items the cda-neutral rewrites are checked against
    (:mod:`context_cda.evaluate.decontam`; the rows left out are in ``rows.attrs["left_out"]``)."""
    import pandas as pd

    df = read_table(path)
    if S.ID not in df.columns:  # a user's own table (ccda finetune --input): ids from the text
        first = S.ORIGINAL if kind in ("cda", "original") else S.TEXT if S.TEXT in df.columns else S.AUGMENTED
        df = df.assign(**{S.ID: [stable_id("row", t) for t in df.get(first, [None] * len(df))]})
    if kind == "cda":
        from ..cda import training_rows

        require_columns(df, {S.ORIGINAL: "text", S.COUNTERFACTUAL: "text"}, path)
        rows = training_rows(df, cda_mode)
    elif kind == "cda-neutral":
        require_columns(df, {S.ORIGINAL: "text"}, path)
        rows = _lexicon_neutral_rows(df, lexicon, config)
    elif kind == "original":  # the dropout arm: the corpus as it is, no counterfactual
        require_columns(df, {S.ORIGINAL: "text"}, path)
        rows = pd.DataFrame({S.ID: df[S.ID].astype(str), S.TEXT: df[S.ORIGINAL], "side": "original"})
        rows = rows.drop_duplicates(S.TEXT)
    else:
        col = S.TEXT if S.TEXT in df.columns else S.AUGMENTED if S.AUGMENTED in df.columns else None
        if col is None:
            raise InputError(
                f"{path}: needs a {S.TEXT!r} (filtered corpus) or {S.AUGMENTED!r} (augmented) column; found "
                f"{', '.join(map(str, df.columns))}."
            )
        require_columns(df, {col: "text"}, path)
        rows = pd.DataFrame({S.ID: df[S.ID].astype(str), S.TEXT: df[col], "side": col})
    left_out = rows.attrs.get("left_out", [])
    rows = rows[rows[S.TEXT].notna()].assign(**{S.TEXT: lambda d: d[S.TEXT].astype(str).str.strip()})
    rows = rows[rows[S.TEXT] != ""].reset_index(drop=True)
    if rows.empty:
        raise InputError(f"{path}: no training text (0 non-empty rows).")
    rows.attrs["left_out"] = left_out
    return rows


def _lexicon_neutral_rows(df, lexicon, config=None) -> pd.DataFrame:
    """The cda-neutral arm: each distinct original rewritten by the lexicon. Left out (``attrs["left_out"]``: id,
    text, reason; logged): rewrites that kept a gendered word (``gendered-word-left``) and, with ``config``, those
    holding an evaluation item (``eval-overlap: ...``)."""
    import logging

    import pandas as pd

    from ..cda.lexicon import load_lexicon
    from ..cda.neutral import NeutralRewriter
    from ..config import LexiconConfig

    rewriter = NeutralRewriter(load_lexicon(lexicon or LexiconConfig()))
    firsts = df.drop_duplicates(S.ORIGINAL)
    out, left = [], []
    for rid, text in zip(firsts[S.ID].astype(str), firsts[S.ORIGINAL], strict=True):
        res = rewriter.rewrite(str(text))
        if res.left or not res.swaps:
            left.append({S.ID: rid, S.TEXT: res.text, S.REASON: "gendered-word-left" if res.left
                         else "no-swappable-term"})
            continue
        out.append({S.ID: rid, S.TEXT: res.text, "side": "neutral"})
    rows = pd.DataFrame(out, columns=[S.ID, S.TEXT, "side"])
    overlaps: dict[str, int] = {}
    if config is not None:
        from ..evaluate.decontam import drop_overlaps

        rows, rejected, overlaps = drop_overlaps(config, rows, S.TEXT, pd.DataFrame(columns=[S.ID, S.TEXT, S.REASON]))
        left += rejected[[S.ID, S.TEXT, S.REASON]].to_dict("records")
    if left:
        logging.getLogger(__name__).warning("cda-neutral: %d of %d sentences left out (%d kept a gendered word the "
                                            "lexicon cannot rewrite, %d hold an evaluation item)", len(left),
                                            len(firsts), len(left) - sum(overlaps.values()), sum(overlaps.values()))
    rows.attrs["left_out"] = left
    return rows


def tokenize_texts(tokenizer, texts: Sequence[str], max_len: int, family: str) -> list[dict[str, list[int]]]:
    """Token ids (and word ids, for whole-word masking) per text, truncated to ``max_len``.

    Causal models get the tokenizer's EOS appended (when it does not add one itself) so a sentence boundary is
    learnt; masked and seq2seq models keep the tokenizer's own special tokens.
    """
    enc = tokenizer(list(texts), truncation=True, max_length=max_len, add_special_tokens=True)
    out: list[dict[str, list[int]]] = []
    eos = tokenizer.eos_token_id
    for i, ids in enumerate(enc["input_ids"]):
        ids = list(ids)
        try:
            words = enc.word_ids(i)
        except (ValueError, AttributeError):  # slow tokenizers: no word alignment
            words = None
        if family == "causal" and eos is not None and (not ids or ids[-1] != eos):
            ids = ids[: max_len - 1] + [eos]
            if words is not None:
                words = list(words[: max_len - 1]) + [None]
        row: dict[str, list[int]] = {"input_ids": ids}
        if words is not None:
            row["word_ids"] = [-1 if w is None else int(w) for w in words]
        if len(ids) >= 2:
            out.append(row)
    return out


def apply_token_budget(
    examples: list[dict[str, list[int]]], budget: int | None, seed: int
) -> tuple[list[dict[str, list[int]]], int]:
    """Seeded shuffle, then keep examples until ``budget`` tokens (the last one truncated to hit it exactly).

    Returns the kept examples (in shuffled order) and their token count.
    """
    import numpy as np

    order = np.random.default_rng(seed).permutation(len(examples))
    kept: list[dict[str, list[int]]] = []
    total = 0
    for i in order:
        ex = examples[int(i)]
        n = len(ex["input_ids"])
        if budget is not None and total + n > budget:
            room = budget - total
            if room >= 2:
                kept.append({k: v[:room] for k, v in ex.items()})
                total += room
            break
        kept.append(ex)
        total += n
    return kept, total


def count_tokens(examples: Sequence[Mapping[str, Sequence[int]]]) -> int:
    return sum(len(ex["input_ids"]) for ex in examples)


def arm_token_count(config: Config, kind: str, path: Path, tokenizer, family: str) -> int:
    rows = load_arm_rows(kind, path, config.cda.mode, config.lexicon, config)
    return count_tokens(tokenize_texts(tokenizer, rows["text"].tolist(), config.train.max_seq_len, family))
