"""Training corpora per arm, and the shared token budget that keeps the arms comparable.

Arms and where their text comes from (``run_dir`` = ``config.run.run_dir``):

* ``cda``: ``cda/counterfactuals.parquet``. Two-sided (the paper): every ``original`` plus every counterfactual
  that differs from its original; one-sided and cds: the ``counterfactual`` column only.
* ``context-cda``: ``filter/<target>/k<train.k>/corpus.parquet`` (column ``text``), the semantic-entropy
  filtered contextual counterfactuals for this target model.
* ``context-cda-k<K>``: the same with another k (ablation: k20, k40).
* ``context-cda-nofilter``: ``augment/augmented.parquet`` (column ``augmented``), nothing filtered.

Every arm is trained on the same number of tokens (``train.token_budget``; null: the smallest arm's count), taken
from a seeded shuffle of its texts, so the arms differ only in *what* they see.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .. import schemas as S
from ..errors import ConfigError, InputError
from ..io import read_table, require_columns

if TYPE_CHECKING:  # pragma: no cover
    from ..config import Config

ARM_PATTERN = re.compile(r"^(cda|context-cda|context-cda-nofilter|context-cda-k(\d+(?:\.\d+)?))$")


def k_dirname(k: float) -> str:
    """Folder name of a filtered corpus: 30.0 -> ``k30``, 12.5 -> ``k12.5``."""
    return f"k{float(k):g}"


def arm_inputs(config: Config, target: str, arm: str, run_dir: Path | str | None = None) -> dict[str, Path]:
    """The ``inputs`` mapping :func:`~context_cda.train.run_finetune` expects for one (target, arm)."""
    m = ARM_PATTERN.match(arm)
    if not m:
        raise ConfigError(
            f"train.arms: unknown arm {arm!r}; use cda, context-cda, context-cda-nofilter or context-cda-k<K>."
        )
    root = Path(run_dir) if run_dir is not None else config.run_dir()
    if arm == "cda":
        return {"cda": root / "cda" / S.CDA_FILE}
    if arm == "context-cda-nofilter":
        return {"corpus": root / "augment" / S.AUGMENT_FILE}
    k = float(m.group(2)) if m.group(2) else config.train.k
    return {"corpus": root / "filter" / target / k_dirname(k) / S.FILTER_FILE}


def load_arm_texts(inputs: Mapping[str, Path | str], cda_mode: str = "two-sided") -> list[str]:
    """Read the training texts of one arm from its ``inputs`` (see :func:`arm_inputs`)."""
    if "cda" in inputs:
        path = Path(inputs["cda"])
        df = read_table(path)
        require_columns(df, [S.COUNTERFACTUAL], path)
        cfs = [str(t) for t in df[S.COUNTERFACTUAL].dropna()]
        if cda_mode != "two-sided":
            texts = cfs
        else:
            require_columns(df, [S.ORIGINAL], path)
            originals = [str(t) for t in df[S.ORIGINAL].dropna()]
            changed = [
                str(c) for o, c in zip(df[S.ORIGINAL], df[S.COUNTERFACTUAL], strict=True) if c is not None and c != o
            ]
            texts = _unique(originals) + changed
    elif "corpus" in inputs:
        path = Path(inputs["corpus"])
        df = read_table(path)
        col = S.TEXT if S.TEXT in df.columns else S.AUGMENTED if S.AUGMENTED in df.columns else None
        if col is None:
            raise InputError(
                f"{path}: needs a {S.TEXT!r} (filtered corpus) or {S.AUGMENTED!r} (augmented) column; "
                f"found {', '.join(map(str, df.columns))}."
            )
        texts = [str(t) for t in df[col].dropna()]
    else:
        raise InputError(
            f"finetune inputs must name 'cda' (counterfactuals.parquet) or 'corpus' (a text table); got "
            f"{', '.join(inputs) or 'nothing'}."
        )
    texts = [t.strip() for t in texts if t and t.strip()]
    if not texts:
        raise InputError(f"{path}: no training text (0 non-empty rows).")
    return texts


def _unique(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(items))


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
