"""The promotion gate's judgement of a model against a reference, metric by metric, on per-item evidence: the one
function (:func:`judge`) and the one verdict (:func:`verdict`) the register step, the registry's tags and the
report all use.

For each bias metric (SS, CS; :data:`BIAS`) the rule depends on what the *reference* (vanilla, or the champion)
shows on its own:

* **biased** - its interval excludes 50. Let ``s`` be its side (+1 above 50) and ``b`` its distance. The candidate
  is *better* when its **shift toward 50**, ``s * (reference - candidate)`` (paired, the seeds' pooled shift),
  exceeds the margin (``min_effect`` against vanilla, 0 otherwise) with confidence: the percentile interval above
  the margin and the exact paired sign-flip test rejecting "no change", each at the family's Holm-adjusted level
  (the test's p-value is the larger of the two, :func:`context_cda.evaluate.stats.percentile_p` and
  :func:`context_cda.evaluate.stats.sign_flip`). An **overshoot** is judged apart, on the seed's paired **excess**
  ``s * (100 - seed - reference)`` (how much farther past 50 than the reference's distance): *worse* only on
  evidence (a seed's excess interval above 0); a candidate that crossed 50 and lies, by its estimate, as far past
  it as the reference was (the seeds' mean distance at least ``b``) is *not shown* less biased - no reduction to
  show, and no evidence against it either.
* **within noise** - its interval holds 50: nothing to reduce that this sample shows, so the metric is a
  **non-inferiority** check: the candidate must not be significantly farther from 50 - neither significantly
  shifted away from 50 on the reference's side (interval below 0 and the sign-flip test agreeing), nor moved
  significantly to the other side of 50 so far that its estimate lies farther from 50 than the reference's (the
  reference's side is noise, so this is the same harm mirrored), nor, for any seed, significantly farther past 50
  than the reference's distance or significantly shifted away.

Every metric the reference is demonstrably biased on is tested for improvement and, against vanilla, **each must
show it**: a candidate that fixed one benchmark and left the other biased is not less biased than vanilla. The
family's p-values are Holm-corrected (:func:`context_cda.evaluate.stats.holm`): each metric's outcome is a claim the reasons
and the report state on its own ("less biased on StereoSet"), and Holm keeps the chance of any false one at most
``1 - level`` (the verdict, which needs all of them, is then conservative: an intersection-union test alone would
need no correction). Against the champion the family also holds "LMS higher" and one shown improvement suffices
(``require_improvement``). LMS is otherwise a non-inferiority margin against vanilla (the paired interval's lower
end at least ``-lms_delta``) and "not significantly lower" against the champion. Every directional claim is
one-sided at ``(1 - level) / 2`` (the end of the printed two-sided interval; the exact test's two-sided p below
``1 - level``); the seed-by-seed harm tests divide that by the number of seeds (Bonferroni), so more seeds never
make a refusal likelier.

:func:`verdict` turns judgements into one of four states (:mod:`.decisions`): ``promoted``, ``refused: worse``
(evidence against the candidate on some rule: significantly more biased, an overshoot, or LMS significantly lower
past what the rule allows), ``refused: evidence missing`` (a metric without per-item scores, too few shared
items, a champion without evidence) and ``refused: not shown`` (no evidence against it, but the improvement - or
LMS non-inferiority - was not shown), with a note saying when the observed shift is below what the benchmark could
have shown (``underpowered: detectable shift >= X``, :func:`context_cda.evaluate.stats.detectable_shift`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from . import decisions as D

if TYPE_CHECKING:  # pragma: no cover
    from ..evaluate.stats import Difference, Draws, Interval, Items, Settings, SignFlip
    from .evidence import Evidence

SS = "stereoset_ss"
LMS = "stereoset_lms"
ICAT = "stereoset_icat"
CS = "crows_cs"
IDEAL = 50.0
#: bias metric -> (benchmark, metric key, per-item column the sign-flip test reads, label, items' name)
BIAS: dict[str, tuple[str, str, str, str, str]] = {
    SS: ("stereoset", "ss", "ss", "SS", "clusters"),
    CS: ("crows", "cs", "win", "CS", "pairs"),
}
#: every gate metric -> its benchmark
BENCHMARK_OF = {SS: "stereoset", CS: "crows", LMS: "stereoset"}
BIAS_METRICS = tuple(BIAS)
TOLERANCE = 1e-9  # metrics are means of 0/1 decisions; float noise is far below this
#: what one metric shows against the reference
BETTER, SAME, WORSE = "better", "same", "worse"
#: the reference's own evidence on a bias metric
BIASED, NOISE = "biased", "within noise"
#: against whom: vanilla (margins of the policy; LMS non-inferiority) or a champion / another arm (margin 0)
VANILLA, CHAMPION = "vanilla", "champion"


@dataclass(frozen=True)
class PromotionPolicy:
    lms_delta: float = 2.0
    min_effect: float = 0.0
    require_improvement: bool = True
    level: float = 0.95
    resamples: int = 1000
    seed: int = 0
    min_items: int = 20
    bias_type: str = "gender"  # what the benchmarks scored (evaluate.bias_type); named in the reasons

    @classmethod
    def from_config(cls, promotion: Any, bootstrap: Any = None, bias_type: str = "gender") -> PromotionPolicy:
        """From ``tracking.promotion``, ``evaluate.bootstrap`` (None: the bootstrap defaults) and
        ``evaluate.bias_type``."""
        from ..evaluate.stats import Settings

        b = Settings.of(bootstrap)
        return cls(lms_delta=float(promotion.lms_delta), min_effect=float(promotion.min_effect),
                   require_improvement=bool(promotion.require_improvement), level=b.level,
                   resamples=b.resamples, seed=b.seed, min_items=b.min_items, bias_type=str(bias_type))

    @property
    def settings(self) -> Settings:
        from ..evaluate.stats import Settings

        return Settings(level=self.level, resamples=self.resamples, seed=self.seed, min_items=self.min_items)

    @property
    def alpha(self) -> float:
        return 1.0 - self.level


@dataclass(frozen=True)
class SeedCheck:
    """One training seed of the candidate against the reference: its value, its shift toward 50 (point), its
    ``excess`` - ``s * (100 - seed - reference)``, paired: how much farther past 50 it lies than the reference's
    distance (negative: not that far) - and the one-sided p-values of the two harms judged seed by seed:
    ``p_past`` of "excess <= 0" (percentile, :func:`context_cda.evaluate.stats.percentile_p`) and ``p_away`` of "not
    shifted away from 50" (the larger of the percentile p of "shift >= 0" and the seed's exact sign-flip p)."""

    seed: int | None
    value: float
    shift: float
    excess: Difference
    p_past: float = 1.0
    p_away: float = 1.0


