"""The report's "Verdicts and power" and "Dose response": every arm's verdict as the gate decides it, with the
numbers that decided and the smallest shift the run could have shown; and, where an arm was fine-tuned on growing
token budgets (dose arms ``cda-1k``, ``cda-4k`` ...: :mod:`context_cda.arms`), its scores against the tokens seen.

Everything here is read from the gate's own decision of each arm against vanilla
(:func:`context_cda.tracking.promotion.decide`, kept in the report's evidence as ``decisions``), never recomputed:

* the verdict and its note, and the reasons in numbers;
* SS, CS and LMS of the arm's seeds' pooled evidence with their bootstrap intervals (``Decision.candidate``) and
  vanilla's (``Decision.vanilla``);
* the paired shift toward 50 (SS, CS) and the LMS difference, with their intervals (``Decision.comparisons``), and
  the smallest shift toward 50 the gate's sign-flip test detects with 80 % power on those items
  (``Decision.detectable_shift``).

StereoSet intersentence (the ``stereoset-inter`` benchmark), which the gate does not decide on, adds its SS with its
interval and its paired difference from vanilla when it was scored (:func:`context_cda.evaluate.stats.bootstrap`,
:func:`context_cda.evaluate.stats.paired` on the same pooled per-item evidence).

A dose-response curve (one per target and arm with doses): the arm itself at its budget group's budget and each of
its dose arms, ordered by the tokens each fine-tuning saw (its manifest's tokens x epochs). The figure
(``<target>-<arm>-dose-response.png``) draws SS, CS, LMS (and intersentence SS) against the tokens seen on a log
scale: on top each value with its interval and vanilla's as a line and band; below, the paired statistic against
vanilla with its interval - the shift toward 50 beside a band from 0 to the gate's detectable shift at that dose (a
point inside it moved less than the gate could have shown), the LMS difference beside the non-inferiority margin
(``tracking.promotion.lms_delta``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import layout as L

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..config import Config
    from ..evaluate.stats import Difference, Interval
    from ..tracking.promotion import Decision
    from .evidence import Evidence

#: the gate's metrics shown, in order: (flat metric, title)
GATE = (("stereoset_ss", "SS"), ("crows_cs", "CS"), ("stereoset_lms", "LMS"))
#: the benchmark the report adds beside the gate's (its SS)
INTER = "stereoset-inter"


@dataclass
class Row:
    """One arm of one target: its decision against vanilla, the tokens it saw, its seeds, intersentence."""

    target: str
    arm: str
    decision: Decision
    tokens: int | None = None  # tokens seen: the fine-tuning's tokens x epochs (None: a post-hoc arm)
    seeds: list[int] = field(default_factory=list)
    inter: Interval | None = None
    inter_shift: Difference | None = None  # intersentence SS shift toward 50 (vanilla's side x (vanilla - arm)), paired
    inter_vanilla: Interval | None = None

    def value(self, metric: str, who: str = "candidate") -> tuple[float, float, float] | None:
        """(point, low, high) of ``metric`` for the arm (``candidate``) or vanilla (``vanilla``), from the decision."""
        flat = getattr(self.decision, who) or {}
        if metric not in flat:
            return None
        return flat[metric], flat.get(f"{metric}_ci_low", float("nan")), flat.get(f"{metric}_ci_high", float("nan"))

    def compared(self, metric: str) -> dict[str, Any]:
        """The decision's record of ``metric`` against vanilla (the shift toward 50, or the LMS difference)."""
        return dict((self.decision.comparisons.get("vs_vanilla") or {}).get(metric) or {})


@dataclass
class Study:
    rows: list[Row]
    level: float
    lms_delta: float
    curves: dict[tuple[str, str], list[Row]] = field(default_factory=dict)  # (target, base arm) -> its points
    figures: list[Path] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.rows)


# ------------------------------------------------------------------------------------------------ collecting


