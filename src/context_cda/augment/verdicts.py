"""Review the outputs of any generator from a file: ``ccda augment review --input FILE``.

The input is a table (Parquet, JSONL or CSV) with one row per generated output: a ``counterfactual`` column
(the sentence that was rephrased) and an ``output`` column (or ``augmented``, the augment stage's name), and
optionally ``original`` (the sentence before the CDA swap: the swapped words are then read off the pair),
``swapped_terms`` (``["he->she", ...]``), ``finish_reason`` and ``id``. Every row is reviewed with
:func:`~context_cda.augment.review` under ``augment.review`` (the meaning judge in batches when it is on), and
the verdict table is written beside the input (``<name>.review.parquet``, or ``--out``, ``.jsonl`` for JSON lines)::

    row, [id,] counterfactual, output, accepted, text (the cleaned output), reason ('; '-joined), kinds (list)
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from .. import schemas as S
from ..errors import InputError
from ..io import read_table, write_table

OUTPUT_CANDIDATES = ("output", S.AUGMENTED)
JUDGE_BATCH = 256


def find_columns(df: Any, path: Path, output_column: str | None = None,
                 counterfactual_column: str | None = None) -> tuple[str, str]:
    """The (counterfactual, output) column names, or an :class:`InputError` naming the file and the columns."""
    cf = counterfactual_column or S.COUNTERFACTUAL
    outs = (output_column,) if output_column else OUTPUT_CANDIDATES
    out = next((c for c in outs if c in df.columns), None)
    if cf not in df.columns or out is None:
        missing = [c for c in (cf if cf not in df.columns else None, None if out else " or ".join(outs)) if c]
        raise InputError(
            f"{path}: missing column {' and '.join(missing)}; found {', '.join(map(str, df.columns)) or 'none'}. "
            f"`ccda augment review` needs {cf} (the sentence that was rephrased) and {' or '.join(outs)} (the "
            "generated text); original, swapped_terms, finish_reason and id are optional. Rename the columns or "
            "pass --counterfactual-column / --output-column."
        )
    return cf, out


def _optional(df: Any, column: str) -> list[Any]:
    if column not in df.columns:
        return [None] * len(df)
    return [None if v is None or (isinstance(v, float) and v != v) else v for v in df[column].tolist()]


def review_frame(df: Any, config: Any, *, cf_col: str, out_col: str, judge: Any = None) -> Any:
    """The verdict table for ``df`` (see the module docstring)."""
    import pandas as pd

    from .checks import review_many
    from .checks.words import swap_terms
    from .stage import load_attribute_lexicon, review_settings

    settings = review_settings(config)
    lexicon = load_attribute_lexicon(config)
    cfs = df[cf_col].fillna("").astype(str).tolist()
    outs = df[out_col].fillna("").astype(str).tolist()
    originals, finish = _optional(df, S.ORIGINAL), _optional(df, "finish_reason")
    swaps = [swap_terms(s) for s in _optional(df, S.SWAPPED_TERMS)]
    verdicts = []
    for b in range(0, len(df), JUDGE_BATCH):
        sl = slice(b, b + JUDGE_BATCH)
        verdicts += review_many(originals[sl], cfs[sl], outs[sl], lexicon=lexicon, judge=judge, settings=settings,
                                swaps=swaps[sl], finish_reasons=finish[sl])
    table = pd.DataFrame({"row": range(len(df))})
    if S.ID in df.columns:
        table[S.ID] = df[S.ID].tolist()
    table[S.COUNTERFACTUAL] = cfs
    table["output"] = outs
    table["accepted"] = [v.accepted for v in verdicts]
    table["text"] = [v.text for v in verdicts]
    table[S.REASON] = [v.reason for v in verdicts]
    table["kinds"] = [list(v.kinds) for v in verdicts]
    return table


def review_file(config: Any, path: Path | str, out: Path | str | None = None, *, judge: Any = None,
                output_column: str | None = None, counterfactual_column: str | None = None) -> dict[str, Any]:
    """Review every output in ``path``; write the verdict table; return a summary (counts by reason)."""
    from .checks.meaning import make_meaning_judge

    path = Path(path)
    df = read_table(path)
    cf_col, out_col = find_columns(df, path, output_column, counterfactual_column)
    if judge is None and config.augment.review.meaning != "off" and len(df):
        judge = make_meaning_judge(config)
    table = review_frame(df, config, cf_col=cf_col, out_col=out_col, judge=judge)
    dest = Path(out) if out is not None else path.with_name(f"{path.stem}.review.parquet")
    if dest.suffix not in (".parquet", ".jsonl"):
        raise InputError(f"{dest}: write the verdicts as .parquet or .jsonl.")
    write_table(table, dest)
    kinds: Counter[str] = Counter(k for ks in table["kinds"] for k in set(ks))
    return {"input": str(path), "rows": int(len(table)), "accepted": int(table["accepted"].sum()),
            "rejected": int((~table["accepted"]).sum()), "reasons": dict(kinds.most_common()),
            "meaning": config.augment.review.meaning, "verdicts": str(dest)}
