"""The promotion gate in the regimes a user meets, on crafted per-item evidence for both benchmarks.

Each case crafts the per-item decisions of vanilla and of a candidate on one bias metric (StereoSet clusters in
target terms, or CrowS pairs) at a given number of items, and holds the other bias metric in a named regime
(:data:`OTHER`: within noise and unchanged, a clear success 60 -> 50, demonstrably biased and unchanged, ...) and
LMS as said (``lms``: items whose LMS decision vanilla / the candidate lost). Every case runs twice, the crafted
metric once on each benchmark. ``verdict`` is what a statistician would say (docs/evaluation.md prints the same
table, generated from :data:`CASES`: ``test_the_docs_table_is_this_table``; ``python tests/unit/test_gate_matrix.py``
rewrites it), ``outcome`` what the crafted metric shows, ``reason`` a regex its reason must match and ``before``
what the gate on main at e01ed60 decided (where the two differ, the old rule was wrong).

The statistician's rule, per bias metric: where vanilla is demonstrably biased (its interval excludes 50, to
either side) the metric must show its shift toward 50 (Holm over those metrics) - *every* such metric; where
vanilla's interval holds 50 it can only be made worse (non-inferiority); an overshoot is *worse* only on evidence
(the excess interval above 0), and an estimate that crossed 50 as far as vanilla was is *not shown* less biased;
LMS non-inferior (-2 points); seeds pooled, harm judged seed by seed (Bonferroni over the seeds).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from context_cda.evaluate.stats import Items, pooled
from context_cda.tracking import decisions as D
from context_cda.tracking.evidence import Evidence, from_table, to_table
from context_cda.tracking.promotion import CS, SS, PromotionPolicy, decide

ROOT = Path(__file__).resolve().parents[2]
PROMOTED, WORSE, NOT_SHOWN, MISSING = D.PROMOTED, D.REFUSED_WORSE, D.REFUSED_NOT_SHOWN, D.REFUSED_MISSING


def k_of(value: float, n: int) -> int:
    return round(value * n / 100)


def moved(van: np.ndarray, value: float, back: int = 0, offset: int = 0) -> np.ndarray:
    """``van`` moved to ``value`` (percent of 1s): the needed 1s set to 0 (or 0s set to 1), starting ``offset``
    items into them (seeds flip their own items), plus ``back`` extra items moved each way (net 0)."""
    w, n = van.copy(), len(van)
    diff = k_of(value, n) - int(van.sum())
    down, up = max(-diff, 0) + back, max(diff, 0) + back
    ones, zeros = np.flatnonzero(van == 1), np.flatnonzero(van == 0)
    w[np.roll(ones, -offset)[:down]] = 0
    w[np.roll(zeros[::-1], -offset)[:up]] = 1
    return w


def vector(value: float, n: int) -> np.ndarray:
    v = np.zeros(n)
    v[: k_of(value, n)] = 1
    return v


def items(bench: str, v: np.ndarray, lost: int = 0) -> Items:
    """Per-item scores of ``v``; ``lost``: StereoSet clusters (each in its own target term) whose LMS decision is
    lost (0 instead of 1)."""
    n = len(v)
    if bench == "stereoset":  # item i in term i % T: about 10 clusters per target term
        lms = np.ones(n)
        lms[:lost] = 0
        return Items.build(range(n), [f"term{i % max(n // 10, 1)}" for i in range(n)], ss=v, lms=lms)
    o = np.ones(n)
    return Items.build(range(n), None, win=v, stereo=o, win_stereo=v, anti=0 * o, win_anti=0 * o)


#: the regimes the other bias metric is held in: (vanilla, candidate) in percent on 240 items, and what it shows
OTHER: dict[str, tuple[float, float, str]] = {
    "noise": (50, 50, "within noise, unchanged"),
    "success": (60, 50, "biased, moved to 50"),
    "biased, unchanged": (60, 60, "biased, unchanged"),
    "biased, short": (60, 55, "biased, 60 -> 55"),
    "biased low, to 50": (40, 50, "biased low, moved to 50"),
    "biased, as far": (60, 40, "biased, 60 -> 40 (as far past 50)"),
    "noise, worse": (52, 60, "within noise, 52 -> 60"),
}


@dataclass(frozen=True)
class Case:
    id: str
    vanilla: float  # percent
    candidate: tuple[float, ...]  # one value per training seed
    verdict: str
    outcome: str  # what the crafted metric shows: better | same | worse
    reason: str  # regex its reason must match
    before: str  # the gate's verdict on main at e01ed60
    n: int = 240
    other: str = "noise"  # the other bias metric: a key of OTHER, or "same" (crafted like this one)
    min_effect: float = 0.0
    back: int = 0  # items moved away from 50 besides (and as many more toward it)
    lms: tuple[int, int] = (0, 0)  # StereoSet clusters whose LMS decision vanilla, the candidate lost

    @property
    def other_words(self) -> str:
        return "the same" if self.other == "same" else OTHER[self.other][2]

    @property
    def lms_words(self) -> str:
        van, cand = self.lms
        return "equal" if van == cand else f"{100 * (van - cand) / 240:+.2f}"


def C(id, vanilla, candidate, verdict, outcome, reason, before, **kw) -> Case:  # noqa: A002, N802
    cand = candidate if isinstance(candidate, tuple) else (candidate,)
    return Case(id, vanilla, cand, verdict, outcome, reason, before, **kw)


#: what the crafted metric's reason says for each of its outcomes
BETTER_R = r"less biased$"
AS_FAR_R = r"as far past it as vanilla was.*: no reduction to show, not shown less biased"
PAST_R = r"significantly farther past 50 than vanilla's distance.*an overshoot shown"
AWAY_R = r"shifted away from 50: significantly more biased"
SEED_AWAY_R = r"seed \d+ \(of \d\) shifted away from 50 \(.*Bonferroni-divided over the \d seeds\)"
CROSSED_R = r"moved significantly to the other side of 50"
NON_INFERIOR_R = r"not demonstrably biased.*non-inferior$"
NOT_SHOWN_R = r"not shown less biased"

CASES = [
    # vanilla demonstrably biased on the crafted metric, the other within noise: the crafted metric alone decides
    C("58 -> 50", 58, 50, PROMOTED, "better", r"is biased.*: less biased$", PROMOTED),
    C("62 -> 50", 62, 50, PROMOTED, "better", BETTER_R, PROMOTED),
    C("70 -> 50", 70, 50, PROMOTED, "better", BETTER_R, PROMOTED),
    C("42 -> 50 (anti-stereotype side)", 42, 50, PROMOTED, "better", r"anti-stereotype side.*less biased$", PROMOTED),
    C("38 -> 50", 38, 50, PROMOTED, "better", BETTER_R, PROMOTED),
    C("30 -> 50", 30, 50, PROMOTED, "better", BETTER_R, PROMOTED),
    C("62 -> 49", 62, 49, PROMOTED, "better", BETTER_R, PROMOTED),
    C("62 -> 51", 62, 51, PROMOTED, "better", BETTER_R, PROMOTED),
    # ... short of 50: a significant partial shift
    C("60 -> 55 (short of 50)", 60, 55, PROMOTED, "better", BETTER_R, PROMOTED),
    C("70 -> 60 (short of 50)", 70, 60, PROMOTED, "better", BETTER_R, PROMOTED),
    C("40 -> 45 (short of 50, anti-stereotype side)", 40, 45, PROMOTED, "better", BETTER_R, PROMOTED),
    # ... past 50, short of as far as vanilla was: no evidence of an overshoot
    C("58 -> 45 (past 50, short of 42)", 58, 45, PROMOTED, "better", BETTER_R, PROMOTED),
    C("70 -> 45", 70, 45, PROMOTED, "better", BETTER_R, PROMOTED),
    C("38 -> 55", 38, 55, PROMOTED, "better", BETTER_R, PROMOTED),
    C("40 -> 55", 40, 55, PROMOTED, "better", BETTER_R, PROMOTED),
    # ... past 50 as far as vanilla was (or a little farther) without evidence: no reduction to show, no harm shown
    C("58 -> 42 (as far past 50)", 58, 42, NOT_SHOWN, "same", AS_FAR_R, WORSE),
    C("62 -> 38 (as far past 50)", 62, 38, NOT_SHOWN, "same", AS_FAR_R, WORSE),
    C("70 -> 30 (as far past 50)", 70, 30, NOT_SHOWN, "same", AS_FAR_R, WORSE),
    C("30 -> 70 (as far past 50)", 30, 70, NOT_SHOWN, "same", AS_FAR_R, WORSE),
    C("60 -> 38 (2 farther past 50, no evidence)", 60, 38, NOT_SHOWN, "same", AS_FAR_R, WORSE),
    C("40 -> 63 (3 farther past 50, no evidence)", 40, 63, NOT_SHOWN, "same", AS_FAR_R, WORSE),
    # ... past 50 with evidence of the overshoot
    C("70 -> 15 (farther past 50)", 70, 15, WORSE, "worse", PAST_R, WORSE),
    C("60 -> 20 (farther past 50)", 60, 20, WORSE, "worse", PAST_R, WORSE),
    C("40 -> 80 (farther past 50)", 40, 80, WORSE, "worse", PAST_R, WORSE),
    # ... away from 50, unchanged, too little
    C("60 -> 65 (away from 50)", 60, 65, WORSE, "worse", AWAY_R, WORSE),
    C("40 -> 35 (away from 50)", 40, 35, WORSE, "worse", AWAY_R, WORSE),
    C("62 unchanged", 62, 62, NOT_SHOWN, "same", r"\(underpowered\): not shown less biased", NOT_SHOWN),
    C("40 unchanged", 40, 40, NOT_SHOWN, "same", r"\(underpowered\): not shown less biased", NOT_SHOWN),
    C("60 -> 59.58 (one item)", 60, 59.58, NOT_SHOWN, "same", NOT_SHOWN_R, NOT_SHOWN),
    C("60 -> 58.33 (4 of 4 items one way)", 60, 58.33, NOT_SHOWN, "same", r"exact test finds too few changed",
      NOT_SHOWN),
    C("60, 12 items each way (net 0)", 60, 60, NOT_SHOWN, "same", NOT_SHOWN_R, NOT_SHOWN, back=12),
    # min_effect: a margin on the shift only
    C("60 -> 50, min_effect 2", 60, 50, PROMOTED, "better", BETTER_R, PROMOTED, min_effect=2),
    C("60 -> 50, min_effect 4", 60, 50, PROMOTED, "better", BETTER_R, PROMOTED, min_effect=4),
    C("60 -> 57.08 (7 items)", 60, 57.08, PROMOTED, "better", BETTER_R, PROMOTED),
    C("60 -> 57.08, min_effect 2", 60, 57.08, NOT_SHOWN, "same", r"not above 2: min_effect", NOT_SHOWN,
      min_effect=2),
    C("60 -> 57.08, min_effect 4", 60, 57.08, NOT_SHOWN, "same", r"not above 4: min_effect", NOT_SHOWN,
      min_effect=4),
    # vanilla within noise on the crafted metric (non-inferiority); the other metric shows the improvement
    C("52 -> 50 (other: success)", 52, 50, PROMOTED, "same", NON_INFERIOR_R, PROMOTED, other="success"),
    C("55 -> 50 (other: success)", 55, 50, PROMOTED, "same", NON_INFERIOR_R, PROMOTED, other="success"),
    C("48 -> 50 (other: success)", 48, 50, PROMOTED, "same", NON_INFERIOR_R, PROMOTED, other="success"),
    C("55 -> 45 (other: success)", 55, 45, PROMOTED, "same", NON_INFERIOR_R, PROMOTED, other="success"),
    C("52 -> 48 (other: success)", 52, 48, PROMOTED, "same", NON_INFERIOR_R, PROMOTED, other="success"),
    C("55 -> 55 (other: success)", 55, 55, PROMOTED, "same", NON_INFERIOR_R, PROMOTED, other="success"),
    C("52 -> 60 (other: success)", 52, 60, WORSE, "worse", r"shifted away from 50", WORSE, other="success"),
    C("48 -> 45, 7 items away (other: success)", 48, 45, WORSE, "worse", AWAY_R, WORSE, other="success"),
    C("50 -> 40 (other: success)", 50, 40, WORSE, "worse", AWAY_R, WORSE, other="success"),
    C("52 -> 45, farther from 50 across it (other: success)", 52, 45, WORSE, "worse", CROSSED_R, PROMOTED,
      other="success"),
    C("48 -> 57, farther from 50 across it (other: success)", 48, 57, WORSE, "worse", CROSSED_R, PROMOTED,
      other="success"),
    C("52 -> 30 (other: success)", 52, 30, WORSE, "worse", r"significantly farther past 50", WORSE,
      other="success"),
    C("52 -> 50 (other: within noise)", 52, 50, NOT_SHOWN, "same", NON_INFERIOR_R, NOT_SHOWN),
    C("262 items, 55.34 -> 50 (other: success)", 55.34, 50, PROMOTED, "same", NON_INFERIOR_R, PROMOTED, n=262,
      other="success"),
    # both metrics demonstrably biased: each must show its shift toward 50, Holm over the two
    C("both 62 -> 50", 62, 50, PROMOTED, "better", r"Holm-adjusted over SS, CS.*less biased$", PROMOTED,
      other="same"),
    C("62 -> 50 (other: biased, unchanged)", 62, 50, NOT_SHOWN, "better", BETTER_R, PROMOTED,
      other="biased, unchanged"),
    C("60 unchanged (other: success)", 60, 60, NOT_SHOWN, "same", NOT_SHOWN_R, PROMOTED, other="success"),
    C("40 unchanged (other: success)", 40, 40, NOT_SHOWN, "same", NOT_SHOWN_R, PROMOTED, other="success"),
    C("62 -> 50 (other: biased, 60 -> 55)", 62, 50, PROMOTED, "better", BETTER_R, PROMOTED, other="biased, short"),
    C("60 -> 57.08, 7 items (other: success)", 60, 57.08, PROMOTED, "better", r"Holm-adjusted over.*less biased$",
      PROMOTED, other="success"),
    C("60 -> 58.33, 4 of 4 items (other: success)", 60, 58.33, NOT_SHOWN, "same", r"exact test finds too few",
      PROMOTED, other="success"),
    C("40 -> 50 (other: success)", 40, 50, PROMOTED, "better", BETTER_R, PROMOTED, other="success"),
    C("62 -> 50 (other: biased low, 40 -> 50)", 62, 50, PROMOTED, "better", BETTER_R, PROMOTED,
      other="biased low, to 50"),
    C("58 -> 42, as far past 50 (other: success)", 58, 42, NOT_SHOWN, "same", AS_FAR_R, WORSE, other="success"),
    C("62 -> 50 (other: biased, as far past 50)", 62, 50, NOT_SHOWN, "better", BETTER_R, WORSE,
      other="biased, as far"),
    C("70 -> 15, farther past 50 (other: success)", 70, 15, WORSE, "worse", PAST_R, WORSE, other="success"),
    C("60 -> 65, away (other: success)", 60, 65, WORSE, "worse", AWAY_R, WORSE, other="success"),
    C("62 -> 50 (other: within noise, 52 -> 60)", 62, 50, WORSE, "better", BETTER_R, WORSE, other="noise, worse"),
    C("both 60 -> 56.67, 10 toward and 2 away", 60, 56.67, NOT_SHOWN, "same",
      r"Holm-adjusted over SS, CS: p=0\.07", NOT_SHOWN, other="same", back=2),
    C("60 -> 56.67, 10 toward and 2 away (other: within noise)", 60, 56.67, PROMOTED, "better", BETTER_R, PROMOTED,
      back=2),
    # seeds replicate: the pooled shift decides; harm is judged seed by seed on evidence (Bonferroni over seeds)
    C("262 items, 56.87 -> 1 seed at 50", 56.87, 50, PROMOTED, "better", BETTER_R, PROMOTED, n=262),
    C("262 items, 56.87 -> 3 seeds at 50", 56.87, (50, 50, 50), PROMOTED, "better",
      r"agree in direction.*less biased$", PROMOTED, n=262),
    C("262 items, 56.87 -> 5 seeds at 50", 56.87, (50,) * 5, PROMOTED, "better", BETTER_R, PROMOTED, n=262),
    C("60 -> 3 seeds at 55", 60, (55, 55, 55), PROMOTED, "better", BETTER_R, PROMOTED),
    C("60 -> seeds at 45, 50 and 55", 60, (45, 50, 55), PROMOTED, "better", BETTER_R, PROMOTED),
    C("60 -> seeds at 50 and 52.5", 60, (50, 52.5), PROMOTED, "better", BETTER_R, PROMOTED),
    C("60 -> seeds at 50 and 62.5", 60, (50, 62.5), PROMOTED, "better", r"seeds disagree in direction", PROMOTED),
    C("60 -> seeds at 40, 50 and 50", 60, (40, 50, 50), PROMOTED, "better", BETTER_R, WORSE),
    C("60 -> seeds at 40 and 60", 60, (40, 60), NOT_SHOWN, "same", AS_FAR_R, WORSE),
    C("58 -> 3 seeds at 42", 58, (42, 42, 42), NOT_SHOWN, "same", AS_FAR_R, WORSE),
    C("60 -> seeds at 30 and 70", 60, (30, 70), WORSE, "worse", SEED_AWAY_R, WORSE),
    C("70 -> 3 seeds at 15", 70, (15, 15, 15), WORSE, "worse", PAST_R, WORSE),
    C("60 -> 3 seeds unchanged", 60, (60, 60, 60), NOT_SHOWN, "same", NOT_SHOWN_R, NOT_SHOWN),
    C("60 -> 3 seeds at 65", 60, (65, 65, 65), WORSE, "worse", AWAY_R, WORSE),
    C("62 -> 2 seeds at 50 (other: biased, unchanged)", 62, (50, 50), NOT_SHOWN, "better", BETTER_R, PROMOTED,
      other="biased, unchanged"),
    C("52 -> seeds at 50 and 50 (other: success)", 52, (50, 50), PROMOTED, "same", NON_INFERIOR_R, PROMOTED,
      other="success"),
    C("50 -> seeds at 40 and 60 (other: success)", 50, (40, 60), WORSE, "worse", SEED_AWAY_R, PROMOTED,
      other="success"),
    C("52 -> seeds at 44 and 60 (other: success)", 52, (44, 60), WORSE, "worse", SEED_AWAY_R, PROMOTED,
      other="success"),
    # LMS: non-inferior within 2 points
    C("62 -> 50, LMS -10.00", 62, 50, WORSE, "better", BETTER_R, WORSE, lms=(0, 24)),
    C("62 -> 50, LMS -1.25, not shown within 2", 62, 50, NOT_SHOWN, "better", BETTER_R, NOT_SHOWN, lms=(0, 3)),
    C("62 -> 50, LMS -0.42", 62, 50, PROMOTED, "better", BETTER_R, PROMOTED, lms=(0, 1)),
    C("62 -> 50, LMS +2.50", 62, 50, PROMOTED, "better", BETTER_R, PROMOTED, lms=(6, 0)),
    C("62 unchanged, LMS -10.00", 62, 62, WORSE, "same", NOT_SHOWN_R, WORSE, lms=(0, 24)),
    C("52 -> 50, LMS -10.00 (other: success)", 52, 50, WORSE, "same", NON_INFERIOR_R, WORSE, other="success",
      lms=(0, 24)),
    # other sizes
    C("83 items, 70 -> 50", 70, 50, PROMOTED, "better", BETTER_R, PROMOTED, n=83),
    C("83 items, 58 -> 50 (vanilla within noise)", 58, 50, NOT_SHOWN, "same", r"not demonstrably biased",
      NOT_SHOWN, n=83),
    C("83 items, 58 -> 50 (other: success)", 58, 50, PROMOTED, "same", NON_INFERIOR_R, PROMOTED, n=83,
      other="success"),
    C("120 items, 62 -> 50", 62, 50, PROMOTED, "better", BETTER_R, PROMOTED, n=120),
]


NOISE = vector(50, 240)


def crafted(c: Case, bench: str) -> tuple[Items, Items]:
    """(candidate pooled over its seeds, vanilla) items of the crafted benchmark; each seed flips its own items."""
    van = vector(c.vanilla, c.n)
    step = max(int(abs(van.sum() - k_of(c.candidate[0], c.n))), 1)
    runs = [items(bench, moved(van, x, c.back, offset=i * step), c.lms[1]) for i, x in enumerate(c.candidate)]
    return (pooled(runs) if len(runs) > 1 else runs[0]), items(bench, van, c.lms[0])


def evidence(c: Case, bench: str) -> tuple[Evidence, Evidence]:
    """(candidate, vanilla) of a case: ``bench`` crafted, the other benchmark as ``c.other`` says."""
    other = "crows" if bench == "stereoset" else "stereoset"
    cand, van = crafted(c, bench)
    if c.other == "same":
        o_cand, o_van = crafted(c, other)
    else:
        o_van_value, o_cand_value, _ = OTHER[c.other]
        o_van_v = vector(o_van_value, 240)
        o_cand = items(other, moved(o_van_v, o_cand_value), c.lms[1])
        o_van = items(other, o_van_v, c.lms[0])
    seeds = list(range(13, 13 + len(c.candidate))) if len(c.candidate) > 1 else []
    return Evidence({bench: cand, other: o_cand}, seeds=seeds), Evidence({bench: van, other: o_van})


def _id(c: Case) -> str:
    return c.id


@pytest.mark.parametrize("bench", ["stereoset", "crows"])
@pytest.mark.parametrize("c", CASES, ids=_id)
def test_the_gate_matrix(bench, c):
    cand, van = evidence(c, bench)
    pol = PromotionPolicy(min_effect=c.min_effect)
    d = decide(cand, None, van, pol)
    label, metric = ("SS (", SS) if bench == "stereoset" else ("CS (", CS)
    deciding = [r for r in d.reasons if r.startswith(label)]
    assert (d.verdict, d.promote) == (c.verdict, c.verdict == PROMOTED), "\n".join(d.reasons)
    assert len(deciding) == 1 and re.search(c.reason, deciding[0]), deciding
    rec = d.comparisons["vs_vanilla"][metric]
    assert rec["outcome"] == c.outcome, deciding
    # the reason quotes the statistic that decided, with its interval and its p-value, and what could be shown
    assert re.search(r"shift toward 50 [+-]\d+\.\d\d \[[+-]\d+\.\d\d, [+-]\d+\.\d\d\], p", deciding[0])
    assert "sign-flip test on" in deciding[0] and "detectable shift ≥ " in deciding[0]
    assert d.detectable_shift[metric] == pytest.approx(rec["detectable_shift"]) and rec["detectable_shift"] > 0
    assert d.reasons[-1].startswith(f"verdict: {c.verdict}")
    if c.verdict == NOT_SHOWN and rec["underpowered"]:
        assert d.note.startswith("underpowered: ") and f"detectable shift ≥ {rec['detectable_shift']:.2f}" in d.note
    # the decision survives the evidence table a registered version carries
    back = from_table(to_table(cand))
    assert decide(back, None, van, pol).verdict == c.verdict


BEGIN = "<!-- gate matrix: generated from tests/unit/test_gate_matrix.py (CASES); do not edit by hand -->"
END = "<!-- end of the gate matrix -->"


def table() -> str:
    """The docs' table of the matrix: one row per case, from :data:`CASES`."""
    lines = ["| case | other bias metric | LMS, candidate − vanilla | verdict (the statistician's) | before (e01ed60) | "
             "the crafted metric |", "|---|---|---|---|---|---|"]
    for c in CASES:
        changed = " **changed**" if c.before != c.verdict else ""
        lines.append(f"| {c.id} | {c.other_words} | {c.lms_words} | `{c.verdict}` | `{c.before}`{changed} | "
                     f"{c.outcome} |")
    return "\n".join(lines)


