"""``run_filter``: drop the top k % of items by semantic entropy (or keep those below a threshold).

For each k in ``config.filter.k`` the stage writes ``<out_dir>/k<k>/``: ``corpus.parquet`` (id, text, se),
``rejected.parquet`` (the dropped rows with their reason) and ``se_hist.png`` (SE histogram with the cut marked);
``summary.json`` beside them sums the cuts up. With ``config.filter.threshold`` set it writes one ``threshold<t>/`` folder instead.

Cuts are deterministic: items are ranked by SE (highest first) and, within equal SE, by id; the first
floor(n * k / 100) are dropped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import layout as L
from .. import schemas as S
from ..errors import ConfigError, InputError
from ..io import read_table, require_columns, write_json, write_rejected, write_table

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..config import Config

HIST_FILE = L.SE_HIST_FILE
HIST_BINS = 10


def rank_by_se(df: pd.DataFrame) -> pd.DataFrame:
    """Rows ordered highest SE first, ties broken by id (ascending): the drop order."""
    return df.sort_values([S.SE, S.ID], ascending=[False, True], kind="mergesort").reset_index(drop=True)


def split_top_k(df: pd.DataFrame, k: float) -> tuple[pd.DataFrame, pd.DataFrame, float | None]:
    """(kept, dropped, cut): drop floor(n*k/100) highest-SE rows; ``cut`` is the lowest dropped SE (or None)."""
    if not 0 <= k < 100:
        raise ConfigError(f"filter.k must lie in [0, 100), got {k}")
    ranked = rank_by_se(df)
    n_drop = int(math.floor(len(ranked) * k / 100 + 1e-9))
    dropped, kept = ranked.iloc[:n_drop], ranked.iloc[n_drop:]
    cut = float(dropped[S.SE].iloc[-1]) if n_drop else None
    return kept, dropped, cut


def split_threshold(df: pd.DataFrame, threshold: float) -> tuple[pd.DataFrame, pd.DataFrame, float]:
    ranked = rank_by_se(df)
    keep = ranked[S.SE] < threshold
    return ranked[keep], ranked[~keep], float(threshold)


def se_histogram(values, bins: int = HIST_BINS) -> dict[str, list[float]]:
    import numpy as np

    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return {"counts": [], "edges": []}
    counts, edges = np.histogram(v, bins=bins)
    return {"counts": counts.astype(int).tolist(), "edges": [round(float(e), 4) for e in edges]}


def plot_histogram(values, cut: float | None, path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from ..io import atomic_path

    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    ax.hist(list(values), bins=max(HIST_BINS, min(40, len(values) // 5 or 1)), color="#4C72B0", alpha=0.85)
    if cut is not None:
        ax.axvline(cut, color="#C44E52", linestyle="--", linewidth=1.5, label=f"cut = {cut:.3f}")
        ax.legend()
    ax.set_xlabel("semantic entropy (nats)")
    ax.set_ylabel("items")
    ax.set_title(title)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
    return path


def _one_cut(
    config: Config,
    scores: pd.DataFrame,
    out: Path,
    name: str,
    mode: str,
    value: float,
    scores_path: Path,
    target: str,
) -> tuple[dict[str, Any], dict[str, Path]]:
    """One cut's folder (corpus, rejected rows, histogram): its summary and the files it wrote."""
    if mode == "k":
        kept, dropped, cut = split_top_k(scores, value)
        reason = f"se-top-{value:g}%"
    else:
        kept, dropped, cut = split_threshold(scores, value)
        reason = f"se>=threshold({value:g})"
    kept_sorted = kept.sort_values(S.ID).reset_index(drop=True)
    corpus = write_table(kept_sorted[[S.ID, S.TEXT, S.SE]], out / L.FILTERED_FILE)
    rej = dropped[[S.ID, S.TEXT, S.SE]].copy()
    rej[S.REASON] = [f"{reason}: se={s:.4f}" for s in rej[S.SE]]
    rej_path = write_rejected(rej, out)
    plot_histogram(
        scores[S.SE], cut, out / HIST_FILE, f"{target}: {name} (kept {len(kept)}, dropped {len(dropped)})"
    )
    summary = {
        "target": target,
        "mode": mode,
        mode: value,
        "cut": cut,
        "kept": int(len(kept)),
        "dropped": int(len(dropped)),
        "se_kept_max": float(kept[S.SE].max()) if len(kept) else None,
        "histogram": se_histogram(scores[S.SE]),
    }
    return summary, {"corpus": corpus, "rejected": rej_path}


def run_filter(
    config: Config, inputs: Mapping[str, Path | str], out_dir: Path | str, target: str
) -> dict[str, Any]:
    """Filtered corpora for target ``target`` from its (validated) semantic-entropy scores, ``inputs["scores"]``."""
    if "scores" not in inputs:
        raise InputError("run_filter needs inputs={'scores': <the target's validated scores table>}.")
    scores_path = Path(inputs["scores"])
    out = Path(out_dir)
    scores = read_table(scores_path)
    require_columns(scores, {S.ID: "id", S.TEXT: "text", S.SE: "number"}, scores_path)
    bad = scores[S.SE].isna()
    if bad.any():
        raise InputError(
            f"{scores_path}: {int(bad.sum())} row(s) without an SE value, e.g. id {scores[S.ID][bad].iloc[0]!r}."
        )
    fcfg = config.filter
    cuts = (
        [("threshold", fcfg.threshold, f"threshold{fcfg.threshold:g}")]
        if fcfg.threshold is not None
        else [("k", float(k), L.k_dirname(k)) for k in fcfg.k]
    )
    from ..steps import Counts, recorder

    rec = recorder(out)
    results, outputs = {}, {}
    for mode, value, name in cuts:
        results[name], files = _one_cut(config, scores, out / name, name, mode, value, scores_path, target)
        outputs.update({f"{name}_{k}": p for k, p in files.items()})
    summary = {
        "target": target,
        "items": int(len(scores)),
        "histogram": se_histogram(scores[S.SE]),
        "cuts": {n: {k: v for k, v in r.items() if k != "histogram"} for n, r in results.items()},
    }
    outputs["summary"] = write_json(out / "summary.json", summary)
    kept = max((r["kept"] for r in results.values()), default=0)
    rec.finish(Counts(items_in=len(scores), out=kept, rejected=len(scores) - kept), outputs, summary)
    return summary