@dataclass(frozen=True)
class BiasCheck:
    """One bias metric of the candidate against a reference on their shared items (fields filled by
    :func:`judge`: ``tested``, ``p_holm``, ``outcome``, ``why``, ``alpha``, ``detectable``).

    ``side``: the reference's side of 50 (+1 above, -1 below; at 50 the candidate's side orients). ``regime``:
    :data:`BIASED` or :data:`NOISE`. ``shift``: the pooled paired shift toward 50, ``side * (reference -
    candidate)``; ``p_interval``: the percentile interval's p-value of "shift <= margin"; ``sign``: the exact
    sign-flip test; ``seeds``: per training seed. ``detectable``: the smallest shift the sign-flip test detects
    with 80 % power at this metric's level (``alpha``), from the discordant share."""

    metric: str
    side: int
    regime: str
    reference: Interval
    candidate: Interval
    shift: Difference
    p_interval: float
    margin: float
    sign: SignFlip
    seeds: tuple[SeedCheck, ...]
    tested: bool = False
    p_holm: float = math.nan
    outcome: str = SAME
    why: str = ""  # shown | not shown | few changed | away | seed away | past | crossed | as far | not farther | too small
    alpha: float = 0.05
    detectable: float = math.nan

    @property
    def distance(self) -> float:
        """The reference's distance from 50."""
        return abs(self.reference.point - IDEAL)

    @property
    def excess(self) -> float:
        """The recipe's average run's excess (the mean of its seeds'): how much farther past 50 than the reference's
        distance the pooled estimate lies (negative: not that far)."""
        return sum(s.excess.point for s in self.seeds) / max(len(self.seeds), 1)

    @property
    def as_far(self) -> bool:
        """By its estimate the candidate is not less biased for having crossed 50: some seed lies past 50 and the
        seeds' mean distance from 50 is at least the reference's (one seed: ``excess >= 0``). Not evidence of an
        overshoot (that is ``p_past``), only the absence of an estimated reduction."""
        crossed = any(self.side * (s.value - IDEAL) < -TOLERANCE for s in self.seeds)
        mean_distance = sum(abs(s.value - IDEAL) for s in self.seeds) / max(len(self.seeds), 1)
        return crossed and mean_distance >= self.distance - TOLERANCE

    @property
    def p_improvement(self) -> float:
        """The p-value of "shifted toward 50 by more than the margin": interval and exact test must both reject."""
        return max(self.p_interval, self.sign.p)

    @property
    def underpowered(self) -> bool:
        """Improvement not shown, and the observed shift is below what the benchmark could have shown."""
        return self.tested and self.outcome != BETTER and self.shift.point < self.detectable - TOLERANCE

    def directions(self) -> str:
        """``seed 13 toward 50 (+10.00), seed 14 away from 50 (-2.50): the seeds disagree in direction`` (several
        seeds; "" for one)."""
        if len(self.seeds) < 2:
            return ""
        word = {1: "toward 50", -1: "away from 50", 0: "unchanged"}
        signs = [0 if abs(s.shift) <= TOLERANCE else (1 if s.shift > 0 else -1) for s in self.seeds]
        parts = [f"seed {s.seed} {word[g]} ({s.shift:+.2f})" for s, g in zip(self.seeds, signs, strict=True)]
        agree = "the seeds disagree in direction" if {1, -1} <= set(signs) else "the seeds agree in direction"
        return ", ".join(parts) + f": {agree}"

    def to_dict(self) -> dict[str, Any]:
        from ..evaluate.stats import _j

        return {**self.shift.to_dict(), "statistic": "shift toward 50: side * (reference - candidate)",
                "side": self.side, "regime": self.regime, "reference": _j(self.reference.point),
                "reference_ci": [_j(self.reference.low), _j(self.reference.high)],
                "candidate": _j(self.candidate.point), "candidate_ci": [_j(self.candidate.low), _j(self.candidate.high)],
                "reference_distance": _j(self.distance), "margin": self.margin, "p_interval": _j(self.p_interval),
                "sign_test_p": _j(self.sign.p), "discordant": self.sign.discordant, "sign_test_exact": self.sign.exact,
                "tested": self.tested, "p_holm": _j(self.p_holm), "alpha": self.alpha,
                "detectable_shift": _j(self.detectable), "underpowered": self.underpowered,
                "seeds": [{"seed": s.seed, "value": _j(s.value), "shift": _j(s.shift), "excess": _j(s.excess.point),
                           "excess_ci": [_j(s.excess.low), _j(s.excess.high)]} for s in self.seeds],
                "outcome": self.outcome, "why": self.why}