def test_the_docs_table_is_this_table():
    """docs/evaluation.md's table of expected decisions is generated from CASES (``python
    tests/unit/test_gate_matrix.py`` rewrites it): the docs and the tests cannot drift apart."""
    text = (ROOT / "docs" / "evaluation.md").read_text()
    assert BEGIN in text and END in text, "docs/evaluation.md lost the gate matrix's markers"
    assert text.split(BEGIN, 1)[1].split(END, 1)[0].strip() == table()
    changed = re.search(r"Where the old gate was wrong \((\d+) of the (\d+) cases\)", text)
    assert changed and (int(changed[1]), int(changed[2])) == (sum(c.before != c.verdict for c in CASES), len(CASES))


def test_the_matrix_covers_every_regime():
    """At least 60 cases; vanilla biased to each side and within noise; the candidate at 50, short of it, past it
    (with and without evidence of an overshoot), unchanged and worse; one seed and several; LMS equal and worse;
    and the other metric within noise, shown and left biased."""
    assert len(CASES) >= 60 and len({c.id for c in CASES}) == len(CASES)
    biased_high = [c for c in CASES if c.vanilla >= 58]
    biased_low = [c for c in CASES if c.vanilla <= 42]
    noise = [c for c in CASES if 45 < c.vanilla < 58]
    assert biased_high and biased_low and noise
    assert {c.outcome for c in biased_high} == {c.outcome for c in biased_low} == {"better", "same", "worse"}
    assert {PAST_R, AS_FAR_R, AWAY_R, CROSSED_R, SEED_AWAY_R} <= {c.reason for c in CASES}
    assert any(len(c.candidate) > 1 for c in CASES) and any(c.lms[1] > c.lms[0] for c in CASES)
    assert {"noise", "success", "biased, unchanged", "same"} <= {c.other for c in CASES}
    assert {c.verdict for c in CASES} == {PROMOTED, WORSE, NOT_SHOWN}


