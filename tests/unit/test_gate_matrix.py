"""The promotion gate at, near and beyond the ideal, on crafted per-item evidence for both benchmarks.

Each case crafts the per-item decisions of vanilla and of a candidate on one benchmark (StereoSet clusters in
target terms, or CrowS pairs); the other benchmark is held at a clear success (vanilla at 60, the candidate at
50, 24 items flipped) so the case alone decides. ``expect`` is what a statistician would say about "less biased
than vanilla" on those items: promoted only when the shift toward 50 is significant (bootstrap interval and the
exact sign-flip test) and the candidate is, with confidence, not as far past 50 as vanilla was on its side.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pytest

from context_cda.stats import Items, pooled
from context_cda.tracking.evidence import Evidence, from_table, to_table
from context_cda.tracking.promotion import CS, SS, PromotionPolicy, decide

N = 240
TERMS = [f"term{i % 24}" for i in range(N)]  # 24 StereoSet target terms of 10 clusters each
POLICY = PromotionPolicy()


def ones(k: int, n: int = N, last: bool = False) -> np.ndarray:
    """n decisions of which k are 1 (the first k, or the last k): flipping the first items of the 1s keeps the
    terms mixed because item i belongs to term i % 24."""
    v = np.zeros(n)
    if last:
        v[n - k:] = 1
    else:
        v[:k] = 1
    return v


def items(bench: str, v: np.ndarray, runs: list[np.ndarray] | None = None) -> Items:
    if runs:
        return pooled([items(bench, r) for r in runs])
    n = len(v)
    if bench == "stereoset":
        return Items.build(range(n), TERMS[:n] if n == N else [f"term{i % max(n // 10, 1)}" for i in range(n)],
                           ss=v, lms=np.ones(n))
    o = np.ones(n)
    return Items.build(range(n), None, win=v, stereo=o, win_stereo=v, anti=0 * o, win_anti=0 * o)


GOOD_VANILLA, GOOD_CANDIDATE = ones(144), ones(120)  # 60 -> 50, 24 items flipped one way


def model(bench: str, v: np.ndarray | None, runs: list[np.ndarray] | None = None, vanilla: bool = False) -> Evidence:
    other = "crows" if bench == "stereoset" else "stereoset"
    out = {bench: items(bench, v, runs), other: items(other, GOOD_VANILLA if vanilla else GOOD_CANDIDATE)}
    return Evidence(out, seeds=list(range(len(runs))) if runs else [])


def flipped(v: np.ndarray, down: int, up: int = 0) -> np.ndarray:
    """``v`` with its first ``down`` 1s set to 0 and its last ``up`` 0s set to 1."""
    w = v.copy()
    w[np.flatnonzero(w == 1)[:down]] = 0
    zeros = np.flatnonzero(w == 0)
    w[zeros[len(zeros) - up:] if up else []] = 1
    return w


@dataclass(frozen=True)
class Case:
    id: str
    vanilla: np.ndarray
    candidate: np.ndarray | None
    expect: bool
    reason: str  # a regex the deciding reason must match
    runs: tuple[np.ndarray, ...] = ()


V60 = ones(144)
CASES = [
    Case("exactly at 50 (24 of 240 flipped one way)", V60, flipped(V60, 24), True, r"less biased"),
    Case("one item from 50 (50.42)", V60, flipped(V60, 23), True, r"less biased"),
    Case("one item past 50 (49.58)", V60, flipped(V60, 25), True, r"less biased"),
    Case("one item of difference from vanilla", V60, flipped(V60, 1), False, r"not shown less biased"),
    Case("within noise: 4 of 4 changed items one way", V60, flipped(V60, 4), False, r"exact test finds too few"),
    Case("within noise: 12 flips each way (net 0)", V60, flipped(V60, 12, 12), False, r"not shown less biased"),
    Case("past 50 as far as vanilla was (40 vs 60)", V60, flipped(V60, 48), False, r"may lie as far past 50"),
    Case("past 50 farther than vanilla was (30 vs 60)", V60, flipped(V60, 72), False, r"candidate overshoots 50.*more biased"),
    Case("a small overshoot well inside (47.9 vs 70)", ones(168), ones(115), True, r"less biased"),
    Case("more biased on vanilla's side (65 vs 60)", V60, flipped(V60, 0, 12), False, r"shifted away from 50"),
    Case("vanilla on the anti-stereotype side (40 -> 50)", ones(96), ones(120), True, r"anti-stereotype side"),
    Case("vanilla exactly at 50: nothing to reduce", ones(120), ones(120, last=True), False, r"no bias to reduce"),
    Case("pooled seeds pulling opposite ways (40 and 60 vs 60)", V60, None, False, r"seed farthest past 50",
         runs=(flipped(V60, 48), V60)),
    Case("pooled seeds at 30 and 70 vs 60", V60, None, False, r"more biased",
         runs=(ones(72), ones(168))),
    Case("pooled seeds both near 50 (50 and 52.5)", V60, None, True, r"less biased",
         runs=(flipped(V60, 24), flipped(V60, 18))),
]


def _id(c: Case) -> str:
    return c.id


@pytest.mark.parametrize("bench", ["stereoset", "crows"])
@pytest.mark.parametrize("c", CASES, ids=_id)
def test_the_gate_matrix(bench, c):
    cand = model(bench, c.candidate, list(c.runs) or None)
    van = model(bench, c.vanilla, vanilla=True)
    d = decide(cand, None, van, POLICY)
    label = "SS (" if bench == "stereoset" else "CS ("
    deciding = [r for r in d.reasons if r.startswith(label)]
    assert d.promote is c.expect, "\n".join(d.reasons)
    assert len(deciding) == 1 and re.search(c.reason, deciding[0]), deciding
    # the reason quotes the statistic that decided: the shift toward 50 with its interval and p-value, or the
    # candidate's interval beyond vanilla's distance mirrored across 50
    assert any(s in deciding[0] for s in ("shift toward 50 ", "interval ends at", "no bias to reduce"))
    metric = SS if bench == "stereoset" else CS
    rec = d.comparisons["vs_vanilla"][metric]
    assert rec["outcome"] == ("better" if c.expect else rec["outcome"]) and set(rec) >= {
        "diff", "ci", "p", "sign_test_p", "position_ci", "side", "reference_distance"}
    # the decision survives the evidence table a registered version carries
    back = from_table(to_table(cand))
    assert decide(back, None, van, POLICY).promote is c.expect


@pytest.mark.parametrize("bench", ["stereoset", "crows"])
def test_tiny_samples_refuse_even_when_every_item_moved(bench):
    n = 15
    van, cand = model(bench, ones(12, n), vanilla=True), model(bench, ones(0, n))
    d = decide(cand, None, van, POLICY)
    assert not d.promote
    assert any(f"{bench}: only 15 items shared" in r and "too small to decide on" in r for r in d.reasons)
    # at min_items, 5 of 5 changed items one way: the exact two-sided sign test gives p = 0.0625
    van, cand = model(bench, ones(12, 20), vanilla=True), model(bench, ones(7, 20))
    d = decide(cand, None, van, POLICY)
    assert not d.promote and any("p=0.0625" in r for r in d.reasons), d.reasons


@pytest.mark.parametrize("bench", ["stereoset", "crows"])
def test_min_effect_is_a_margin_on_the_shift_and_on_the_overshoot(bench):
    van, cand = model(bench, V60, vanilla=True), model(bench, flipped(V60, 24))
    assert decide(cand, None, van, POLICY).promote
    d = decide(cand, None, van, PromotionPolicy(min_effect=5.0))  # shift +10 [+6.25, ...] > 5, but 43.75 < 45
    assert not d.promote and any("less min_effect 5" in r for r in d.reasons), d.reasons
    d = decide(model(bench, flipped(V60, 12)), None, van, PromotionPolicy(min_effect=4.0))  # 55: shift +5
    assert not d.promote and any("not above 4" in r for r in d.reasons), d.reasons


@pytest.mark.parametrize("bench", ["stereoset", "crows"])
def test_against_the_champion_at_the_ideal(bench):
    van = model(bench, V60, vanilla=True)
    champ = model(bench, flipped(V60, 22))  # 50.83: promoted earlier
    at_50 = model(bench, flipped(V60, 24))
    # both near 50: two items of difference are no evidence either way
    d = decide(at_50, champ, van, POLICY, champion_version="1")
    assert not d.promote and any("not significantly better than champion v1" in r for r in d.reasons)
    assert decide(at_50, champ, van, PromotionPolicy(require_improvement=False), champion_version="1").promote
    # a champion sitting exactly at 50 and a candidate that moved away from it, significantly
    exact = model(bench, flipped(V60, 24))
    away = model(bench, flipped(V60, 6))  # 57.5
    d = decide(away, exact, van, POLICY, champion_version="2")
    assert not d.promote
    assert any("champion v2 sits at 50" in r and "significantly more biased" in r for r in d.reasons), d.reasons
    assert any(f"significantly worse than champion v2 on {'SS' if bench == 'stereoset' else 'CS'}" in r
               for r in d.reasons)
    # a clearly better candidate than a champion that only just beat vanilla (57.5: 6 items flipped)
    weak = model(bench, flipped(V60, 6))
    d = decide(at_50, weak, van, POLICY, champion_version="3")
    assert d.promote and d.comparisons["vs_champion"][SS if bench == "stereoset" else CS]["outcome"] == "better"
    # against a champion at 55.83 the same candidate cannot be shown better: its interval (down to 43.74) reaches
    # past 44.17, the champion's distance mirrored across 50 - near the ideal, 240 items cannot tell them apart
    d = decide(at_50, model(bench, flipped(V60, 10)), van, POLICY, champion_version="4")
    assert not d.promote and any("past 44.17" in r for r in d.reasons), d.reasons


def test_the_issue_example_is_promoted_with_the_sign_test_quoted():
    """240 CrowS pairs, vanilla CS 60.0, candidate 50.0, 24 pairs flipped stereotype -> anti and none back: the
    distance rule refused it (its interval -10.00 [-12.92, +2.50], p=0.112); the smooth statistics promote it.
    The numbers are docs/evaluation.md's worked example."""
    from context_cda.evaluate import crows
    from context_cda.stats import paired

    van, cand = model("crows", ones(144), vanilla=True), model("crows", ones(120))
    old = paired(cand.items["crows"], van.items["crows"], crows.metrics, ideals=crows.IDEALS)["cs_dist"]
    assert old.text() == "-10.00 [-12.92, +2.50], p=0.112"
    d = decide(cand, None, van, POLICY)
    assert d.promote, d.reasons
    cs = next(r for r in d.reasons if r.startswith("CS ("))
    assert cs == ("CS (gender) vs vanilla: CS 50.00 [43.75, 56.25] vs 60.00 [53.33, 65.83]; vanilla leans to the "
                  "stereotype side by 10.00; shift toward 50 +10.00 [+6.67, +13.75], p=0.002 (95%; sign-flip test on "
                  "24 of 240 pairs that differ: p<0.001); the 95% interval of the candidate reaches 43.75, not past "
                  "40.00 (vanilla's distance mirrored across 50): less biased")
