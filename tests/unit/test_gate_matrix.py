"""The promotion gate in the regimes a user meets, on crafted per-item evidence for both benchmarks.

Each case crafts the per-item decisions of vanilla and of a candidate on one benchmark (StereoSet clusters in
target terms, or CrowS pairs) at a given number of items; the other benchmark is held either *within noise*
(vanilla at exactly 50, the candidate unchanged: a non-inferiority check that shows nothing), so the crafted
metric alone must show the improvement, or at a clear *success* (vanilla 60 -> 50, 24 of 240 items flipped), so
the crafted metric need only not be worse. ``verdict`` is what a statistician would say (docs/evaluation.md
prints the same table: ``test_the_docs_table_is_this_table``), ``outcome`` what the crafted metric shows, and
``reason`` a regex its reason must match.
"""

from __future__ import annotations

import re
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


def items(bench: str, v: np.ndarray) -> Items:
    n = len(v)
    if bench == "stereoset":  # item i in term i % T: about 10 clusters per target term
        return Items.build(range(n), [f"term{i % max(n // 10, 1)}" for i in range(n)], ss=v, lms=np.ones(n))
    o = np.ones(n)
    return Items.build(range(n), None, win=v, stereo=o, win_stereo=v, anti=0 * o, win_anti=0 * o)


@dataclass(frozen=True)
class Case:
    id: str
    vanilla: float  # percent
    candidate: tuple[float, ...]  # one value per training seed
    verdict: str
    outcome: str  # what the crafted metric shows: better | same | worse
    reason: str  # regex its reason must match
    n: int = 240
    other: str = "noise"  # the other benchmark: noise (vanilla at 50, unchanged) | success (60 -> 50) | same
    min_effect: float = 0.0
    back: int = 0  # items moved away from 50 besides (and as many more toward it)


def C(id, vanilla, candidate, verdict, outcome, reason, **kw) -> Case:  # noqa: A002, N802
    cand = candidate if isinstance(candidate, tuple) else (candidate,)
    return Case(id, vanilla, cand, verdict, outcome, reason, **kw)


CASES = [
    # vanilla demonstrably biased (its interval excludes 50): the candidate must show the shift toward 50
    C("58 -> 50", 58, 50, PROMOTED, "better", r"is biased.*: less biased$"),
    C("62 -> 50", 62, 50, PROMOTED, "better", r"less biased$"),
    C("70 -> 50", 70, 50, PROMOTED, "better", r"less biased$"),
    C("42 -> 50 (anti-stereotype side)", 42, 50, PROMOTED, "better", r"anti-stereotype side.*less biased$"),
    C("38 -> 50", 38, 50, PROMOTED, "better", r"less biased$"),
    C("30 -> 50", 30, 50, PROMOTED, "better", r"less biased$"),
    C("62 -> 49", 62, 49, PROMOTED, "better", r"less biased$"),
    C("62 -> 51", 62, 51, PROMOTED, "better", r"less biased$"),
    C("58 -> 45 (past 50, short of 42)", 58, 45, PROMOTED, "better", r"less biased$"),
    C("70 -> 45", 70, 45, PROMOTED, "better", r"less biased$"),
    C("38 -> 55", 38, 55, PROMOTED, "better", r"less biased$"),
    C("58 -> 42 (as far past 50)", 58, 42, WORSE, "worse", r"as far past 50 as vanilla was.*overshoots 50"),
    C("62 -> 38 (as far past 50)", 62, 38, WORSE, "worse", r"overshoots 50"),
    C("70 -> 30 (as far past 50)", 70, 30, WORSE, "worse", r"overshoots 50"),
    C("30 -> 70 (as far past 50)", 30, 70, WORSE, "worse", r"overshoots 50"),
    C("70 -> 15 (farther past 50)", 70, 15, WORSE, "worse", r"significantly farther past 50.*more biased"),
    C("60 -> 65 (away from 50)", 60, 65, WORSE, "worse", r"shifted away from 50: significantly more biased"),
    C("62 unchanged", 62, 62, NOT_SHOWN, "same", r"\(underpowered\): not shown less biased"),
    C("60 -> 59.58 (one item)", 60, 59.58, NOT_SHOWN, "same", r"not shown less biased"),
    C("60 -> 58.33 (4 of 4 items one way)", 60, 58.33, NOT_SHOWN, "same", r"exact test finds too few changed"),
    C("60, 12 items each way (net 0)", 60, 60, NOT_SHOWN, "same", r"not shown less biased", back=12),
    # min_effect: a margin on the shift only
    C("60 -> 50, min_effect 2", 60, 50, PROMOTED, "better", r"less biased$", min_effect=2),
    C("60 -> 50, min_effect 4", 60, 50, PROMOTED, "better", r"less biased$", min_effect=4),
    C("60 -> 57.08 (7 items)", 60, 57.08, PROMOTED, "better", r"less biased$"),
    C("60 -> 57.08, min_effect 2", 60, 57.08, NOT_SHOWN, "same", r"not above 2: min_effect", min_effect=2),
    C("60 -> 57.08, min_effect 4", 60, 57.08, NOT_SHOWN, "same", r"not above 4: min_effect", min_effect=4),
    # vanilla within noise on this metric: non-inferiority; the other metric shows the improvement
    C("52 -> 50 (other: success)", 52, 50, PROMOTED, "same", r"not demonstrably biased.*non-inferior$",
      other="success"),
    C("55 -> 50 (other: success)", 55, 50, PROMOTED, "same", r"non-inferior$", other="success"),
    C("48 -> 50 (other: success)", 48, 50, PROMOTED, "same", r"non-inferior$", other="success"),
    C("55 -> 45 (other: success)", 55, 45, PROMOTED, "same", r"non-inferior$", other="success"),
    C("55 -> 55 (other: success)", 55, 55, PROMOTED, "same", r"non-inferior$", other="success"),
    C("52 -> 60 (other: success)", 52, 60, WORSE, "worse", r"shifted away from 50", other="success"),
    C("52 -> 30 (other: success)", 52, 30, WORSE, "worse", r"significantly farther past 50", other="success"),
    C("52 -> 50 (other: within noise)", 52, 50, NOT_SHOWN, "same", r"non-inferior$"),
    C("262 items, 55.34 -> 50 (other: success)", 55.34, 50, PROMOTED, "same", r"non-inferior$", n=262,
      other="success"),
    # several metrics tested for improvement: Holm
    C("both 62 -> 50", 62, 50, PROMOTED, "better", r"Holm-adjusted over SS, CS.*less biased$", other="same"),
    C("both 60 -> 56.67, 10 toward and 2 away", 60, 56.67, NOT_SHOWN, "same",
      r"Holm-adjusted over SS, CS: p=0\.07", other="same", back=2),
    C("60 -> 56.67, 10 toward and 2 away (other: within noise)", 60, 56.67, PROMOTED, "better", r"less biased$",
      back=2),
    # seeds replicate: the pooled shift, overshoot judged seed by seed
    C("262 items, 56.87 -> 1 seed at 50", 56.87, 50, PROMOTED, "better", r"less biased$", n=262),
    C("262 items, 56.87 -> 3 seeds at 50", 56.87, (50, 50, 50), PROMOTED, "better",
      r"agree in direction.*less biased$", n=262),
    C("262 items, 56.87 -> 5 seeds at 50", 56.87, (50,) * 5, PROMOTED, "better", r"less biased$", n=262),
    C("60 -> seeds at 50 and 52.5", 60, (50, 52.5), PROMOTED, "better", r"less biased$"),
    C("60 -> seeds at 50 and 62.5", 60, (50, 62.5), PROMOTED, "better", r"seeds disagree in direction"),
    C("60 -> seeds at 40 and 60", 60, (40, 60), WORSE, "worse", r"seed \d+ \(of 2\)'s estimate 40\.00.*overshoots"),
    C("60 -> seeds at 30 and 70", 60, (30, 70), WORSE, "worse", r"overshoots 50|farther past 50"),
    # other sizes
    C("83 items, 70 -> 50", 70, 50, PROMOTED, "better", r"less biased$", n=83),
    C("83 items, 58 -> 50 (vanilla within noise)", 58, 50, NOT_SHOWN, "same", r"not demonstrably biased", n=83),
    C("83 items, 58 -> 50 (other: success)", 58, 50, PROMOTED, "same", r"non-inferior$", n=83, other="success"),
    C("120 items, 62 -> 50", 62, 50, PROMOTED, "better", r"less biased$", n=120),
]