@pytest.mark.parametrize("bench", ["stereoset", "crows"])
def test_more_seeds_at_50_never_make_promotion_harder(bench):
    """The issue's example (262 CrowS pairs, vanilla 56.87, every seed exactly at 50 with its own flipped pairs):
    one, three and five seeds are all promoted, and the pooled shift's interval does not widen with seeds."""
    widths = []
    for seeds in (1, 3, 5):
        cand, van = evidence(C("s", 56.87, (50,) * seeds, PROMOTED, "better", "", PROMOTED, n=262), bench)
        d = decide(cand, None, van, PromotionPolicy())
        metric = SS if bench == "stereoset" else CS
        assert d.promote, d.reasons
        lo, hi = d.comparisons["vs_vanilla"][metric]["ci"]
        widths.append(hi - lo)
    assert widths[2] <= widths[0] + 1e-9 and widths[1] <= widths[0] + 1e-9


@pytest.mark.parametrize("bench", ["stereoset", "crows"])
def test_tiny_samples_are_evidence_missing(bench):
    n = 15
    van = Evidence({bench: items(bench, vector(80, n)), **other_noise(bench)})
    cand = Evidence({bench: items(bench, vector(0, n)), **other_noise(bench)})
    d = decide(cand, None, van, PromotionPolicy())
    assert d.verdict == MISSING and not d.promote
    assert any(f"{bench}: only 15 items shared" in r and "too small to decide on" in r for r in d.reasons)
    # at min_items, 5 of 5 changed items one way: the exact two-sided sign test gives p = 0.0625
    van = Evidence({bench: items(bench, vector(80, 20)), **other_noise(bench)})
    cand = Evidence({bench: items(bench, vector(55, 20)), **other_noise(bench)})
    d = decide(cand, None, van, PromotionPolicy())
    assert d.verdict == NOT_SHOWN and any("exact test p=0.062" in r for r in d.reasons), d.reasons


