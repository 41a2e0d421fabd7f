"""The report's WinoGender / WinoBias table: every model's accuracies and gaps with their bootstrap intervals, and
each arm's paired difference from the vanilla model on the same items (the gaps' distance to 0, which a
debiased model should shrink), from the evaluate steps' per-item predictions."""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import layout as L

#: flat metric -> column title
COLUMNS: dict[str, str] = {
    "winogender_acc": "WG acc", "winogender_acc_male": "WG he", "winogender_acc_female": "WG she",
    "winogender_acc_neutral": "WG they", "winogender_gap": "WG gap (he−she)", "winogender_acc_gotcha": "WG gotcha",
    "winobias_pro1": "WB pro 1", "winobias_anti1": "WB anti 1", "winobias_gap1": "WB gap 1",
    "winobias_pro2": "WB pro 2", "winobias_anti2": "WB anti 2", "winobias_gap2": "WB gap 2",
}
#: paired comparisons shown: (benchmark, distance metric, title)
PAIRED = (("winogender", "gap_dist", "Δ|WG gap|"), ("winobias", "gap1_dist", "Δ|WB gap 1|"),
          ("winobias", "gap2_dist", "Δ|WB gap 2|"), ("winogender", "acc", "ΔWG acc"), ("winobias", "acc", "ΔWB acc"))
BENCHMARKS = ("winogender", "winobias")
NOTE = ("WinoGender (lm-evaluation-harness's prompt) and WinoBias (Winograd substitution): accuracies in %, higher "
        "is better; the gaps (he − she accuracy; pro − anti accuracy per type) are best at 0. Cells: value [low, "
        "high], the seeded bootstrap interval (WinoGender over schemas, WinoBias over pro/anti pairs within their "
        "type). The paired table: arm − vanilla on the same items; a negative Δ|gap| is a smaller gap; * where the "
        "interval excludes 0.")


@dataclass
class ChoiceTables:
    values: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)  # (target, model) -> flat metrics
    paired: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (target, arm) -> title -> diff


def collect(final: Mapping[tuple[str, str], Mapping[str, float]], folders: Mapping[tuple[str, str], Path],
            bootstrap: Any = None) -> ChoiceTables:
    """The flat WinoGender / WinoBias metrics of every evaluated model, and each arm's paired differences from
    its target's vanilla model (``folders``: the evaluate step folders, :func:`context_cda.report.evaluation_dirs`)."""
    out = ChoiceTables({k: dict(v) for k, v in final.items() if any(m in v for m in COLUMNS)})
    items = {key: _items(folder) for key, folder in folders.items()}
    for (target, model), mine in items.items():
        base = items.get((target, L.VANILLA))
        if model == L.VANILLA or not base:
            continue
        out.paired[(target, model)] = _paired(mine, base, bootstrap)
    return out


def _items(folder: Path) -> dict[str, Any]:
    import pandas as pd

    from ..evaluate import winobias, winogender

    mods = {"winogender": winogender, "winobias": winobias}
    out = {}
    for name in BENCHMARKS:
        p = Path(folder) / name / L.PREDICTIONS_FILE
        if p.is_file():
            rows = pd.read_parquet(p).to_dict("records")
            if rows:
                out[name] = mods[name].item_scores(rows)
    return out


def _paired(mine: dict[str, Any], base: dict[str, Any], bootstrap: Any) -> dict[str, Any]:
    from ..evaluate import winobias, winogender
    from ..evaluate.stats import Settings, paired

    mods = {"winogender": winogender, "winobias": winobias}
    out = {}
    for name in BENCHMARKS:
        if name in mine and name in base:
            diffs = paired(mine[name], base[name], mods[name].metrics, Settings.of(bootstrap), mods[name].IDEALS)
            for bench, key, title in PAIRED:
                if bench == name and key in diffs:
                    out[title] = diffs[key]
    return out