@dataclass(frozen=True)
class LmsCheck:
    """LMS of the candidate against the reference: the paired difference ``candidate - reference``, the margin
    it must stay within (``lms_delta`` against vanilla, 0 against a champion), the percentile p-value of "not
    higher" (the champion family's LMS test) and what it shows (filled by :func:`judge`)."""

    diff: Difference
    delta: float
    p_higher: float
    tested: bool = False
    p_holm: float = math.nan
    outcome: str = SAME  # better (significantly higher) | same | worse (see :func:`_lms_outcome`)
    non_inferior: bool = True


@dataclass
class Judgement:
    """The candidate against one reference: per bias metric a :class:`BiasCheck`, the :class:`LmsCheck`, what
    could not be judged (``missing``: refusals naming the metric; ``small``: benchmark -> items shared, below
    ``min_items``) and the Holm family (metrics tested for improvement)."""

    role: str
    who: str
    alpha: float
    require_improvement: bool
    bias: dict[str, BiasCheck] = field(default_factory=dict)
    lms: LmsCheck | None = None
    missing: list[str] = field(default_factory=list)
    small: dict[str, int] = field(default_factory=dict)
    family: list[str] = field(default_factory=list)

    def outcomes(self) -> dict[str, str]:
        out = {m: c.outcome for m, c in self.bias.items()}
        if self.lms is not None:
            out[LMS] = self.lms.outcome
        return out

    @property
    def worse(self) -> list[str]:
        return [m for m, o in self.outcomes().items() if o == WORSE]

    @property
    def better(self) -> list[str]:
        """The metrics shown better (those of the Holm family that were rejected)."""
        return [m for m in self.family if self.outcomes().get(m) == BETTER]

    @property
    def not_shown(self) -> list[str]:
        """The metrics of the Holm family not shown better."""
        return [m for m in self.family if self.outcomes().get(m) != BETTER]

    def small_metrics(self) -> set[str]:
        """The gate metrics of the benchmarks with too few shared items."""
        return {m for m, b in BENCHMARK_OF.items() if b in self.small}

    @property
    def lacking(self) -> bool:
        """Something could not be judged: a metric's scores missing, or too few shared items."""
        return bool(self.missing or self.small)

    @property
    def passed(self) -> bool:
        if self.lacking or self.worse or self.lms is None:
            return False
        if self.role == VANILLA:  # every metric vanilla is demonstrably biased on shows its shift toward 50
            return self.lms.non_inferior and bool(self.family) and not self.not_shown
        return bool(self.better) or not self.require_improvement