def tokens_seen(finetune_dir: Path | None) -> dict[tuple[str, str], tuple[int, list[int]]]:
    """(tokens seen, seeds) per (target, arm) from the fine-tunings' manifests: tokens x epochs done, the same for
    every seed of an arm (the budget cut is seeded by ``run.seed``)."""
    from .setup import summary_of

    out: dict[tuple[str, str], tuple[int, list[int]]] = {}
    for keys, folder in L.discover(finetune_dir, "finetune") if finetune_dir and finetune_dir.is_dir() else []:
        s = summary_of(folder)
        if isinstance(s.get("tokens"), int) and isinstance(s.get("epochs"), int):
            tokens, seeds = out.get((keys["target"], keys["arm"]), (0, []))
            out[(keys["target"], keys["arm"])] = (max(tokens, s["tokens"] * s["epochs"]), [*seeds, int(keys["seed"])])
    return out


def collect(config: Config, ev: Evidence, finetune_dir: Path | None) -> Study:
    """Every arm the report's evidence holds a decision for, in the run's arm order, and the dose-response curves."""
    from ..arms import doses, parse
    from ..evaluate.stats import Settings

    settings = Settings.of(config.evaluate.bootstrap)
    seen = tokens_seen(finetune_dir)
    order = {a: i for i, a in enumerate(config.train.arms)}
    rows = []
    for (target, arm), decision in sorted(ev.decisions.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 99))):
        tokens, seeds = seen.get((target, arm), (None, []))
        row = Row(target, arm, decision, tokens, sorted(seeds))
        row.inter, row.inter_shift, row.inter_vanilla = _intersentence(ev, target, arm, settings)
        rows.append(row)
    study = Study(rows, ev.level, float(config.tracking.promotion.lms_delta))
    for base in dict.fromkeys(parse(a, config.train.k).base for a in config.train.arms):
        if base is None:
            continue
        names = {base, *doses(config.train.arms, base, config.train.k)}
        for target in sorted({r.target for r in rows}):
            points = sorted((r for r in rows if r.target == target and r.arm in names and r.tokens),
                            key=lambda r: r.tokens or 0)
            if len(points) >= 2:
                study.curves[(target, base)] = points
    return study


def _intersentence(ev: Evidence, target: str, arm: str, settings: Any
                   ) -> tuple[Interval | None, Difference | None, Interval | None]:
    """The arm's intersentence SS with its interval, its paired shift toward 50 (the gate's statistic, oriented by
    vanilla's side of 50) and vanilla's SS, when both were scored on it."""
    from dataclasses import replace

    from ..evaluate import stereoset
    from ..evaluate.stats import bootstrap, paired

    mine, van = ev.models.get((target, arm)), ev.models.get((target, L.VANILLA))
    if mine is None or not mine.has(INTER):
        return None, None, None
    iv = bootstrap(mine.items[INTER], stereoset.metrics, settings)["ss"]
    if van is None or not van.has(INTER):
        return iv, None, None
    d = paired(mine.items[INTER], van.items[INTER], stereoset.metrics, settings)["ss"]  # arm - vanilla
    base = bootstrap(van.items[INTER], stereoset.metrics, settings)["ss"]
    shift = replace(d, point=-d.point + 0.0, low=-d.high + 0.0, high=-d.low + 0.0) if base.point >= 50 else d
    return iv, shift, base


# ------------------------------------------------------------------------------------------------ cells


def _iv(v: tuple[float, float, float] | None) -> str:
    if v is None or v[0] != v[0]:
        return "–"
    point, lo, hi = v
    return f"{point:.2f}" + (f" [{lo:.2f}, {hi:.2f}]" if lo == lo and hi == hi else "")


def _shift(rec: Mapping[str, Any]) -> str:
    """``+1.20 [-0.80, +3.10]`` from a decision's record (``diff``, ``ci``)."""
    d, ci = rec.get("diff"), rec.get("ci") or [None, None]
    if d is None:
        return "–"
    return f"{d:+.2f}" + (f" [{ci[0]:+.2f}, {ci[1]:+.2f}]" if None not in ci else "")


def _detectable(row: Row, metric: str) -> str:
    v = row.decision.detectable_shift.get(metric)
    return "–" if v is None or v != v else f"{v:.2f}"


def _changed(row: Row, metric: str) -> str:
    """How many items the arm decides differently from vanilla (the sign-flip test's discordant items; seeds
    pooled: items where the seeds' mean decision differs), of how many."""
    rec = row.compared(metric)
    k, n = rec.get("discordant"), rec.get("n")
    return "–" if k is None or not n else f"{k} of {n}"


