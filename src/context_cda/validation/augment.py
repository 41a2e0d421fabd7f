"""Expectations at the augment boundary (the augment stage's ``augmented.parquet``).

* ``id`` and ``cda_id`` are unique (exactly one accepted rephrasing per counterfactual);
* ``augmented`` is non-null and within ``validate.min_chars``..``max_chars``;
* every row passes :func:`context_cda.augment.review` with the configured ``augment.review`` settings: the very
  rule that accepted it in the augment stage (one source of truth), with the swapped terms and the original the
  stage wrote beside each row. One expectation per review reason kind, named as the review names it
  (``identical``, ``refusal``, ``language``, ``gender-contradiction``, ``too-short``, ...), so a quarantined row
  says exactly what failed. The meaning judge runs in the augment stage only (it needs a model); here the rule
  checks are re-run;
* ``attempts`` lies in 1..1+``augment.max_retries``.

Two views of the same rules: ``prepare`` + ``checks`` (GX expectations with reasons, run by
:func:`context_cda.validation.core.validate_table`), and ``expectations`` / ``row_checks`` for callers that want
the bare GX expectations or per-row reasons without GX.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .. import schemas as S
from .core import Check

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

BOUNDARY = "augment"
COLUMNS = [S.ID, S.CDA_ID, S.COUNTERFACTUAL, S.AUGMENTED, S.ATTEMPTS, S.GEN_MODEL, S.PROMPT_VERSION, S.RAW_OUTPUT]
REVIEW_PREFIX = "_review_"


def review_table(df: pd.DataFrame, config: Any, task: str = "rephrase") -> list[Any]:
    """The augment review of every row of an augmented table (rules only; no meaning judge); ``task`` neutral:
    the neutral step's review of its rewrites."""
    from ..augment import review_many, swap_terms
    from ..augment.stage import load_attribute_lexicon, review_settings

    settings = replace(review_settings(config, task), meaning="off")
    n = len(df)
    originals = df[S.ORIGINAL].tolist() if S.ORIGINAL in df.columns else [None] * n
    swaps = df[S.SWAPPED_TERMS].tolist() if S.SWAPPED_TERMS in df.columns else [None] * n
    swaps = [swap_terms(s) for s in swaps]
    originals = [o if isinstance(o, str) else None for o in originals]
    return review_many(originals, df[S.COUNTERFACTUAL].fillna("").astype(str).tolist(),
                       df[S.AUGMENTED].fillna("").astype(str).tolist(), lexicon=load_attribute_lexicon(config),
                       settings=settings, swaps=swaps)


def prepare(df: pd.DataFrame, config: Any, task: str = "rephrase") -> pd.DataFrame:
    from ..augment import REASON_KINDS

    df = df.copy()
    df["_duplicate_id"] = df[S.ID].duplicated()
    df["_duplicate_cda_id"] = df[S.CDA_ID].duplicated()
    kinds = [set(v.kinds) for v in review_table(df, config, task)]
    for kind in REASON_KINDS:
        df[REVIEW_PREFIX + kind] = [kind in k for k in kinds]
    return df


def checks(config: Any, task: str = "rephrase") -> list[Check]:
    import great_expectations.expectations as gxe

    from ..augment import REASON_KINDS
    from ..augment.stage import Task

    v, a = config.validate_, Task.of(config, task)
    return [
        Check(gxe.ExpectColumnValuesToBeInSet(column="_duplicate_id", value_set=[False]), "duplicate-id"),
        Check(gxe.ExpectColumnValuesToBeInSet(column="_duplicate_cda_id", value_set=[False]), "duplicate-cda-id"),
        Check(gxe.ExpectColumnValuesToNotBeNull(column=S.AUGMENTED), "empty-augmented"),
        Check(gxe.ExpectColumnValueLengthsToBeBetween(column=S.AUGMENTED, min_value=v.min_chars,
                                                      max_value=v.max_chars), "augmented-length-out-of-bounds"),
        *[Check(gxe.ExpectColumnValuesToBeInSet(column=REVIEW_PREFIX + kind, value_set=[False]), kind)
          for kind in REASON_KINDS if kind != "meaning"],
        Check(gxe.ExpectColumnValuesToBeBetween(column=S.ATTEMPTS, min_value=1, max_value=1 + a.max_retries),
              "attempts-out-of-range"),
        Check(gxe.ExpectColumnValuesToNotBeNull(column=S.PROMPT_VERSION), "no-prompt-version"),
    ]


def expectations(config: Any) -> list[Any]:
    """The bare GX expectations (on a table passed through :func:`prepare`), plus the column contract."""
    import great_expectations.expectations as gxe

    return [gxe.ExpectTableColumnsToMatchSet(column_set=COLUMNS, exact_match=False)] + [
        c.expectation for c in checks(config)
    ]


def row_checks(df: pd.DataFrame, config: Any, task: str = "rephrase") -> pd.Series:
    """Per-row failure reasons ('' when OK, '; '-joined), computed without GX."""
    import pandas as pd

    from ..augment import REASON_KINDS
    from ..augment.stage import Task

    p = prepare(df, config, task)
    v, a = config.validate_, Task.of(config, task)
    aug_len = p[S.AUGMENTED].fillna("").astype(str).str.len()
    rules = [
        (p["_duplicate_id"], "duplicate-id"),
        (p["_duplicate_cda_id"], "duplicate-cda-id"),
        (p[S.AUGMENTED].isna(), "empty-augmented"),
        (p[S.AUGMENTED].notna() & ((aug_len < v.min_chars) | (aug_len > v.max_chars)),
         "augmented-length-out-of-bounds"),
        *[(p[REVIEW_PREFIX + kind], kind) for kind in REASON_KINDS if kind != "meaning"],
        ((p[S.ATTEMPTS] < 1) | (p[S.ATTEMPTS] > 1 + a.max_retries), "attempts-out-of-range"),
        (p[S.PROMPT_VERSION].isna(), "no-prompt-version"),
    ]
    out = pd.Series([""] * len(p), index=p.index, dtype="object")
    for mask, reason in rules:
        m = mask.fillna(True).astype(bool)
        out[m] = [f"{o}; {reason}" if o else reason for o in out[m]]
    return out
