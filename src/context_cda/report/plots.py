"""The report's per-epoch curves: one PNG per (target, metric), one line per arm with its bootstrap interval as a
band, on honest axes.

Honest axes: a bias score (SS, CS: best at 50) is drawn on a range that holds the ideal 50 and at least
:data:`BIAS_SPAN` points around it; a quality score (LMS, ICAT: higher is better) on at least :data:`QUALITY_SPAN`
points around its values. Every value and every band end is in view. So half a point of LMS does not look like a
jump, and how far a model is from 50 is seen at a glance (:func:`y_limits`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

BIAS_SPAN = 30.0  # SS and CS: 50 ± 15 at least
QUALITY_SPAN = 20.0  # LMS and ICAT
COLORS = ("#1f5fa8", "#c0392b", "#2e8b57", "#8e44ad", "#d35400", "#16a085", "#7f8c8d", "#b7950b")


def y_limits(values: list[float], ideal: float | None, lo: float = 0.0, hi: float = 100.0) -> tuple[float, float]:
    """The y range of a curve: every value (and band end) in view, the ideal too, at least :data:`BIAS_SPAN`
    points around the ideal when there is one (else :data:`QUALITY_SPAN` around the values), within [lo, hi]."""
    vals = [float(v) for v in values if v == v]
    if ideal is not None:
        half = BIAS_SPAN / 2
        low, high = min([ideal - half, *vals]), max([ideal + half, *vals])
    elif vals:
        mid, half = (min(vals) + max(vals)) / 2, QUALITY_SPAN / 2
        low, high = min(mid - half, min(vals)), max(mid + half, max(vals))
    else:
        return lo, hi
    span = BIAS_SPAN if ideal is not None else QUALITY_SPAN
    pad = 0.03 * (high - low)
    low, high = max(lo, low - pad), min(hi, high + pad)
    if high - low < span:  # clipped at an end of the scale: keep the span from the other end
        low, high = (lo, max(high, lo + span)) if low <= lo else (min(low, hi - span), hi)
    return low, high


def plot_curves(df: pd.DataFrame, out_dir: Path, metrics: Mapping[str, tuple[str, float | None]],
                order: Callable[[list[str]], list[str]], label: Callable[[str], str],
                level: float = 0.95) -> list[Path]:
    """One PNG per (target, metric) of ``metrics`` ({key: (title, ideal)}): the metric against the epoch, one
    line per arm (``order`` sorts them, ``label`` names them) with its ``<metric>_ci_low/_ci_high`` band."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    paths = []
    for target, tdf in df.groupby("target", sort=True):
        for metric, (title, ideal) in metrics.items():
            if metric not in tdf.columns or tdf[metric].isna().all():
                continue
            fig, ax = plt.subplots(figsize=(5.2, 3.6), dpi=120)
            seen = _draw_arms(ax, tdf, metric, order, label)
            if ideal is not None:
                ax.axhline(ideal, color="#555", linestyle="--", linewidth=1, label=f"ideal ({ideal:g})")
            ax.set_ylim(*y_limits(seen, ideal))
            ax.set_xlabel("epoch (0 = vanilla)")
            ax.set_ylabel(title + (" (best at 50)" if ideal is not None else " (higher is better)"))
            ax.set_title(f"{target}: {title} per epoch, {level:.0%} bootstrap bands", fontsize=9)
            ax.xaxis.get_major_locator().set_params(integer=True)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, loc="best")
            fig.tight_layout()
            path = out_dir / f"{safe(str(target))}-{title.lower()}.png"
            fig.savefig(path)
            plt.close(fig)
            paths.append(path)
    return paths


def _draw_arms(ax, tdf: pd.DataFrame, metric: str, order, label) -> list[float]:
    """Each arm's line and band; returns every value drawn (for the axis range)."""
    seen: list[float] = []
    lo_col, hi_col = f"{metric}_ci_low", f"{metric}_ci_high"
    for i, arm in enumerate(order(list(tdf["arm"].unique()))):
        adf = tdf[tdf["arm"] == arm].dropna(subset=[metric]).sort_values("epoch")
        if adf.empty:
            continue
        color = COLORS[i % len(COLORS)]
        ax.plot(adf["epoch"], adf[metric], marker="o", color=color, label=label(arm))
        seen += list(adf[metric])
        if lo_col in adf.columns and hi_col in adf.columns and adf[lo_col].notna().any():
            band = adf.dropna(subset=[lo_col, hi_col])
            ax.fill_between(band["epoch"], band[lo_col], band[hi_col], color=color, alpha=0.15, linewidth=0)
            seen += list(band[lo_col]) + list(band[hi_col])
    return seen


def safe(name: str) -> str:
    """A file-name-safe form of a target name."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(name))