def _tokens(row: Row) -> str:
    return "–" if row.tokens is None else f"{row.tokens:,}"


def _inter(row: Row) -> str:
    if row.inter is None:
        return "–"
    d = row.inter_shift
    return row.inter.text() + ("" if d is None else f"; {d.point:+.2f} [{d.low:+.2f}, {d.high:+.2f}]")


def cells(row: Row, label: Callable[[str], str]) -> list[str]:
    """One row of the verdict table (the columns of :data:`HEADER`)."""
    from ..tracking.decisions import verdict_line

    ss, cs, lms = (row.compared(m) for m, _ in GATE)
    return [label(row.arm), _tokens(row), str(len(row.seeds)) if row.seeds else "–",
            f"{_iv(row.value('stereoset_ss'))}", f"{_shift(ss)} (≥ {_detectable(row, 'stereoset_ss')})",
            f"{_iv(row.value('crows_cs'))}", f"{_shift(cs)} (≥ {_detectable(row, 'crows_cs')})",
            f"{_iv(row.value('stereoset_lms'))}", _shift(lms), _inter(row),
            verdict_line(row.decision.verdict, row.decision.note).replace("|", "\\|")]


HEADER = ("Arm", "Tokens seen", "Seeds", "SS", "SS shift toward 50 (detectable)", "CS", "CS shift toward 50 "
          "(detectable)", "LMS", "ΔLMS", "SS intersentence; its shift toward 50", "Verdict")


def frame(study: Study) -> pd.DataFrame:
    """``verdicts.csv``: one row per (target, arm) with every number of the verdict table, unrounded."""
    import pandas as pd

    out = []
    for r in study.rows:
        rec: dict[str, Any] = {"target": r.target, "arm": r.arm, "tokens_seen": r.tokens, "seeds": len(r.seeds),
                               "verdict": r.decision.verdict, "note": r.decision.note}
        for metric, _ in GATE:
            for who in ("candidate", "vanilla"):
                v = r.value(metric, who)
                if v is not None:
                    rec.update({f"{who}_{metric}": v[0], f"{who}_{metric}_ci_low": v[1],
                                f"{who}_{metric}_ci_high": v[2]})
            c = r.compared(metric)
            if c.get("diff") is not None:
                rec.update({f"{metric}_vs_vanilla": c["diff"], f"{metric}_vs_vanilla_ci_low": (c.get("ci") or [None])[0],
                            f"{metric}_vs_vanilla_ci_high": (c.get("ci") or [None, None])[1]})
            if metric in r.decision.detectable_shift:
                rec[f"{metric}_detectable_shift"] = r.decision.detectable_shift[metric]
                rec[f"{metric}_items_changed"], rec[f"{metric}_items"] = c.get("discordant"), c.get("n")
        if r.inter is not None:
            rec.update({"stereoset_inter_ss": r.inter.point, "stereoset_inter_ss_ci_low": r.inter.low,
                        "stereoset_inter_ss_ci_high": r.inter.high})
        if r.inter_shift is not None:
            rec.update({"stereoset_inter_ss_shift": r.inter_shift.point,
                        "stereoset_inter_ss_shift_ci_low": r.inter_shift.low,
                        "stereoset_inter_ss_shift_ci_high": r.inter_shift.high})
        out.append(rec)
    return pd.DataFrame(out)


# ------------------------------------------------------------------------------------------------ sections


def _vanilla_line(rows: list[Row]) -> str:
    r = rows[0]
    parts = [f"{title} {_iv(r.value(m, 'vanilla'))}" for m, title in GATE if r.value(m, "vanilla") is not None]
    return f"Vanilla: {', '.join(parts)}."


