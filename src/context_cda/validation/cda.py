"""Expectations at the CDA boundary (the cda step's counterfactuals table).

* ids are unique (later copies of an id are quarantined as ``duplicate-id``);
* original and counterfactual are non-empty and within ``validate.min_chars``..``max_chars``;
* at least one swap was made, and the counterfactual differs from the original;
* no original lexicon word is left where a swap was due: the words of the counterfactual that the run
  attribute's swapper would swap, in order, must each differ from the original's word at the same place
  (``leftover_terms == 0``; race, religion: every group word the swapper swaps in the original, in its sense, must
  be changed in the aligned counterfactual: ``white wine`` left alone is no leftover); ``cda.mode: neutral``: no
  gendered word may be left at all (``gendered-word-left``);
* the counterfactual's length is within ``[1/r, r]`` of the original's (``validate.max_length_ratio``).
"""

from __future__ import annotations

from .. import schemas as S
from .core import Check

COLUMNS = [S.ID, S.ORIGINAL, S.COUNTERFACTUAL, S.N_SWAPS]


def prepare(df, config):
    from ..cda.stage import make_swapper

    swapper = make_swapper(config)
    df = df.copy()
    df["_duplicate_id"] = df[S.ID].duplicated()
    df["_differs"] = df[S.ORIGINAL] != df[S.COUNTERFACTUAL]
    left = []
    for o, c in zip(df[S.ORIGINAL].fillna(""), df[S.COUNTERFACTUAL].fillna(""), strict=True):
        if hasattr(swapper, "leftovers"):  # race, religion: the original's group words still in place
            left.append(swapper.leftovers(o, c))
            continue
        to, tc = swapper.find_terms(o), swapper.find_terms(c)
        if config.cda.mode == "neutral":  # nothing gendered may survive the rewrite
            left.append(len(tc))
        else:
            left.append(sum(a == b for a, b in zip(to, tc, strict=False)) + abs(len(to) - len(tc)))
    df["_leftover_terms"] = left
    lo = df[S.ORIGINAL].fillna("").str.len().clip(lower=1)
    df["_length_ratio"] = df[S.COUNTERFACTUAL].fillna("").str.len() / lo
    return df


def checks(config) -> list[Check]:
    import great_expectations.expectations as gxe

    v = config.validate_
    r = v.max_length_ratio
    return [
        Check(gxe.ExpectColumnValuesToBeInSet(column="_duplicate_id", value_set=[False]), "duplicate-id"),
        Check(gxe.ExpectColumnValuesToNotBeNull(column=S.COUNTERFACTUAL), "empty-counterfactual"),
        Check(gxe.ExpectColumnValueLengthsToBeBetween(column=S.ORIGINAL, min_value=v.min_chars,
                                                      max_value=v.max_chars), "original-length-out-of-bounds"),
        Check(gxe.ExpectColumnValueLengthsToBeBetween(column=S.COUNTERFACTUAL, min_value=v.min_chars,
                                                      max_value=v.max_chars), "counterfactual-length-out-of-bounds"),
        Check(gxe.ExpectColumnValuesToBeBetween(column=S.N_SWAPS, min_value=1), "no-swap"),
        Check(gxe.ExpectColumnValuesToBeInSet(column="_differs", value_set=[True]), "unchanged"),
        Check(gxe.ExpectColumnValuesToBeBetween(column="_leftover_terms", min_value=0, max_value=0),
              "gendered-word-left" if config.cda.mode == "neutral" else f"original-{config.run.attribute}-term-left"),
        Check(gxe.ExpectColumnValuesToBeBetween(column="_length_ratio", min_value=1 / r, max_value=r),
              "length-ratio-out-of-bounds"),
    ]
