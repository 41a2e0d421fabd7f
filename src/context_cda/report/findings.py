"""The report's "Findings": what the evidence of this run shows and does not show, in plain words, with numbers.

Written from the paired comparisons (:class:`.evidence.Evidence`: every arm against vanilla and against every
other arm, on the same items), the vanilla row of Table 1, the registry decisions and the deviation marks of
Table 2; nothing is hard-coded to an arm, a benchmark or a bias type:

* per target, where vanilla stands (each bias score and its distance from the ideal 50);
* per comparison, the promotion gate's own judgement (:func:`context_cda.tracking.gate.judge`, worded by
  :func:`context_cda.tracking.promotion.phrases`) of SS, CS and LMS and, against vanilla, its verdict in one of
  four states (the registry's, where the register step decided the arm, else :func:`context_cda.tracking.gate.
  verdict` of the same judgement), then the other directed differences (:data:`.evidence.DIRECTION`) that are
  significant and those that are not shown, each with its interval;
* how large a shift this run could have shown at all (the detectable shift of the gate's sign-flip test, from the
  discordant share; the typical half-width of the other intervals), so a reader does not take "not shown" for
  "no effect";
* what the registry decided, and the caveats that decide how far the numbers go (a quantized model, a small
  token budget or sample, Table 2's deviations from the published protocols).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .. import layout as L
from . import evidence as E

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..evaluate.stats import Difference
    from ..tracking.gate import Judgement
    from .registry import Decisions

#: Table 1 metrics shown for vanilla: (column, title, ideal)
VANILLA_METRICS = (("stereoset_ss", "SS", 50.0), ("crows_cs", "CS", 50.0), ("stereoset_lms", "LMS", None))


def _iv(d: Difference) -> str:
    return f"{d.point:+.2f} [{d.low:+.2f}, {d.high:+.2f}]"


def comparison_sentence(a: str, b: str, diffs: Mapping[str, Difference], label: Callable[[str], str],
                        judgement: Judgement | None = None, verdict: tuple[str, str] | None = None) -> str:
    """``**Context-CDA** against vanilla — refused: not shown (underpowered: ...): not shown less biased on
    StereoSet (SS shift toward 50 +0.04 [-1.26, +1.43], sign-flip p=1.000; detectable shift ≥ 14.52); ...; no
    difference shown in ICAT +0.40 [-2.10, +2.90].``: the gate's words for its metrics, then the other directed
    differences."""
    from ..tracking.decisions import verdict_line
    from ..tracking.promotion import phrases

    parts = phrases(judgement) if judgement is not None else []
    better, worse, unseen = [], [], []
    for key, (_, name, good, bad) in E.DIRECTION.items():
        d = diffs.get(key)
        if d is None:
            continue
        way = E.direction(key, d)
        text = f"{name} {_iv(d)}"
        {"better": better, "worse": worse}.get(way, unseen).append(
            text if way not in ("better", "worse") else f"{good if way == 'better' else bad} ({text})")
    if better:
        parts.append("significantly " + "; ".join(better))
    if worse:
        parts.append("significantly " + "; ".join(worse))
    if unseen:
        parts.append("no difference shown in " + ", ".join(unseen))
    small = sorted({d.n for d in diffs.values() if d.too_small})
    if small:
        parts.append(f"only {', '.join(map(str, small))} items shared: too few to decide on")
    head = f"**{label(a)}** against {label(b)}" + (f" — {verdict_line(*verdict)}" if verdict else "")
    return head + ": " + "; ".join(parts or ["nothing to compare"]) + "."


def _vanilla_sentence(t1: pd.DataFrame, target: str) -> str | None:
    rows = t1[(t1["target"] == target) & (t1["model"] == L.VANILLA)]
    if rows.empty:
        return None
    r = rows.iloc[0]
    parts = []
    for col, title, ideal in VANILLA_METRICS:
        v = r.get(col)
        if v is None or v != v:
            continue
        lo, hi = r.get(f"{col}_ci_low"), r.get(f"{col}_ci_high")
        iv = f" [{lo:.2f}, {hi:.2f}]" if lo == lo and hi == hi and lo is not None else ""
        side = ""
        if ideal is not None:
            side = (" (an interval that holds 50: no bias shown)" if iv and lo <= ideal <= hi else
                    f" ({abs(v - ideal):.2f} points {'above' if v > ideal else 'below'} the unbiased 50)")
        parts.append(f"{title} {v:.2f}{iv}{side}")
    return f"Vanilla `{target}`: " + "; ".join(parts) + "." if parts else None


def resolution(diffs: Sequence[Mapping[str, Difference]]) -> dict[str, float]:
    """The median half-width of the intervals per directed key: the size of difference this run can tell apart."""
    out = {}
    for key in E.DIRECTION:
        widths = [(d[key].high - d[key].low) / 2 for d in diffs if key in d and d[key].high == d[key].high]
        if widths:
            out[key] = statistics.median(widths)
    return out


def detectable(judgements: Sequence[Judgement]) -> dict[str, float]:
    """The median detectable shift per gate metric over the judgements (arms against vanilla)."""
    from ..tracking.gate import label

    out: dict[str, list[float]] = {}
    for j in judgements:
        for m, c in j.bias.items():
            out.setdefault(label(m), []).append(c.detectable)
    return {k: statistics.median(v) for k, v in out.items()}


def verdict_of(ev: E.Evidence, decisions: Decisions | None, target: str, arm: str) -> tuple[str, str] | None:
    """An arm's verdict: the registry's, where the register step decided it, else the gate's decision against
    vanilla on the same evidence (:func:`context_cda.tracking.promotion.decide`, kept in ``ev.decisions``; an
    evidence built without it: :func:`context_cda.tracking.gate.verdict` of its judgement)."""
    from ..tracking.gate import verdict

    for r in decisions.rows if decisions else []:
        if (r.target, r.arm) == (target, arm) and r.verdict:
            return r.verdict, r.note
    if (target, arm) in ev.decisions:
        d = ev.decisions[(target, arm)]
        return d.verdict, d.note
    j = ev.judgement(target, arm)
    return verdict(j) if j is not None else None


def target_lines(ev: E.Evidence, t1: pd.DataFrame, target: str, label: Callable[[str], str],
                 n_items: Mapping[str, int], decisions: Decisions | None = None) -> list[str]:
    """The findings of one target: vanilla, the comparisons with vanilla, between arms, what could be shown."""
    lines = [f"### {target}", ""]
    van = _vanilla_sentence(t1, target)
    lines += [van, ""] if van else []
    pairs = [(a, b, d) for (t, a, b), d in ev.pairs.items() if t == target]
    first = [p for p in pairs if p[1] == L.VANILLA] + [p for p in pairs if p[1] != L.VANILLA]
    for a, b, d in first:
        verdict = verdict_of(ev, decisions, target, a) if b == L.VANILLA else None
        lines.append(f"- {comparison_sentence(a, b, d, label, ev.judgements.get((target, a, b)), verdict)}")
    lines += _could_see(ev, target, [d for _, _, d in pairs], n_items)
    return [*lines, ""]


def _could_see(ev: E.Evidence, target: str, diffs: list[Mapping[str, Difference]],
               n_items: Mapping[str, int]) -> list[str]:
    """How small a shift (and a difference) this run could have shown."""
    res = resolution(diffs)
    det = detectable([j for (t, _, b), j in ev.judgements.items() if t == target and b == L.VANILLA])
    if not (res or det):
        return []
    items = ", ".join(f"{v:,} {k} items" for k, v in n_items.items() if k in ("stereoset", "crows"))
    said = []
    if det:
        sizes = ", ".join(f"{k} {v:.1f}" for k, v in det.items())
        said.append("the smallest shift toward 50 the gate's paired sign-flip test detects with 80% power against "
                    f"vanilla (from the share of items that changed) is about {sizes} points")
    if res:
        widths = ", ".join(f"{E.DIRECTION[k][1]} ±{w:.1f}" for k, w in res.items())
        said.append(f"its other paired intervals are about {widths} points wide (half-widths)")
    return ["", f"What this run could see ({ev.level:.0%}{'; ' + items if items else ''}): {'; '.join(said)}. A "
            "shift smaller than that is not shown by this evidence, which is not the same as shown to be absent."]


def _decision_line(decisions: Decisions | None) -> list[str]:
    from ..tracking.decisions import verdict_line

    if not decisions:
        return []
    words = [f"{r.target}/{r.arm}" + (f" (v{r.version})" if r.version else "")
             + f": {verdict_line(r.verdict or r.decision, r.note)}" for r in decisions.rows]
    return [f"The promotion gate's verdicts: {'; '.join(words)}. The reasons, in numbers, are under Registry "
            "decisions.", ""]


def caveats(facts: Mapping[str, Any], t2: pd.DataFrame | None) -> list[str]:
    """What limits how far the numbers go: ``facts`` (from the setup: ``quantized`` targets, the ``token_budgets``,
    ``max_items``, the benchmarks ``not_scored`` for some models, the ``projections`` that remove most dimensions)
    and Table 2's deviation marks."""
    out = []
    if facts.get("quantized"):
        out.append(f"{', '.join(facts['quantized'])} computed from quantized weights (see Setup), so these are not "
                   "the full-precision model's numbers")
    budgets = facts.get("token_budgets") or []
    if len(budgets) == 1:
        out.append(f"each arm trained on {budgets[0]:,} tokens, far below the paper's budget")
    elif budgets:
        out.append(f"the arms trained on {' or '.join(f'{b:,}' for b in budgets)} tokens (one budget per budget "
                   "group, see Setup), far below the paper's budget")
    if facts.get("max_items"):
        out.append(f"the per-epoch benchmarks were cut to their first {facts['max_items']} items")
    for why, rows in (facts.get("not_scored") or {}).items():
        out.append("not scored: " + "; ".join(f"{', '.join(models)} on {', '.join(b)}" for models, b in rows)
                   + f" ({why})")
    out += list(facts.get("projections") or [])  # a projection that removes most dimensions
    if t2 is not None and not t2.empty and any(t2.attrs.get("marks", {}).values()):
        out.append("Table 2's numbers were computed under deviations from the published protocols (the letters "
                   "beside them): they show that the extrinsic machinery runs, not an effect on bias")
    return [("Caveats: " + "; ".join(out) + "."), ""] if out else []


def markdown(ev: E.Evidence | None, t1: pd.DataFrame, targets: list[str], label: Callable[[str], str],
             n_items: Mapping[str, int], decisions: Decisions | None, facts: Mapping[str, Any],
             t2: pd.DataFrame | None) -> list[str]:
    """The section's Markdown lines."""
    lines = ["## Findings", ""]
    if ev is None or not ev.pairs:
        lines += ["No paired evidence was found (no per-item predictions of vanilla and an arm on the same items), "
                  "so this run shows no difference between models.", ""]
    else:
        for target in targets:
            lines += target_lines(ev, t1, target, label, n_items, decisions)
    return lines + _decision_line(decisions) + caveats(facts, t2)
