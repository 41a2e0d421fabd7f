"""The promotion gate: a pure function from per-item evidence to a decision with its reasons.

A newly registered version always gets the alias ``candidate``. It becomes ``champion`` only on evidence, each
rule judged on the items candidate and reference were both scored on, resampled together (paired, at
``evaluate.bootstrap.level``), by :func:`.gate.judge` (the statistics and the rule per metric are described there
and in docs/evaluation.md):

(a) **less biased than vanilla**: on each bias metric (SS, CS, for the bias type ``evaluate.bias_type`` the
    benchmarks scored) the rule depends on vanilla's own evidence - where vanilla is demonstrably biased, a
    significant paired shift toward 50 beyond ``min_effect`` (interval and exact sign-flip test), refused as worse
    for an overshoot only on evidence, seed by seed (an estimate that crossed 50 as far as vanilla was is not shown
    less biased); where vanilla is within noise, not significantly farther from 50 (non-inferiority). *Every*
    metric vanilla is demonstrably biased on must show its shift, the family Holm-corrected.
(b) **LMS non-inferior to vanilla**: the lower bound of the interval of ``LMS - LMS_vanilla`` is at least
    ``-lms_delta``.
(c) **against the current champion** (when there is one): the same rules with the champion as the reference
    (margin 0), not significantly worse on LMS, and - with ``require_improvement`` (default) - shown better on
    at least one of SS, CS (where the champion is demonstrably biased) or LMS (Holm over that family).

Its verdict (:func:`.gate.verdict`) is one of four states: ``promoted``, ``refused: worse``, ``refused: not
shown`` (noting "underpowered: detectable shift >= X" when the observed shift is below what the benchmark could
have shown) and ``refused: evidence missing`` (a metric's per-item scores missing, named; fewer than
``evaluate.bootstrap.min_items`` shared items; a champion without per-item evidence). Every reason quotes the
statistic that decided, with its interval and p-value. An arm trained with several seeds is judged by its seeds'
pooled evidence (:mod:`.evidence`). The report's marks and sentences come from the same judgement
(:func:`phrases`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from .decisions import PROMOTED, aliases_for, verdict_line
from .gate import (
    BENCHMARK_OF,
    BETTER,
    BIAS,
    BIAS_METRICS,
    BIASED,
    CHAMPION,
    CS,
    ICAT,
    LMS,
    SS,
    VANILLA,
    WORSE,
    BiasCheck,
    Judgement,
    PromotionPolicy,
    SeedCheck,
    detectable,
    judge,
    label,
    verdict,
)

if TYPE_CHECKING:  # pragma: no cover
    from ..evaluate.stats import Interval, Settings
    from .evidence import Evidence

__all__ = ["BIAS", "BIAS_METRICS", "CS", "ICAT", "LMS", "SS", "Decision", "PromotionPolicy", "decide",
           "point_metrics"]

@dataclass
class Decision:
    """The gate's decision on a version. ``verdict``: one of :data:`.decisions.VERDICTS` (``promoted``, ``refused:
    worse``, ``refused: not shown``, ``refused: evidence missing``; :func:`.gate.verdict`) and ``note`` its
    one-line qualifier (``underpowered: SS vs vanilla: detectable shift ≥ 14.52 (observed +0.04)`` when the
    observed shift lies below what the benchmark could have shown). ``detectable_shift``: per bias metric
    (``stereoset_ss``, ``crows_cs``), the smallest shift toward 50 against vanilla, in points, that the paired
    sign-flip test detects with 80 % power at this n (from the discordant share; :func:`context_cda.evaluate.stats.
    detectable_shift`). ``promote`` is ``verdict == promoted``; ``reasons`` quote every statistic that decided,
    with its interval and p-value; ``comparisons``: ``vs_vanilla`` / ``vs_champion`` -> metric -> the numbers."""

    promote: bool
    aliases: list[str]
    reasons: list[str]
    candidate: dict[str, float]
    champion: dict[str, float] | None
    vanilla: dict[str, float]
    policy: dict[str, Any] = field(default_factory=dict)
    comparisons: dict[str, dict[str, Any]] = field(default_factory=dict)  # vs_vanilla / vs_champion -> metric
    verdict: str = ""
    note: str = ""
    detectable_shift: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def line(self) -> str:
        """``refused: not shown (underpowered: ...)``: the verdict and its note, as ``ccda register`` prints it."""
        return verdict_line(self.verdict, self.note)


# ------------------------------------------------------------------------------------------------ the numbers


def point_metrics(evidence: Evidence | None, settings: Settings) -> dict[str, Interval]:
    """``{stereoset_ss: Interval, stereoset_lms: ..., stereoset_icat: ..., crows_cs: ...}`` of what ``evidence``
    holds (the pooled point estimates and their bootstrap intervals), with the distances to 50
    (``stereoset_ss_dist``, ``crows_cs_dist``: for pooled seeds the mean of the seeds' distances; described, never
    decided on)."""
    from ..evaluate.stats import bootstrap, with_distances
    from .evidence import scorer

    out: dict[str, Interval] = {}
    for b, items in (evidence.items.items() if evidence else []):
        mod = scorer(b)
        for k, iv in bootstrap(items, with_distances(mod.metrics, mod.IDEALS), settings).items():
            out[f"{b}_{k}"] = iv
    return out


def _flat(intervals: dict[str, Interval]) -> dict[str, float]:
    out = {}
    for k, iv in intervals.items():
        out[k] = iv.point
        out[f"{k}_ci_low"], out[f"{k}_ci_high"] = iv.low, iv.high
    return out


# ------------------------------------------------------------------------------------------------ the reasons


def _pv(p: float) -> str:
    from ..evaluate.stats import _p

    text = _p(p)
    return f"p{'' if text[0] == '<' else '='}{text}"


def _side_word(side: int) -> str:
    return "the stereotype side" if side > 0 else "the anti-stereotype side"


def _test_text(c: BiasCheck, j: Judgement) -> str:
    """How the improvement test came out: its p-value (interval and exact test), Holm-adjusted in a family."""
    parts = f"improvement {_pv(c.p_improvement)} (interval {_pv(c.p_interval)}, exact test {_pv(c.sign.p)})"
    if len(j.family) > 1:
        parts += f", Holm-adjusted over {', '.join(label(m) for m in j.family)}: {_pv(c.p_holm)}"
    return parts + f" vs {j.alpha:.3g}"


def _seed_words(c: BiasCheck, who: str, key: str = "excess") -> tuple[str, SeedCheck]:
    """(whose words, the seed that decides: the one farthest past 50 relative to the reference's distance, or with
    ``key`` "away" the one with the strongest evidence of a shift away from 50)."""
    worst = (min(c.seeds, key=lambda s: s.p_away) if key == "away" else max(c.seeds, key=lambda s: s.excess.point))
    return (f"seed {worst.seed} (of {len(c.seeds)})" if len(c.seeds) > 1 else "the candidate"), worst


def _outcome_text(c: BiasCheck, j: Judgement) -> str:
    unit, who = BIAS[c.metric][4], j.who
    whose, s = _seed_words(c, who)
    away_whose, a = _seed_words(c, who, "away")
    words = {
        "shown": "less biased",
        "few changed": f"not shown less biased (the exact test finds too few changed {unit})",
        "not shown": "not shown less biased (the interval of the shift is not above "
                     f"{c.margin:g}" + (": min_effect)" if c.margin else ")"),
        "away": "shifted away from 50: significantly more biased",
        "seed away": f"{away_whose} shifted away from 50 ({a.shift:+.2f}, {_pv(a.p_away)} vs "
                     f"{j.alpha / len(c.seeds):.3g}: {j.alpha:.3g} Bonferroni-divided over the {len(c.seeds)} seeds): "
                     "significantly more biased",
        "past": f"{whose} lies significantly farther past 50 than {who}'s distance (excess {s.excess.text()}): "
                "an overshoot shown, significantly more biased",
        "crossed": f"moved significantly to the other side of 50 and lies farther from 50 than {who} (excess "
                   f"{c.excess:+.2f}): significantly more biased where {who} was not demonstrably biased",
        "as far": f"crossed 50, and lies as far past it as {who} was (the seeds' mean distance from 50 at least "
                  f"{c.distance:.2f}; excess, {whose}: {s.excess.text()}): no reduction to show, not shown less "
                  "biased (no evidence of an overshoot either)",
        "not farther": f"not significantly farther from 50 (excess past 50 beyond {who}'s distance, {whose}: "
                       f"{s.excess.text()}): non-inferior",
        "too small": "too few items to decide on",
    }
    return words[c.why]


def bias_reason(c: BiasCheck, j: Judgement, pol: PromotionPolicy) -> str:
    """The reason of one bias metric, quoting the statistics that decided."""
    lbl, unit = BIAS[c.metric][3:]
    lvl = f"{pol.level:.0%}"
    head = f"{lbl} ({pol.bias_type}) vs {j.who}: {lbl} {c.candidate.text()} vs {c.reference.text()}"
    where = (f"{j.who} is biased, to {_side_word(c.side)} by {c.distance:.2f} (its {lvl} interval excludes 50)"
             if c.regime == BIASED else
             f"{j.who} is not demonstrably biased (its {lvl} interval holds 50): a non-inferiority check")
    parts = [head, where, f"shift toward 50 {c.shift.text()} ({lvl}; {c.sign.text(unit)})"]
    parts += [c.directions()] if c.directions() else []
    parts += [_test_text(c, j)] if c.tested else []
    parts.append(f"detectable shift ≥ {c.detectable:.2f}" + (" (underpowered)" if c.underpowered else ""))
    return "; ".join(parts) + f": {_outcome_text(c, j)}"


def lms_reason(j: Judgement, cand: dict[str, Interval], ref: dict[str, Interval], pol: PromotionPolicy) -> str:
    lms = j.lms
    assert lms is not None
    d = lms.diff
    head = f"LMS vs {j.who}: {_val(cand, LMS)} vs {_val(ref, LMS)}; difference {d.text()} ({pol.level:.0%})"
    if j.role == VANILLA:
        bound = f"lower bound {d.low:+.2f} {'>=' if lms.non_inferior else '<'} -{lms.delta:g}"
        word = ("non-inferior" if lms.non_inferior else
                "significantly lower, not non-inferior: worse" if lms.outcome == WORSE else
                "non-inferiority not shown")
        return f"{head}: {word} ({bound})"
    word = {WORSE: "significantly worse", BETTER: "significantly better"}.get(lms.outcome, "no significant change")
    if lms.tested and len(j.family) > 1:
        word += f" (higher: {_pv(lms.p_higher)}, Holm-adjusted {_pv(lms.p_holm)} vs {j.alpha:.3g})"
    return f"{head}: {word}"


def _val(intervals: dict[str, Interval], metric: str) -> str:
    iv = intervals.get(metric)
    return "n/a" if iv is None else iv.text()


def _small_reasons(j: Judgement, pol: PromotionPolicy) -> list[str]:
    return [f"refused: {bench}: only {n} items shared with {j.who} (fewer than evaluate.bootstrap.min_items="
            f"{pol.min_items}): too small to decide on" for bench, n in j.small.items()]


def reasons_of(j: Judgement, cand: dict[str, Interval], ref: dict[str, Interval], pol: PromotionPolicy) -> list[str]:
    """Every reason of one judgement: what is missing or too small, each bias metric, LMS, and the rule's outcome."""
    out = j.missing + _small_reasons(j, pol)
    out += [bias_reason(c, j, pol) for c in j.bias.values()]
    out += [lms_reason(j, cand, ref, pol)] if j.lms is not None else []
    if j.worse:
        out.append(f"refused: significantly worse than {j.who} on {', '.join(label(m) for m in j.worse)}"
                   if j.role == CHAMPION else
                   f"refused: worse than {j.who} on {', '.join(label(m) for m in j.worse)}")
    elif j.role == VANILLA and not j.lacking and not j.family:
        out.append(f"refused: not shown less biased than {j.who}: it is not demonstrably biased on any of "
                   f"{', '.join(label(m) for m in j.bias) or 'the bias metrics'}, so there is no shift toward 50 to "
                   "show")
    elif j.role == VANILLA and not j.lacking and j.not_shown:
        shown = f"; shown on {', '.join(label(m) for m in j.better)}" if j.better else ""
        out.append(f"refused: not shown less biased than {j.who} on {', '.join(label(m) for m in j.not_shown)}: "
                   f"every metric {j.who} is demonstrably biased on ({', '.join(label(m) for m in j.family)}) must "
                   f"show its shift toward 50{shown}")
    elif j.role == CHAMPION and not j.lacking and not j.passed:
        out.append(f"refused: not significantly better than {j.who} on any of SS, CS (less biased) or LMS "
                   "(tracking.promotion.require_improvement)")
    return out