def equal_token_lines(study: Study, ev: Evidence, label: Callable[[str], str]) -> list[str]:
    """For every two arms that saw the same number of tokens (the same budget group), the later one against the
    earlier as the gate judges it with the champion's rules (:func:`context_cda.tracking.promotion.phrases`, paired
    on the same items, seeds pooled): above all, whether it is better on LMS."""
    from ..tracking.promotion import phrases

    out = []
    for target in sorted({r.target for r in study.rows}):
        rows = [r for r in study.rows if r.target == target and r.tokens]
        for i, a in enumerate(rows):
            for b in rows[:i]:
                j = ev.judgements.get((target, a.arm, b.arm))
                if j is None or a.tokens != b.tokens:
                    continue
                n = j.lms.diff.n if j.lms is not None else 0
                out.append(f"- `{target}`: **{label(a.arm)}** against **{label(b.arm)}** at equal tokens ({a.tokens:,} "
                           f"each; seeds pooled, {n} StereoSet clusters paired), by the gate's rules against a "
                           f"reference: {'; '.join(phrases(j))}.")
    return out


def markdown(study: Study, ev: Evidence, label: Callable[[str], str]) -> list[str]:
    """The two sections' Markdown lines (none when no arm was decided)."""
    if not study:
        return []
    lines = ["## Verdicts and power", "",
             "Each arm against vanilla as the promotion gate decides it (`context_cda.tracking.promotion.decide`: "
             f"the verdict, and the numbers it decided on): values with their {study.level:.0%} bootstrap intervals "
             "(an arm's seeds pooled), the paired shift toward 50 (vanilla's side of 50 times vanilla − arm) with its "
             "interval and, in brackets, the smallest shift toward 50 the gate's paired sign-flip test detects with "
             "80% power on these items (it grows with the share of items whose decision the fine-tuning changed, in "
             "either direction): a true shift that large would have been shown four times in five; a smaller one "
             "this run could miss, so \"not shown\" is not \"no effect\". SS intersentence is reported beside "
             "them; the gate does not decide on it.", ""]
    for target in sorted({r.target for r in study.rows}):
        rows = [r for r in study.rows if r.target == target]
        lines += [f"### {target}", "", _vanilla_line(rows), "", "| " + " | ".join(HEADER) + " |",
                  "|---|" + "---:|" * (len(HEADER) - 2) + "---|"]
        lines += ["| " + " | ".join(cells(r, label)) + " |" for r in rows]
        lines.append("")
    same = equal_token_lines(study, ev, label)
    if same:
        lines += ["At equal tokens:", "", *same, ""]
    return lines + _dose_lines(study, label)


def _dose_lines(study: Study, label: Callable[[str], str]) -> list[str]:
    if not study.curves:
        return []
    lines = ["## Dose response", "",
             "One arm fine-tuned on growing token budgets (its dose arms, and the arm itself at its budget group's "
             "budget), each point its seeds' pooled evidence against vanilla, as in the table above. In the figure, "
             f"against the tokens seen (log scale), with {study.level:.0%} intervals: on top each value and "
             "vanilla's (line and band); below, the paired statistic against vanilla on the same items - the shift "
             "toward 50 beside a band from 0 to the gate's detectable shift at that dose (a point inside it moved "
             "less than the gate could have shown), the LMS difference beside the non-inferiority margin "
             f"(−{study.lms_delta:g}).", ""]
    for (target, base), points in study.curves.items():
        lines += [f"### {target}: {label(base)}", "", "| Arm | Tokens seen | SS shift toward 50 (detectable) | "
                  "SS clusters changed | CS shift toward 50 (detectable) | CS pairs changed | ΔLMS | Verdict |",
                  "|---|---:|---:|---:|---:|---:|---:|---|"]
        for r in points:
            c = cells(r, label)
            lines.append(f"| {c[0]} | {c[1]} | {c[4]} | {_changed(r, 'stereoset_ss')} | {c[6]} | "
                         f"{_changed(r, 'crows_cs')} | {c[8]} | {c[10]} |")
        lines += ["", *trend_lines(points), ""]
        lines += [f"![{p.stem}]({p.name})" for p in study.figures if p.stem == figure_stem(target, base)] + [""]
    return lines


