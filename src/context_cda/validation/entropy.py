"""Great-expectations suite at the entropy -> filter boundary (the entropy step's scores table of one target).

* ids are unique and present; ``text`` is non-empty;
* ``se`` and every estimator are finite and >= 0; the ``plogp`` and ``discrete`` estimators are at most log M
  (M = ``entropy.n_samples``), which they cannot exceed for M samples;
* ``n_clusters`` lies in 1..M.

Two views of the same rules: ``prepare`` + ``checks`` (GX expectations with reasons, run by
:func:`context_cda.validation.core.validate_table` through ``ccda validate --boundary entropy``), and
``expectations`` / ``row_checks`` for callers that want the bare GX expectations or per-row reasons without GX.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from .. import schemas as S
from .core import Check

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..config import Config

BOUNDARY = "entropy"
COLUMNS = [S.ID, S.TEXT, S.SE, S.SE_EQ1, S.SE_PLOGP, S.SE_DISCRETE, S.N_CLUSTERS]
_EPS = 1e-6


def expectations(config: Config) -> list[Any]:
    """GX expectations for a scores table produced with ``config.entropy``."""
    import great_expectations.expectations as gxe

    m = config.entropy.n_samples
    log_m = math.log(m) + _EPS
    out: list[Any] = [
        gxe.ExpectTableColumnsToMatchSet(column_set=COLUMNS, exact_match=False),
        gxe.ExpectColumnValuesToNotBeNull(column=S.ID),
        gxe.ExpectColumnValuesToBeUnique(column=S.ID),
        gxe.ExpectColumnValuesToNotBeNull(column=S.TEXT),
        gxe.ExpectColumnValueLengthsToBeBetween(column=S.TEXT, min_value=1),
        gxe.ExpectColumnValuesToNotBeNull(column=S.SE),
        gxe.ExpectColumnValuesToBeBetween(column=S.SE, min_value=0),
        gxe.ExpectColumnValuesToBeBetween(column=S.SE_EQ1, min_value=0),
        gxe.ExpectColumnValuesToBeBetween(column=S.SE_PLOGP, min_value=0, max_value=log_m),
        gxe.ExpectColumnValuesToBeBetween(column=S.SE_DISCRETE, min_value=0, max_value=log_m),
        gxe.ExpectColumnValuesToBeBetween(column=S.N_CLUSTERS, min_value=1, max_value=m),
    ]
    return out


def prepare(df: pd.DataFrame, config: Config) -> pd.DataFrame:
    """The table plus the derived columns the checks look at."""
    import pandas as pd

    df = df.copy()
    df["_duplicate_id"] = df[S.ID].duplicated() if S.ID in df.columns else False
    text = df[S.TEXT] if S.TEXT in df.columns else pd.Series([None] * len(df), index=df.index)
    df["_text_chars"] = text.fillna("").astype(str).str.strip().str.len()
    return df


def checks(config: Config) -> list[Check]:
    """GX expectations, each with the reason written for the rows it fails (same rules as :func:`row_checks`)."""
    import great_expectations.expectations as gxe

    m = config.entropy.n_samples
    log_m = math.log(m) + _EPS
    out = [
        Check(gxe.ExpectTableColumnsToMatchSet(column_set=COLUMNS, exact_match=False), "missing-columns"),
        Check(gxe.ExpectColumnValuesToNotBeNull(column=S.ID), "missing-id"),
        Check(gxe.ExpectColumnValuesToBeInSet(column="_duplicate_id", value_set=[False]), "duplicate-id"),
        Check(gxe.ExpectColumnValuesToBeBetween(column="_text_chars", min_value=1), "empty-text"),
        Check(gxe.ExpectColumnValuesToNotBeNull(column=S.SE), "se-missing"),
        Check(gxe.ExpectColumnValuesToBeBetween(column=S.SE, min_value=0), "se-negative"),
    ]
    for col in (S.SE_EQ1, S.SE_PLOGP, S.SE_DISCRETE):
        out.append(Check(gxe.ExpectColumnValuesToNotBeNull(column=col), f"{col}-invalid"))
    out.append(Check(gxe.ExpectColumnValuesToBeBetween(column=S.SE_EQ1, min_value=0), f"{S.SE_EQ1}-invalid"))
    for col in (S.SE_PLOGP, S.SE_DISCRETE):
        out.append(
            Check(
                gxe.ExpectColumnValuesToBeBetween(column=col, min_value=0, max_value=log_m),
                f"{col}-out-of-range[0,log M]",
            )
        )
    out.append(
        Check(gxe.ExpectColumnValuesToNotBeNull(column=S.N_CLUSTERS), f"n-clusters-out-of-range[1,{m}]")
    )
    out.append(
        Check(
            gxe.ExpectColumnValuesToBeBetween(column=S.N_CLUSTERS, min_value=1, max_value=m),
            f"n-clusters-out-of-range[1,{m}]",
        )
    )
    return out


def row_checks(df: pd.DataFrame, config: Config) -> pd.Series:
    """Per-row failure reasons ('' when OK), '; '-joined: the row-level view of :func:`expectations`."""
    import numpy as np
    import pandas as pd

    m = config.entropy.n_samples
    log_m = math.log(m) + _EPS
    reasons: list[list[str]] = [[] for _ in range(len(df))]

    def flag(mask: Any, why: str) -> None:
        for i in np.flatnonzero(np.asarray(mask, dtype=bool)):
            reasons[i].append(why)

    def num(col: str) -> np.ndarray:
        if col not in df.columns:
            return np.full(len(df), np.nan)
        return pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float)

    ids = df[S.ID] if S.ID in df.columns else pd.Series([None] * len(df))
    flag(ids.isna().to_numpy(), "missing-id")
    flag((ids.duplicated(keep="first") & ids.notna()).to_numpy(), "duplicate-id")
    text = df[S.TEXT] if S.TEXT in df.columns else pd.Series([None] * len(df))
    flag(text.isna().to_numpy() | (text.fillna("").astype(str).str.strip() == "").to_numpy(), "empty-text")
    se = num(S.SE)
    flag(~np.isfinite(se), "se-missing")
    flag(np.isfinite(se) & (se < 0), "se-negative")
    for col in (S.SE_EQ1, S.SE_PLOGP, S.SE_DISCRETE):
        v = num(col)
        flag(~np.isfinite(v) | (v < 0), f"{col}-invalid")
    for col in (S.SE_PLOGP, S.SE_DISCRETE):
        v = num(col)
        flag(np.isfinite(v) & (v > log_m), f"{col}-above-log-m")
    nc = num(S.N_CLUSTERS)
    flag(~np.isfinite(nc) | (nc < 1) | (nc > m), f"n-clusters-out-of-range[1,{m}]")
    return pd.Series(["; ".join(r) for r in reasons], index=df.index, dtype="object")