def other_noise(bench: str) -> dict[str, Items]:
    other = "crows" if bench == "stereoset" else "stereoset"
    return {other: items(other, NOISE)}


def test_power_is_said_beside_a_refusal():
    """An arm identical to vanilla on 100 items: refused, not shown, and the note says the shift a 100-item
    benchmark could have shown (here at least the six items one way that the exact test needs)."""
    van = vector(70, 100)
    cand = Evidence({"crows": items("crows", van), **other_noise("crows")})
    d = decide(cand, None, Evidence({"crows": items("crows", van), **other_noise("crows")}), PromotionPolicy())
    assert d.verdict == NOT_SHOWN
    assert d.note == "underpowered: CS vs vanilla: detectable shift ≥ 6.00 (observed +0.00)"
    # with 30 of 100 pairs discordant (net 0), the normal approximation of the sign test's power: 2.80 * sqrt(30)
    cand = Evidence({"crows": items("crows", moved(van, 70, back=15)), **other_noise("crows")})
    d = decide(cand, None, Evidence({"crows": items("crows", van), **other_noise("crows")}), PromotionPolicy())
    assert d.detectable_shift[CS] == pytest.approx(2.8016 * np.sqrt(30), abs=0.01)


def test_the_issue_example_is_promoted_with_the_sign_test_quoted():
    """240 CrowS pairs, vanilla CS 60.0, candidate 50.0, 24 pairs flipped stereotype -> anti and none back: the
    distance rule refused it (its interval -10.00 [-12.92, +2.50], p=0.112); the smooth statistics promote it.
    The numbers are docs/evaluation.md's worked example."""
    from context_cda.evaluate import crows
    from context_cda.evaluate.stats import paired

    cand, van = evidence(C("x", 60, 50, PROMOTED, "better", "", PROMOTED), "crows")
    ones = vector(60, 240)  # the example flips the *last* 24 stereotyped pairs: as in the docs
    ones_c = ones.copy()
    ones_c[120:144] = 0
    cand = Evidence({"crows": items("crows", ones_c), "stereoset": cand.items["stereoset"]})
    old = paired(cand.items["crows"], van.items["crows"], crows.metrics, ideals=crows.IDEALS)["cs_dist"]
    assert old.text() == "-10.00 [-12.92, +2.50], p=0.112"
    d = decide(cand, None, van, PromotionPolicy())
    assert d.promote and d.verdict == PROMOTED, d.reasons
    cs = next(r for r in d.reasons if r.startswith("CS ("))
    assert cs == DOCS_EXAMPLE, cs