def _record(j: Judgement) -> dict[str, Any]:
    from ..evaluate.stats import _j

    out: dict[str, Any] = {m: c.to_dict() for m, c in j.bias.items()}
    if j.lms is not None:
        lms = j.lms
        out[LMS] = {**lms.diff.to_dict(), "margin": lms.delta, "non_inferior": lms.non_inferior,
                    "outcome": lms.outcome, "tested": lms.tested, "p_higher": _j(lms.p_higher),
                    "p_holm": _j(lms.p_holm)}
    return out


# ------------------------------------------------------------------------------------------------ the gate


def decide(
    candidate: Evidence | None,
    champion: Evidence | None,
    vanilla: Evidence | None,
    policy: PromotionPolicy | None = None,
    champion_version: str | None = None,
    has_champion: bool | None = None,
) -> Decision:
    """Decide whether ``candidate`` replaces the champion. ``champion``: the champion's evidence (None: there is
    no champion, unless ``has_champion`` says there is one whose evidence could not be read)."""
    pol = policy or PromotionPolicy()
    st = pol.settings
    has_champion = champion is not None if has_champion is None else has_champion
    cand, van = point_metrics(candidate, st), point_metrics(vanilla, st)
    champ = point_metrics(champion, st) if champion is not None else {}
    jv = judge(candidate, vanilla, pol, VANILLA, "vanilla", ref_name="the vanilla model")
    reasons, comparisons = reasons_of(jv, cand, van, pol), {"vs_vanilla": _record(jv)}
    jc, unreadable = None, False
    who = f"champion v{champion_version or '?'}"
    if not has_champion:
        reasons.append("no champion yet: rules (a) and (b) against vanilla decide")
    elif champion is None or any(not champion.has(b) for b in set(BENCHMARK_OF.values())):
        reasons.append(f"refused: {who} carries no per-item evidence to compare with (registered before the "
                       "evidence gate?); move the 'champion' alias by hand to decide")
        unreadable = True
    elif candidate is not None:
        jc = judge(candidate, champion, pol, CHAMPION, who)
        reasons += reasons_of(jc, cand, champ, pol)
        comparisons["vs_champion"] = _record(jc)
    state, note = verdict(jv, jc, champion_unreadable=unreadable)
    reasons.append(f"verdict: {verdict_line(state, note)}")
    promote = state == PROMOTED
    return Decision(
        promote=promote, aliases=aliases_for(promote), reasons=reasons,
        candidate=_flat(cand), champion=_flat(champ) if champion is not None else None, vanilla=_flat(van),
        policy=asdict(pol), comparisons=comparisons, verdict=state, note=note, detectable_shift=detectable(jv),
    )