def trend_lines(points: list[Row]) -> list[str]:
    """What the curve shows, metric by metric, in the gate's numbers: from the smallest to the largest dose, the
    items changed, the detectable shift and the observed shift toward 50, and at which doses (if any) the observed
    shift reached what the gate could detect."""
    out = []
    for metric, title in GATE[:2]:
        recs = [(p, p.compared(metric)) for p in points if p.compared(metric).get("diff") is not None]
        if len(recs) < 2:
            continue
        (lo, a), (hi, b) = recs[0], recs[-1]
        tested = any(r.get("tested") for _, r in recs)
        reached = [p for p, r in recs if r.get("tested") and r["diff"] >= (r.get("detectable_shift") or float("inf"))]
        words = (f"{title}: from {_tokens(lo)} to {_tokens(hi)} tokens seen, the items decided differently from vanilla "
                 f"went from {_changed(lo, metric)} to {_changed(hi, metric)}, the smallest shift toward 50 the gate "
                 f"could show from {_detectable(lo, metric)} to {_detectable(hi, metric)} points, and the observed "
                 f"shift from {a['diff']:+.2f} to {b['diff']:+.2f}")
        if not tested:
            words += f" (vanilla is not demonstrably biased on {title}: a non-inferiority check, no shift to show)"
        elif reached:
            words += f"; the observed shift reached the detectable shift at {', '.join(_tokens(p) for p in reached)}"
        else:
            words += "; at no dose did the observed shift reach the detectable shift" + _gap(a, b)
        out.append(f"- {words}.")
    return out


def _gap(lo: Mapping[str, Any], hi: Mapping[str, Any]) -> str:
    """How far the observed shift fell short of the detectable one at the smallest and the largest dose: where the
    shortfall grows, the doses changed more items (in both directions) without a net move toward 50."""
    d_lo, d_hi = lo.get("detectable_shift"), hi.get("detectable_shift")
    if d_lo is None or d_hi is None or d_lo != d_lo or d_hi != d_hi:
        return ""
    g_lo, g_hi = d_lo - lo["diff"], d_hi - hi["diff"]
    if g_hi > g_lo:
        return (f", and it fell further short with the dose ({g_lo:.2f} points at the smallest, {g_hi:.2f} at the "
                "largest): more tokens changed more items, in both directions, without a net shift toward 50")
    return f" (it fell short by {g_lo:.2f} points at the smallest dose, {g_hi:.2f} at the largest)"


# ------------------------------------------------------------------------------------------------ figure


def figure_stem(target: str, base: str) -> str:
    from .plots import safe

    return f"{safe(target)}-{safe(base)}-dose-response"