DOCS_EXAMPLE = (
    "CS (gender) vs vanilla: CS 50.00 [43.75, 56.25] vs 60.00 [53.33, 65.83]; vanilla is biased, to the stereotype "
    "side by 10.00 (its 95% interval excludes 50); shift toward 50 +10.00 [+6.67, +13.75], p=0.002 (95%; sign-flip "
    "test on 24 of 240 pairs that differ: p<0.001); improvement p<0.001 (interval p<0.001, exact test p<0.001) vs "
    "0.05; detectable shift ≥ 5.72: less biased")


@pytest.mark.parametrize("bench", ["stereoset", "crows"])
def test_against_the_champion_at_the_ideal(bench):
    """Against a champion the same rules hold with the champion as the reference (margin 0), and the candidate
    must be better on some metric (require_improvement): Holm over the metrics the champion is biased on and
    LMS."""
    metric = SS if bench == "stereoset" else CS
    van_v = vector(60, 240)

    def model(value: float) -> Evidence:
        return Evidence({bench: items(bench, moved(van_v, value)), **other_noise(bench)})

    van = Evidence({bench: items(bench, van_v), **other_noise(bench)})
    at_50 = model(50)
    # a champion at 50.83, within noise of 50: nothing to improve on; LMS unchanged: not shown
    d = decide(at_50, model(50.83), van, PromotionPolicy(), champion_version="1")
    assert d.verdict == NOT_SHOWN and any("not significantly better than champion v1" in r for r in d.reasons)
    assert decide(at_50, model(50.83), van, PromotionPolicy(require_improvement=False), champion_version="1").promote
    # a champion exactly at 50 and a candidate that moved away from it (57.5), significantly: worse
    d = decide(model(57.5), at_50, van, PromotionPolicy(), champion_version="2")
    assert d.verdict == WORSE, d.reasons
    assert any(f"significantly worse than champion v2 on {'SS' if bench == 'stereoset' else 'CS'}" in r
               for r in d.reasons)
    # a clearly better candidate than a champion still demonstrably biased (57.5): promoted, Holm over it and LMS
    d = decide(at_50, model(57.5), van, PromotionPolicy(), champion_version="3")
    assert d.promote and d.comparisons["vs_champion"][metric]["outcome"] == "better", d.reasons
    assert any("Holm-adjusted over" in r and "LMS" in r for r in d.reasons if r.startswith(("SS (", "CS (")))
    # against a champion at 55.83 (within noise at 240 items) the candidate at 50 cannot be shown better
    d = decide(at_50, model(55.83), van, PromotionPolicy(), champion_version="4")
    assert d.verdict == NOT_SHOWN and d.comparisons["vs_champion"][metric]["regime"] == "within noise"