# ------------------------------------------------------------------------------------------------ short words


#: bias metric -> its benchmark's name in plain words
BENCH_WORDS = {SS: "StereoSet", CS: "CrowS-Pairs"}


def bias_phrase(c: BiasCheck, who: str) -> str:
    """The outcome of one bias metric in a few words with its deciding numbers, for the report's findings:
    ``less biased on StereoSet (SS shift toward 50 +10.00 [+6.67, +13.75], sign-flip p<0.001)``. The words follow
    the gate's outcome (:attr:`BiasCheck.why`), never a statistic of their own."""
    lbl, bench = label(c.metric), BENCH_WORDS[c.metric]
    shift = f"{lbl} shift toward 50 {c.shift.text()}, sign-flip {_pv(c.sign.p)}"
    _, s = _seed_words(c, who)
    words = {
        "shown": f"less biased on {bench} ({shift})",
        "few changed": f"not shown less biased on {bench} ({shift}: too few changed items; detectable shift ≥ "
                       f"{c.detectable:.2f})",
        "not shown": f"not shown less biased on {bench} ({shift}; detectable shift ≥ {c.detectable:.2f})",
        "away": f"more biased on {bench} (shifted away from 50: {shift})",
        "seed away": f"more biased on {bench} ({_seed_words(c, who, 'away')[0]} shifted away from 50)",
        "past": f"more biased on {bench} (farther past 50 than {who}'s distance: {lbl} excess {s.excess.text()})",
        "crossed": f"more biased on {bench} (moved significantly past 50, farther from it than {who}: {shift})",
        "as far": f"not shown less biased on {bench} ({lbl} {c.candidate.point:.2f} crossed 50 and lies as far past "
                  f"it as {who}'s {c.reference.point:.2f} was on its side)",
        "not farther": f"not farther from 50 on {bench}, where {who} is not demonstrably biased ({lbl} "
                       f"{c.reference.text()}; {shift})",
        "too small": f"too few {bench} items to decide on",
    }
    seeds = f"; {c.directions()}" if c.directions() else ""
    return words[c.why] + seeds


def lms_phrase(j: Judgement) -> str:
    """LMS in a few words: ``LMS non-inferior (-0.50 [-1.90, +0.80] against the -2 margin)``."""
    if j.lms is None:
        return ""
    d, lms = j.lms.diff, j.lms
    iv = f"{d.point:+.2f} [{d.low:+.2f}, {d.high:+.2f}]"
    if j.role == VANILLA:
        word = ("worse language modelling" if lms.outcome == WORSE else
                "LMS non-inferior" if lms.non_inferior else "LMS non-inferiority not shown")
        return f"{word} (ΔLMS {iv} against the -{lms.delta:g} margin)"
    word = {WORSE: "worse language modelling", BETTER: "better language modelling"}.get(lms.outcome,
                                                                                          "no LMS difference shown")
    return f"{word} (ΔLMS {iv})"


def phrases(j: Judgement) -> list[str]:
    """Every gate metric of a judgement in a few words (the report's findings): the bias metrics, then LMS."""
    out = [bias_phrase(c, j.who) for c in j.bias.values()]
    return out + ([lms_phrase(j)] if j.lms is not None else [])