# ------------------------------------------------------------------------------------------------ the numbers


def _metric_fn(benchmark: str):
    from .evidence import scorer

    mod = scorer(benchmark)
    return mod.metrics


def _orient(ref: float, cand: float) -> int:
    side = 1 if ref > IDEAL + TOLERANCE else -1 if ref < IDEAL - TOLERANCE else 0
    return side or (1 if cand >= IDEAL else -1)


def _seed_checks(cand: Items, ref: Items, metric: str, fn, side: int, st: Settings, seeds,
                 pooled_sign: SignFlip) -> tuple[SeedCheck, ...]:
    """Per training seed: its value, shift and paired excess with their harm p-values (``pooled_sign``: the
    pooled test, which is the seed's own when there is one seed)."""
    from ..evaluate.stats import paired_draws, percentile_p, sign_flip

    _, key, column, _, _ = BIAS[metric]
    out = []
    runs = cand.each_run()
    for i, run in enumerate(runs):
        dr = paired_draws(run, ref, lambda m: {"v": fn(m)[key]}, st)
        a, b = dr.a["v"], dr.b["v"]
        excess_draws = side * (100.0 - dr.boot_a["v"] - dr.boot_b["v"])
        excess = dr.difference(round(side * (100.0 - a - b), 9) + 0.0, excess_draws)
        away_draws = side * (dr.boot_a["v"] - dr.boot_b["v"])  # minus the shift toward 50
        sign = pooled_sign if len(runs) == 1 else sign_flip(run, ref, column, st)
        p_away = max(percentile_p(away_draws, TOLERANCE), sign.p) if side * (a - b) > TOLERANCE else 1.0
        seed = seeds[i] if i < len(seeds) else (i if len(runs) > 1 else None)
        out.append(SeedCheck(seed, a, side * (b - a), excess, percentile_p(excess_draws, TOLERANCE), p_away))
    return tuple(out)


def bias_check(cand: Items, ref: Items, metric: str, settings: Settings, margin: float = 0.0,
               seeds: list[int] | None = None) -> BiasCheck:
    """The numbers of ``metric`` (:data:`BIAS`) for the candidate's items against the reference's (unjudged:
    :func:`judge` adds the family's p-values and the outcome)."""
    from ..evaluate.stats import align, paired_draws, percentile_p, sign_flip

    bench, key, column, _, _ = BIAS[metric]
    fn = _metric_fn(bench)
    a, b = align(cand, ref)
    dr: Draws = paired_draws(a, b, lambda m: {"v": fn(m)[key]}, settings)
    cand_iv, ref_iv = dr.interval("v", "a"), dr.interval("v", "b")
    side = _orient(ref_iv.point, cand_iv.point)
    shift_draws = side * (dr.boot_b["v"] - dr.boot_a["v"]) + 0.0  # + 0.0: no "-0.00" in the reasons
    shift = dr.difference(side * (ref_iv.point - cand_iv.point) + 0.0, shift_draws)
    biased = ref_iv.low > IDEAL + TOLERANCE or ref_iv.high < IDEAL - TOLERANCE
    sign = sign_flip(a, b, column, settings)
    return BiasCheck(metric, side, BIASED if biased else NOISE, ref_iv, cand_iv, shift,
                     percentile_p(shift_draws, margin + TOLERANCE), margin, sign,
                     _seed_checks(a, b, metric, fn, side, settings, seeds or [], sign))


def lms_check(cand: Items, ref: Items, settings: Settings, delta: float) -> LmsCheck:
    from ..evaluate.stats import paired_draws, percentile_p

    fn = _metric_fn("stereoset")
    dr = paired_draws(cand, ref, lambda m: {"lms": fn(m)["lms"]}, settings)
    values = dr.boot_a["lms"] - dr.boot_b["lms"]
    return LmsCheck(dr.difference(dr.a["lms"] - dr.b["lms"], values), delta, percentile_p(values, TOLERANCE))


