"""Expectations at the augment boundary (``<run>/augment/augmented.parquet``).

* ``id`` and ``cda_id`` are unique (exactly one accepted rephrasing per counterfactual);
* ``augmented`` is non-null and within ``validate.min_chars``..``max_chars``; it differs from the counterfactual
  and is not a refusal;
* its length is within ``augment.min_length_ratio``..``max_length_ratio`` of the counterfactual's;
* genders are kept: when the counterfactual's lexicon words are all of one gender, the rephrasing contains a
  word of that gender and no other-gender lexicon word that the counterfactual did not have;
* ``attempts`` lies in 1..1+``augment.max_retries``.

Two views of the same rules: ``prepare`` + ``checks`` (GX expectations with reasons, run by
:func:`context_cda.validation.core.validate_table`), and ``expectations`` / ``row_checks`` for callers that want
the bare GX expectations or per-row reasons without GX.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import schemas as S
from .core import Check

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

BOUNDARY = "augment"
COLUMNS = [S.ID, S.CDA_ID, S.COUNTERFACTUAL, S.AUGMENTED, S.ATTEMPTS, S.GEN_MODEL, S.PROMPT_VERSION, S.RAW_OUTPUT]


def gender_issue(augmented: str, counterfactual: str, lexicon: Any) -> str:
    """'' or why ``augmented`` changes the genders of a single-gender ``counterfactual``."""
    from ..augment.postprocess import words

    male, female = lexicon.male_words, lexicon.female_words
    src, out = set(words(counterfactual)), set(words(augmented))
    src_m, src_f = src & male, src & female
    if bool(src_m) == bool(src_f):  # no gendered word, or both genders: nothing to check at the table level
        return ""
    keep, other = (male, female) if src_m else (female, male)
    added = sorted((out & other) - src)
    if added:
        return "gender-contradiction: " + ", ".join(added)
    if not out & keep:
        return "gender-missing"
    return ""


def prepare(df: pd.DataFrame, config: Any) -> pd.DataFrame:
    from ..augment.postprocess import _REFUSAL, words
    from ..augment.stage import load_gender_lexicon

    lex = load_gender_lexicon(config)
    df = df.copy()
    aug = df[S.AUGMENTED].fillna("").astype(str)
    cf = df[S.COUNTERFACTUAL].fillna("").astype(str)
    df["_duplicate_id"] = df[S.ID].duplicated()
    df["_duplicate_cda_id"] = df[S.CDA_ID].duplicated()
    df["_differs"] = [words(a) != words(c) for a, c in zip(aug, cf, strict=True)]
    df["_refusal"] = aug.map(lambda t: bool(_REFUSAL.search(t)))
    df["_length_ratio"] = aug.str.len() / cf.str.len().clip(lower=1)
    df["_gender_issue"] = [gender_issue(a, c, lex) for a, c in zip(aug, cf, strict=True)]
    df["_gender_ok"] = df["_gender_issue"] == ""
    return df


def checks(config: Any) -> list[Check]:
    import great_expectations.expectations as gxe

    v, a = config.validate_, config.augment
    return [
        Check(gxe.ExpectColumnValuesToBeInSet(column="_duplicate_id", value_set=[False]), "duplicate-id"),
        Check(gxe.ExpectColumnValuesToBeInSet(column="_duplicate_cda_id", value_set=[False]), "duplicate-cda-id"),
        Check(gxe.ExpectColumnValuesToNotBeNull(column=S.AUGMENTED), "empty-augmented"),
        Check(gxe.ExpectColumnValueLengthsToBeBetween(column=S.AUGMENTED, min_value=v.min_chars,
                                                      max_value=v.max_chars), "augmented-length-out-of-bounds"),
        Check(gxe.ExpectColumnValuesToBeInSet(column="_differs", value_set=[True]), "identical"),
        Check(gxe.ExpectColumnValuesToBeInSet(column="_refusal", value_set=[False]), "refusal"),
        Check(gxe.ExpectColumnValuesToBeBetween(column="_length_ratio", min_value=a.min_length_ratio,
                                                max_value=a.max_length_ratio), "length-ratio-out-of-bounds"),
        Check(gxe.ExpectColumnValuesToBeInSet(column="_gender_ok", value_set=[True]), "gender-changed"),
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


def row_checks(df: pd.DataFrame, config: Any) -> pd.Series:
    """Per-row failure reasons ('' when OK, '; '-joined), computed without GX."""
    import pandas as pd

    p = prepare(df, config)
    v, a = config.validate_, config.augment
    aug_len = p[S.AUGMENTED].fillna("").astype(str).str.len()
    rules = [
        (p["_duplicate_id"], "duplicate-id"),
        (p["_duplicate_cda_id"], "duplicate-cda-id"),
        (p[S.AUGMENTED].isna(), "empty-augmented"),
        (p[S.AUGMENTED].notna() & ((aug_len < v.min_chars) | (aug_len > v.max_chars)),
         "augmented-length-out-of-bounds"),
        (~p["_differs"], "identical"),
        (p["_refusal"], "refusal"),
        ((p["_length_ratio"] < a.min_length_ratio) | (p["_length_ratio"] > a.max_length_ratio),
         "length-ratio-out-of-bounds"),
        (~p["_gender_ok"], "gender-changed"),
        ((p[S.ATTEMPTS] < 1) | (p[S.ATTEMPTS] > 1 + a.max_retries), "attempts-out-of-range"),
        (p[S.PROMPT_VERSION].isna(), "no-prompt-version"),
    ]
    out = pd.Series([""] * len(p), index=p.index, dtype="object")
    for mask, reason in rules:
        m = mask.fillna(True).astype(bool)
        out[m] = [f"{o}; {reason}" if o else reason for o in out[m]]
    return out
