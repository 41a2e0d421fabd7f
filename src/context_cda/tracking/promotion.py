"""The promotion gate: a pure function from per-item evidence to a decision with its reasons.

A newly registered version always gets the alias ``candidate``. It becomes ``champion`` only on evidence, each
rule judged by a paired bootstrap interval (:func:`context_cda.stats.paired`: candidate and reference scored on
the same items, resampled together, at ``evaluate.bootstrap.level``):

(a) **less biased than vanilla** on SS and on CS: the interval of ``|m - 50| - |m_vanilla - 50|`` lies below
    ``-min_effect`` (``tracking.promotion.min_effect``; 0: significantly less biased);
(b) **LMS non-inferior to vanilla**: the lower bound of the interval of ``LMS - LMS_vanilla`` is at least
    ``-lms_delta``;
(c) **against the current champion** (when there is one): not significantly worse on any of |SS-50|, |CS-50| and
    LMS, and - with ``require_improvement`` (default) - significantly better on at least one.

It refuses, saying why, when the candidate or the reference lacks the per-item scores of a metric (naming the
metric), when fewer than ``evaluate.bootstrap.min_items`` items are shared (too small to decide on), and when
the champion carries no per-item evidence to compare with. Every reason quotes the numbers and intervals. An arm
trained with several seeds is judged by its seeds' pooled evidence (:mod:`.evidence`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from .decisions import aliases_for

if TYPE_CHECKING:  # pragma: no cover
    from ..stats import Difference, Interval, Settings
    from .evidence import Evidence

SS = "stereoset_ss"
LMS = "stereoset_lms"
ICAT = "stereoset_icat"
CS = "crows_cs"
#: gate metric -> (benchmark, key of the paired difference, label, lower is better)
RULES: dict[str, tuple[str, str, str, bool]] = {
    SS: ("stereoset", "ss_dist", "|SS-50|", True),
    CS: ("crows", "cs_dist", "|CS-50|", True),
    LMS: ("stereoset", "lms", "LMS", False),
}
BIAS_METRICS = (SS, CS)  # ideal value 50
TOLERANCE = 1e-9  # differences are means of 0/1 decisions; float noise is far below this


@dataclass(frozen=True)
class PromotionPolicy:
    lms_delta: float = 2.0
    min_effect: float = 0.0
    require_improvement: bool = True
    level: float = 0.95
    resamples: int = 1000
    seed: int = 0
    min_items: int = 20

    @classmethod
    def from_config(cls, promotion: Any, bootstrap: Any = None) -> PromotionPolicy:
        """From ``tracking.promotion`` and ``evaluate.bootstrap`` (None: the bootstrap defaults)."""
        from ..stats import Settings

        b = Settings.of(bootstrap)
        return cls(lms_delta=float(promotion.lms_delta), min_effect=float(promotion.min_effect),
                   require_improvement=bool(promotion.require_improvement), level=b.level,
                   resamples=b.resamples, seed=b.seed, min_items=b.min_items)

    @property
    def settings(self) -> Settings:
        from ..stats import Settings

        return Settings(level=self.level, resamples=self.resamples, seed=self.seed, min_items=self.min_items)


@dataclass
class Decision:
    promote: bool
    aliases: list[str]
    reasons: list[str]
    candidate: dict[str, float]
    champion: dict[str, float] | None
    vanilla: dict[str, float]
    policy: dict[str, Any] = field(default_factory=dict)
    comparisons: dict[str, dict[str, Any]] = field(default_factory=dict)  # vs_vanilla / vs_champion -> metric

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ------------------------------------------------------------------------------------------------ the numbers


def _metric_fn(benchmark: str):
    from .evidence import scorer

    mod = scorer(benchmark)
    return mod.metrics, mod.IDEALS


def point_metrics(evidence: Evidence | None, settings: Settings) -> dict[str, Interval]:
    """``{stereoset_ss: Interval, stereoset_lms: ..., stereoset_icat: ..., crows_cs: ...}`` of what ``evidence``
    holds (the pooled point estimates and their bootstrap intervals), with the distances to 50
    (``stereoset_ss_dist``, ``crows_cs_dist``: for pooled seeds the mean of the seeds' distances)."""
    from ..stats import bootstrap, with_distances

    out: dict[str, Interval] = {}
    for b, items in (evidence.items.items() if evidence else []):
        fn, ideals = _metric_fn(b)
        for k, iv in bootstrap(items, with_distances(fn, ideals), settings).items():
            out[f"{b}_{k}"] = iv
    return out


def compare(a: Evidence, b: Evidence, settings: Settings) -> dict[str, Difference]:
    """Paired differences a - b of every gate metric both can be compared on (keys of :data:`RULES`)."""
    from ..stats import paired

    out = {}
    for bench in ("stereoset", "crows"):
        if a.has(bench) and b.has(bench):
            fn, ideals = _metric_fn(bench)
            diffs = paired(a.items[bench], b.items[bench], fn, settings, ideals)
            for metric, (mb, key, _, _) in RULES.items():
                if mb == bench:
                    out[metric] = diffs[key]
    return out


def _flat(intervals: dict[str, Interval]) -> dict[str, float]:
    out = {}
    for k, iv in intervals.items():
        out[k] = iv.point
        out[f"{k}_ci_low"], out[f"{k}_ci_high"] = iv.low, iv.high
    return out


# ------------------------------------------------------------------------------------------------ the rules


def _missing(evidence: Evidence | None, who: str) -> list[str]:
    """One refusal per gate metric ``evidence`` has no per-item scores for."""
    out = []
    for metric, (bench, _, _, _) in RULES.items():
        if evidence is None or not evidence.has(bench):
            out.append(f"refused: {who} has no {metric} (no per-item {bench} predictions to compare)")
    return out


def _too_small(diffs: dict[str, Difference], who: str, pol: PromotionPolicy) -> list[str]:
    seen, out = set(), []
    for metric, d in diffs.items():
        bench = RULES[metric][0]
        if d.n < pol.min_items and bench not in seen:
            seen.add(bench)
            out.append(f"refused: {bench}: only {d.n} items shared with {who} (fewer than "
                       f"evaluate.bootstrap.min_items={pol.min_items}): too small to decide on")
    return out


def _vs_vanilla(diffs: dict[str, Difference], cand: dict[str, Interval], van: dict[str, Interval],
                pol: PromotionPolicy) -> tuple[bool, list[str]]:
    """Rules (a) and (b)."""
    ok, reasons = True, []
    lvl = f"{pol.level:.0%}"
    for metric in BIAS_METRICS:
        d, label = diffs[metric], RULES[metric][2]
        passed = d.high < -pol.min_effect - TOLERANCE
        bound = f"below -{pol.min_effect:g}" if pol.min_effect else "below 0"
        reasons.append(
            f"{label} vs vanilla: {_val(cand, metric)} vs {_val(van, metric)}; difference {d.text()} ({lvl}): "
            + ("less biased" if passed else f"not shown less biased (the upper bound is not {bound})"))
        ok &= passed
    d = diffs[LMS]
    passed = d.low >= -pol.lms_delta - TOLERANCE
    reasons.append(
        f"LMS vs vanilla: {_val(cand, LMS)} vs {_val(van, LMS)}; difference {d.text()} ({lvl}): "
        + (f"non-inferior (lower bound {d.low:+.2f} >= -{pol.lms_delta:g})" if passed
           else f"inferior (lower bound {d.low:+.2f} < -{pol.lms_delta:g})"))
    return ok and passed, reasons


def _vs_champion(diffs: dict[str, Difference], cand: dict[str, Interval], champ: dict[str, Interval],
                 pol: PromotionPolicy, version: str | None) -> tuple[bool, list[str]]:
    """Rule (c)."""
    reasons, worse, better = [], [], []
    who = f"champion v{version}" if version else "the champion"
    for metric, (_, _, label, lower_better) in RULES.items():
        d = diffs[metric]
        is_worse = d.low > 0 if lower_better else d.high < 0
        is_better = d.high < 0 if lower_better else d.low > 0
        word = "significantly worse" if is_worse else "significantly better" if is_better else "no significant change"
        reasons.append(f"{label} vs {who}: {_val(cand, metric)} vs {_val(champ, metric)}; difference {d.text()}: "
                       f"{word}")
        (worse if is_worse else better if is_better else []).append(label)
    if worse:
        reasons.append(f"refused: significantly worse than {who} on {', '.join(worse)}")
        return False, reasons
    if pol.require_improvement and not better:
        reasons.append(f"refused: not significantly better than {who} on any of |SS-50|, |CS-50|, LMS "
                       "(tracking.promotion.require_improvement)")
        return False, reasons
    return True, reasons


def _val(intervals: dict[str, Interval], metric: str) -> str:
    iv = intervals.get(metric)
    if iv is None:
        return "n/a"
    if metric in BIAS_METRICS:  # the distance the rule compares, and the metric with its interval
        dist = intervals.get(f"{metric}_dist")
        return f"{dist.point if dist else abs(iv.point - 50.0):.2f} ({'SS' if metric == SS else 'CS'} {iv.text()})"
    return iv.text()


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
    reasons = _missing(candidate, "the candidate") + _missing(vanilla, "the vanilla model")
    comparisons: dict[str, dict[str, Any]] = {}
    ok = not reasons
    if ok:
        dv = compare(candidate, vanilla, st)  # type: ignore[arg-type]
        comparisons["vs_vanilla"] = {k: d.to_dict() for k, d in dv.items()}
        small = _too_small(dv, "the vanilla model", pol)
        passed, why = _vs_vanilla(dv, cand, van, pol)
        reasons += small + why
        ok = passed and not small
    if not has_champion:
        reasons.append("no champion yet: rules (a) and (b) against vanilla decide")
    elif champion is None or _missing(champion, "champion"):
        reasons.append(f"refused: champion v{champion_version or '?'} carries no per-item evidence to compare "
                       "with (registered before the evidence gate?); move the 'champion' alias by hand to decide")
        ok = False
    elif candidate is not None and not _missing(candidate, "the candidate"):
        dc = compare(candidate, champion, st)
        comparisons["vs_champion"] = {k: d.to_dict() for k, d in dc.items()}
        small = _too_small(dc, f"champion v{champion_version or '?'}", pol)
        passed, why = _vs_champion(dc, cand, champ, pol, champion_version)
        reasons += small + why
        ok = ok and passed and not small
    return Decision(
        promote=ok, aliases=aliases_for(ok), reasons=reasons,
        candidate=_flat(cand), champion=_flat(champ) if champion is not None else None, vanilla=_flat(van),
        policy=asdict(pol), comparisons=comparisons,
    )