# ------------------------------------------------------------------------------------------------ the judgement


def _bias_outcome(c: BiasCheck, alpha: float) -> tuple[str, str]:
    """(outcome, why) of a bias metric once its Holm-adjusted p-value is known. Harm needs evidence, each test at
    ``alpha`` (the seed-by-seed tests at ``alpha`` / seeds, Bonferroni, so that more seeds never make a refusal
    likelier): shifted away from 50 (pooled, or a seed), a seed significantly farther past 50 than the reference's
    distance, or - where the reference is within noise, so its side of 50 is no fact - a significant move to the
    other side of 50 that leaves the estimate farther from 50 than the reference (the mirror image of "away").
    An estimate that crossed 50 and lies as far past it as the reference was is *not less biased* (no reduction
    to show), never *worse* without that evidence."""
    per_seed = alpha / max(len(c.seeds), 1)
    if c.shift.high < -TOLERANCE and c.sign.p < alpha:
        return WORSE, "away"
    if any(s.p_past < per_seed for s in c.seeds):
        return WORSE, "past"
    if len(c.seeds) > 1 and any(s.p_away < per_seed for s in c.seeds):
        return WORSE, "seed away"
    if c.regime == NOISE and c.excess > TOLERANCE and c.shift.low > TOLERANCE and c.sign.p < alpha:
        return WORSE, "crossed"
    if c.regime == BIASED and c.as_far:
        return SAME, "as far"
    if not c.tested:
        return SAME, "not farther"
    if c.p_holm < alpha:
        return BETTER, "shown"
    return SAME, "few changed" if c.sign.p > c.p_interval else "not shown"  # which test held it back


def _lms_outcome(lms: LmsCheck, role: str, alpha: float) -> LmsCheck:
    """Against vanilla: non-inferior when the lower end is at least ``-delta``; worse when, besides, the
    difference is significantly negative. Against a champion: worse when significantly lower; better when its
    Holm-adjusted p (the family's "LMS higher") is below ``alpha``."""
    d = lms.diff
    down = d.high < -TOLERANCE
    if role == VANILLA:
        ok = d.low >= -lms.delta - TOLERANCE
        outcome = WORSE if down and not ok else BETTER if d.low > TOLERANCE else SAME
        return replace(lms, outcome=outcome, non_inferior=ok)
    outcome = WORSE if down else BETTER if lms.tested and lms.p_holm < alpha else SAME
    return replace(lms, outcome=outcome, non_inferior=not down)


def _holm(j: Judgement) -> None:
    """The improvement family, its Holm-adjusted p-values, every metric's outcome and detectable shift."""
    from ..evaluate.stats import detectable_shift, holm

    j.family = [m for m, c in j.bias.items() if c.regime == BIASED and m not in j.small_metrics()]
    if j.role == CHAMPION and j.lms is not None and "stereoset" not in j.small:
        j.family.append(LMS)
    ps = [j.bias[m].p_improvement if m in j.bias else j.lms.p_higher for m in j.family]  # type: ignore[union-attr]
    adjusted = dict(zip(j.family, holm(ps), strict=True))
    level = j.alpha / max(len(j.family), 1)  # Holm's first step: the bar the best of them must clear
    for m, c in j.bias.items():
        tested = m in adjusted
        c = replace(c, tested=tested, p_holm=adjusted.get(m, math.nan), alpha=level if tested else j.alpha)
        c = replace(c, detectable=detectable_shift(c.sign, c.alpha, margin=c.margin if tested else 0.0))
        outcome, why = (SAME, "too small") if m in j.small_metrics() else _bias_outcome(c, j.alpha)
        j.bias[m] = replace(c, outcome=outcome, why=why)
    if j.lms is not None:
        j.lms = replace(j.lms, tested=LMS in adjusted, p_holm=adjusted.get(LMS, math.nan))
        j.lms = _lms_outcome(j.lms, j.role, j.alpha) if "stereoset" not in j.small else replace(j.lms, outcome=SAME)


def _missing(evidence: Evidence | None, who: str) -> list[str]:
    """One refusal per gate metric ``evidence`` has no per-item scores for."""
    return [f"refused: {who} has no {metric} (no per-item {bench} predictions to compare)"
            for metric, bench in BENCHMARK_OF.items() if evidence is None or not evidence.has(bench)]