def plot(study: Study, out_dir: Path, label: Callable[[str], str]) -> list[Path]:
    """One PNG per dose-response curve (:func:`figure_stem`); kept in ``study.figures``. Top row: each metric with
    its interval and vanilla's; bottom row: the paired statistic against vanilla (the shift toward 50 with the
    gate's detectable shift as a band, the LMS difference with the non-inferiority margin)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    paths = []
    for (target, base), points in study.curves.items():
        panels = [*GATE, *([("inter", "SS intersentence")] if any(p.inter for p in points) else [])]
        fig, axes = plt.subplots(2, len(panels), figsize=(3.3 * len(panels), 6.4), dpi=120, squeeze=False)
        for col, (metric, title) in enumerate(panels):
            _values(axes[0][col], points, metric, title)
            _paired(axes[1][col], points, metric, title, study.lms_delta)
        handles: dict[str, Any] = {}
        for ax in axes.flat:
            for h, name in zip(*ax.get_legend_handles_labels(), strict=True):
                handles.setdefault(name, h)
        fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=4, fontsize=7, frameon=False)
        fig.suptitle(f"{target}: {label(base)} dose response ({study.level:.0%} intervals, seeds pooled)", fontsize=9)
        fig.tight_layout(rect=(0, 0.07, 1, 1))
        path = out_dir / f"{figure_stem(target, base)}.png"
        fig.savefig(path)
        plt.close(fig)
        paths.append(path)
    study.figures = paths
    return paths


def _value_of(p: Row, metric: str) -> tuple[float, float, float] | None:
    if metric == "inter":
        return None if p.inter is None else (p.inter.point, p.inter.low, p.inter.high)
    return p.value(metric)


def _paired_of(p: Row, metric: str) -> tuple[float, float, float] | None:
    if metric == "inter":
        d = p.inter_shift
        return None if d is None else (d.point, d.low, d.high)
    rec = p.compared(metric)
    ci = rec.get("ci") or [None, None]
    return None if rec.get("diff") is None or None in ci else (rec["diff"], ci[0], ci[1])


def _series(points: list[Row], get: Callable[[Row], tuple[float, float, float] | None]
            ) -> tuple[list[float], list[tuple[float, float, float]]]:
    pairs = [(float(p.tokens or 0), v) for p in points if (v := get(p)) is not None and v[0] == v[0]]
    return [x for x, _ in pairs], [v for _, v in pairs]


def _points(ax: Any, xs: list[float], ys: list[tuple[float, float, float]], label: str) -> list[float]:
    ax.errorbar(xs, [y[0] for y in ys], yerr=[[y[0] - y[1] for y in ys], [y[2] - y[0] for y in ys]], fmt="o-",
                color="#1f5fa8", capsize=3, label=label)
    ax.set_xscale("log")
    ax.set_xticks(xs, [_k(x) for x in xs], fontsize=7)
    ax.minorticks_off()
    ax.set_xlabel("tokens seen")
    ax.grid(alpha=0.3)
    return [v for y in ys for v in y]


def _values(ax: Any, points: list[Row], metric: str, title: str) -> None:
    """The metric with its interval at each dose; vanilla's value and interval; the ideal 50."""
    from .plots import y_limits

    xs, ys = _series(points, lambda p: _value_of(p, metric))
    if not xs:
        ax.set_visible(False)
        return
    ideal = None if metric == "stereoset_lms" else 50.0
    van = points[0].value(metric, "vanilla") if metric != "inter" else _vanilla_inter(points)
    seen = _points(ax, xs, ys, "fine-tuned (seeds pooled)")
    if van is not None:
        ax.axhline(van[0], color="#555", linewidth=1, label="vanilla (band: its interval)")
        ax.axhspan(van[1], van[2], color="#999", alpha=0.15, linewidth=0)
        seen += list(van)
    if ideal is not None:
        ax.axhline(ideal, color="#555", linestyle="--", linewidth=1, label="ideal 50")
    ax.set_ylim(*y_limits(seen, ideal))
    ax.set_title(title + (" (best at 50)" if ideal is not None else " (higher is better)"), fontsize=8)


def _paired(ax: Any, points: list[Row], metric: str, title: str, lms_delta: float) -> None:
    """The paired statistic against vanilla at each dose with its interval; for SS and CS the band from 0 to the
    gate's detectable shift at that dose, for LMS the non-inferiority margin."""
    xs, ys = _series(points, lambda p: _paired_of(p, metric))
    if not xs:
        ax.set_visible(False)
        return
    seen = _points(ax, xs, ys, "paired vs vanilla, same items")
    ax.axhline(0.0, color="#555", linewidth=1)
    if metric == "stereoset_lms":
        ax.axhline(-lms_delta, color="#c0392b", linestyle=":", linewidth=1, label=f"LMS margin −{lms_delta:g}")
        seen.append(-lms_delta)
        name = "ΔLMS (arm − vanilla)"
    else:
        det = [p.decision.detectable_shift.get(metric) for p in points if _paired_of(p, metric) is not None]
        if metric != "inter" and all(d is not None and d == d for d in det):
            ax.fill_between(xs, [0.0] * len(xs), det, color="#e67e22", alpha=0.2, linewidth=0,
                            label="below the gate's detectable shift (80% power)")
            seen += det
        name = f"{title} shift toward 50" + (" (not a gate metric)" if metric == "inter" else "")
    lo, hi = min(seen), max(seen)
    pad = max(1.0, 0.1 * (hi - lo))
    ax.set_ylim(lo - pad, hi + pad)
    ax.set_title(name, fontsize=8)


def _k(tokens: float) -> str:
    """``16000`` -> ``16k``, ``1500000`` -> ``1.5M``, ``447`` -> ``447``."""
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if tokens >= size:
            return f"{tokens / size:.3g}{unit}"
    return f"{tokens:.0f}"


def _vanilla_inter(points: list[Row]) -> tuple[float, float, float] | None:
    v = next((p.inter_vanilla for p in points if p.inter_vanilla is not None), None)
    return None if v is None else (v.point, v.low, v.high)