def _cell(vals: Mapping[str, float], metric: str) -> str:
    v = vals.get(metric)
    if v is None or v != v:
        return "–"
    lo, hi = vals.get(f"{metric}_ci_low"), vals.get(f"{metric}_ci_high")
    return f"{v:.2f} [{lo:.2f}, {hi:.2f}]" if lo is not None and hi is not None else f"{v:.2f}"


def _diff(d: Any) -> str:
    if d is None or d.point != d.point:
        return "–"
    return d.text() + ("*" if d.significant and not d.too_small else "")


def markdown(t: ChoiceTables, label: Callable[[str], str] = str, rank: Callable[[str], Any] = str) -> list[str]:
    """The section's Markdown lines (none without WinoGender / WinoBias results)."""
    if not t.values:
        return []
    lines = ["## WinoGender and WinoBias: pronoun resolution", "", NOTE, ""]
    for target in sorted({k[0] for k in t.values}):
        rows = sorted((m for tg, m in t.values if tg == target), key=rank)
        cols = [c for c in COLUMNS if any(c in t.values[(target, m)] for m in rows)]
        lines += [f"### {target}", "", "| Model | " + " | ".join(COLUMNS[c] for c in cols) + " |",
                  "|---|" + "---:|" * len(cols)]
        lines += [f"| {label(m)} | " + " | ".join(_cell(t.values[(target, m)], c) for c in cols) + " |" for m in rows]
        arms = [m for m in rows if (target, m) in t.paired]
        if arms:
            titles = [p[2] for p in PAIRED if any(p[2] in t.paired[(target, m)] for m in arms)]
            lines += ["", "| a − b | " + " | ".join(titles) + " |", "|---|" + "---:|" * len(titles)]
            lines += [f"| {label(m)} − {label(L.VANILLA)} | "
                      + " | ".join(_diff(t.paired[(target, m)].get(x)) for x in titles) + " |" for m in arms]
        lines.append("")
    return lines


def to_html(t: ChoiceTables, label: Callable[[str], str] = str, rank: Callable[[str], Any] = str) -> str:
    """The same section as HTML tables."""
    if not t.values:
        return ""
    e = html.escape
    parts = ["<h2>WinoGender and WinoBias: pronoun resolution</h2>", f"<p>{e(NOTE)}</p>"]
    for target in sorted({k[0] for k in t.values}):
        rows = sorted((m for tg, m in t.values if tg == target), key=rank)
        cols = [c for c in COLUMNS if any(c in t.values[(target, m)] for m in rows)]
        head = "".join(f"<th>{e(COLUMNS[c])}</th>" for c in cols)
        body = "".join(f"<tr><td>{e(label(m))}</td>" + "".join(f"<td>{e(_cell(t.values[(target, m)], c))}</td>"
                                                             for c in cols) + "</tr>" for m in rows)
        parts += [f"<h3>{e(target)}</h3>", f"<table><tr><th>Model</th>{head}</tr>{body}</table>"]
        arms = [m for m in rows if (target, m) in t.paired]
        titles = [p[2] for p in PAIRED if any(p[2] in t.paired[(target, m)] for m in arms)]
        if arms and titles:
            head = "".join(f"<th>{e(x)}</th>" for x in titles)
            body = "".join(f"<tr><td>{e(label(m))} − {e(label(L.VANILLA))}</td>" + "".join(
                f"<td>{e(_diff(t.paired[(target, m)].get(x)))}</td>" for x in titles) + "</tr>" for m in arms)
            parts.append(f"<table><tr><th>a − b</th>{head}</tr>{body}</table>")
    return "\n".join(parts)


def frame(t: ChoiceTables):
    """``winobias.csv``-style table: one row per (target, model) with every metric and interval."""
    import pandas as pd

    keys = sorted({k for v in t.values.values() for k in v if k.startswith(BENCHMARKS)})
    return pd.DataFrame([{"target": tg, "model": m, **{k: v.get(k) for k in keys}} for (tg, m), v in t.values.items()])