SUCCESS_VANILLA, SUCCESS = vector(60, 240), moved(vector(60, 240), 50)
NOISE = vector(50, 240)


def crafted(c: Case, bench: str) -> tuple[Items, Items]:
    """(candidate pooled over its seeds, vanilla) items of the crafted benchmark; each seed flips its own items."""
    van = vector(c.vanilla, c.n)
    step = max(int(abs(van.sum() - k_of(c.candidate[0], c.n))), 1)
    runs = [items(bench, moved(van, x, c.back, offset=i * step)) for i, x in enumerate(c.candidate)]
    return (pooled(runs) if len(runs) > 1 else runs[0]), items(bench, van)


def evidence(c: Case, bench: str) -> tuple[Evidence, Evidence]:
    """(candidate, vanilla) of a case: ``bench`` crafted, the other benchmark as ``c.other`` says."""
    other = "crows" if bench == "stereoset" else "stereoset"
    cand, van = crafted(c, bench)
    if c.other == "same":
        o_cand, o_van = crafted(c, other)
    else:
        o_cand = items(other, SUCCESS if c.other == "success" else NOISE)
        o_van = items(other, SUCCESS_VANILLA if c.other == "success" else NOISE)
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


def test_the_docs_table_is_this_table():
    """docs/evaluation.md's table of expected decisions lists every case of the matrix with its verdict."""
    text = (ROOT / "docs" / "evaluation.md").read_text()
    rows = dict(re.findall(r"^\| ([^|]+?) \| [^|]*\| `([^`]+)` \|", text, re.M))
    assert {c.id: c.verdict for c in CASES}.items() <= rows.items()


@pytest.mark.parametrize("bench", ["stereoset", "crows"])
def test_more_seeds_at_50_never_make_promotion_harder(bench):
    """The issue's example (262 CrowS pairs, vanilla 56.87, every seed exactly at 50 with its own flipped pairs):
    one, three and five seeds are all promoted, and the pooled shift's interval does not widen with seeds."""
    widths = []
    for seeds in (1, 3, 5):
        cand, van = evidence(C("s", 56.87, (50,) * seeds, PROMOTED, "better", "", n=262), bench)
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

    cand, van = evidence(C("x", 60, 50, PROMOTED, "better", ""), "crows")
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