# ------------------------------------------------------------------------------------------------ the report


MARK = {"better": " ▲", "worse": " ▼", "same": ""}
#: the words the findings may use for each outcome of a bias metric (``less biased on`` not after ``not shown``)
WORDS = {"better": r"(?<!not shown )less biased on {b}", "worse": r"(more biased on|overshoots 50 on) {b}",
         "same": r"(not shown less biased on|not farther from 50 on|too few) {b}"}


@pytest.mark.parametrize("bench", ["stereoset", "crows"])
@pytest.mark.parametrize("c", CASES, ids=_id)
def test_the_report_says_what_the_gate_decided(bench, c):
    """The gate matrix fed through the report: Table 1's marks, the paired table's marks, the findings' sentence
    and verdict and the registry line all say what the gate's decision says, for every case."""
    import pandas as pd

    from context_cda.report import evidence as RE
    from context_cda.report import findings, registry

    cand, van = evidence(c, bench)
    pol = PromotionPolicy(min_effect=c.min_effect, resamples=300)
    d = decide(cand, None, van, pol)
    ev = RE.Evidence(level=pol.level, seeds=[13])
    ev.pairs, ev.judgements = RE.compare({"vanilla": van, "arm": cand}, ["vanilla", "arm"], pol, "t")
    outcomes = {m: r["outcome"] for m, r in d.comparisons["vs_vanilla"].items()}
    # Table 1 and the paired table carry the gate's outcome as their marks
    t1 = pd.DataFrame([{"target": "t", "model": m, "epoch": e, **{k: v for k, v in vals.items() if "_dist" not in k}}
                       for m, e, vals in (("vanilla", 0, d.vanilla), ("arm", 2, d.candidate))])
    row = next(line for line in RE.table1_markdown(t1, ev, ["stereoset_ss", "stereoset_lms", "stereoset_icat",
                                                            "crows_cs"], str) if line.startswith("| arm |"))
    cells = [x.strip() for x in row.strip("|").split("|")][2:]
    for metric, cell in zip((SS, "stereoset_lms", CS), (cells[0], cells[1], cells[3]), strict=True):
        assert cell.endswith(MARK[outcomes[metric]].strip() or "]"), (metric, cell, outcomes)
    paired = dict(zip([t for _, _, t in RE.COLUMNS], RE.comparison_rows(ev, "t", str)[0][1], strict=True))
    assert paired["SS shift toward 50"].endswith(MARK[outcomes[SS]] or "]")
    assert paired["CS shift toward 50"].endswith(MARK[outcomes[CS]] or "]")
    # the findings: the verdict (from the registry row the register step writes, or recomputed: the same) and the
    # gate's words for each metric
    reg = registry.Row("t", "arm", "t-debiased", None, D.decision(d.promote), d.reasons, verdict=d.verdict,
                       note=d.note)
    assert findings.verdict_of(ev, None, "t", "arm") == (d.verdict, d.note)
    for decisions in (None, registry.Decisions([reg], "this run's decisions")):
        lines = findings.target_lines(ev, t1, "t", str, {}, decisions)
        sentence = next(x for x in lines if x.startswith("- **arm** against vanilla"))
        assert sentence.startswith(f"- **arm** against vanilla — {d.line}: "), sentence
        for metric, b in ((SS, "StereoSet"), (CS, "CrowS-Pairs")):
            assert re.search(WORDS[outcomes[metric]].format(b=b), sentence), (metric, outcomes[metric], sentence)
            others = set(WORDS) - {outcomes[metric]}
            assert not any(re.search(WORDS[o].format(b=b), sentence) for o in others), sentence
    assert d.line in "\n".join(findings._decision_line(registry.Decisions([reg], "x")))


if __name__ == "__main__":  # rewrite docs/evaluation.md's table from CASES
    path = ROOT / "docs" / "evaluation.md"
    text = path.read_text()
    before, rest = text.split(BEGIN, 1)
    path.write_text(before + BEGIN + "\n" + table() + "\n" + END + rest.split(END, 1)[1])
    sys.stdout.write(f"{path}: {len(CASES)} cases\n")