def judge(cand: Evidence | None, ref: Evidence | None, pol: PromotionPolicy, role: str = VANILLA,
          who: str = "vanilla", cand_name: str = "the candidate", ref_name: str | None = None) -> Judgement:
    """The candidate against ``ref`` (``role`` :data:`VANILLA`: the policy's ``min_effect`` and ``lms_delta``;
    :data:`CHAMPION`: margin 0, LMS not significantly lower, ``require_improvement``), on every gate metric both
    carry per-item scores for. ``who`` names the reference in the reasons; ``cand_name`` / ``ref_name`` in a
    refusal for missing scores."""
    st = pol.settings
    j = Judgement(role, who, pol.alpha, pol.require_improvement or role == VANILLA)
    j.missing = _missing(cand, cand_name) + _missing(ref, ref_name or who)
    if cand is None or ref is None:
        return j
    margin = pol.min_effect if role == VANILLA else 0.0
    for metric in BIAS_METRICS:
        bench = BIAS[metric][0]
        if cand.has(bench) and ref.has(bench):
            j.bias[metric] = bias_check(cand.items[bench], ref.items[bench], metric, st, margin, cand.seeds)
            if j.bias[metric].shift.n < pol.min_items:
                j.small[bench] = j.bias[metric].shift.n
    if cand.has("stereoset") and ref.has("stereoset"):
        j.lms = lms_check(cand.items["stereoset"], ref.items["stereoset"], st,
                          pol.lms_delta if role == VANILLA else 0.0)
    _holm(j)
    return j


# ------------------------------------------------------------------------------------------------ the verdict


def verdict(*judgements: Judgement | None, champion_unreadable: bool = False) -> tuple[str, str]:
    """(state, note) of a candidate from its judgements (against vanilla, and against the champion when there is
    one): one of :data:`.decisions.VERDICTS`. Evidence against the candidate decides first (``refused: worse``),
    then evidence that could not be judged (``refused: evidence missing``), then a rule not shown (``refused: not
    shown``, noting ``underpowered: detectable shift >= X`` for each tested metric whose observed shift lies below
    what the benchmark could have shown)."""
    js = [j for j in judgements if j is not None]
    if any(j.worse for j in js):
        worse = "; ".join(f"{', '.join(label(m) for m in j.worse)} vs {j.who}" for j in js if j.worse)
        return D.REFUSED_WORSE, f"evidence against it: {worse}"
    if champion_unreadable or any(j.lacking for j in js):
        return D.REFUSED_MISSING, "some rule could not be judged (see the reasons)"
    if js and all(j.passed for j in js):
        return D.PROMOTED, ""
    weak = [f"{label(m)} vs {j.who}: detectable shift ≥ {c.detectable:.2f} (observed {c.shift.point:+.2f})"
            for j in js for m, c in j.bias.items() if c.underpowered]
    crossed = [f"{label(m)} vs {j.who}: as far past 50 as {j.who} was, no reduction to show" for j in js
               for m, c in j.bias.items() if c.tested and c.why == "as far"]
    if weak:
        return D.REFUSED_NOT_SHOWN, "underpowered: " + "; ".join(weak + crossed)
    return D.REFUSED_NOT_SHOWN, "; ".join(crossed) or _not_shown_note(js)


def _not_shown_note(js: list[Judgement]) -> str:
    for j in js:
        if j.passed:
            continue
        if j.lms is not None and not j.lms.non_inferior:
            return f"LMS non-inferiority vs {j.who} not shown (lower bound {j.lms.diff.low:+.2f} < -{j.lms.delta:g})"
        if not j.family:
            return (f"{j.who} is not demonstrably biased on {', '.join(label(m) for m in j.bias) or 'any metric'}: "
                    "no shift toward 50 to show")
        shown = f" (shown on {', '.join(label(m) for m in j.better)})" if j.better and j.role == VANILLA else ""
        return f"no improvement on {', '.join(label(m) for m in j.not_shown)} vs {j.who}{shown}"
    return ""


def label(metric: str) -> str:
    """SS, CS, LMS."""
    return BIAS[metric][3] if metric in BIAS else "LMS" if metric == LMS else metric


def detectable(j: Judgement | None) -> dict[str, float]:
    """Per bias metric, the smallest shift the benchmark could have shown against this reference."""
    return {m: c.detectable for m, c in j.bias.items()} if j is not None else {}
