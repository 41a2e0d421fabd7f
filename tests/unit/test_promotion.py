"""The promotion gate on crafted per-item tables: paired intervals against vanilla and the champion."""

from __future__ import annotations

import numpy as np
import pytest

from context_cda.config import BootstrapConfig, PromotionConfig
from context_cda.evaluate.stats import Items
from context_cda.tracking.evidence import Evidence, from_table, to_table
from context_cda.tracking.promotion import CS, LMS, SS, PromotionPolicy, decide

N = 200
TERMS = [f"term{i % 10}" for i in range(N)]


def evidence(ss, cs, lms=None) -> Evidence:
    """A model's per-item decisions: ss[i] = 1 when cluster i prefers the stereotype, cs[i] = 1 when pair i
    prefers sent_more (all pairs stereo, none tied), lms[i] in {0, 0.5, 1}."""
    ss, cs = np.asarray(ss, float), np.asarray(cs, float)
    lms = np.ones(len(ss)) if lms is None else np.asarray(lms, float)
    ones = np.ones(len(cs))
    return Evidence({
        "stereoset": Items.build(range(len(ss)), TERMS[: len(ss)], ss=ss, lms=lms),
        "crows": Items.build(range(len(cs)), None, win=cs, stereo=ones, win_stereo=cs, anti=0 * ones,
                             win_anti=0 * ones),
    })


def share(p: float, n: int = N, shift: int = 0) -> np.ndarray:
    """n items of which the first round(p * n) are 1 (rotated by ``shift``, so the terms get a mix)."""
    v = np.zeros(n)
    v[: round(p * n)] = 1
    return np.roll(v, shift)


VANILLA = evidence(share(0.72), share(0.70))
POLICY = PromotionPolicy()


def test_a_clearly_better_model_is_promoted_without_and_with_a_champion():
    better = evidence(share(0.50), share(0.52))
    d = decide(better, None, VANILLA, POLICY)
    assert d.promote and d.aliases == ["candidate", "champion"], d.reasons
    assert any(r.startswith("SS (gender) vs vanilla") and r.endswith("less biased") for r in d.reasons)
    assert any("no champion yet" in r for r in d.reasons)
    # the reasons quote numbers and intervals: "... shift toward 50 +22.00 [+16.50, +27.50], p=0.002 ..."
    assert all("[" in r and "p=" in r for r in d.reasons if "vs vanilla" in r)
    assert d.candidate[SS] == pytest.approx(50.0) and d.vanilla[SS] == pytest.approx(72.0)
    assert d.comparisons["vs_vanilla"][SS]["significant"]
    # the same model against a clearly worse champion (one that only just beat vanilla)
    champion = evidence(share(0.62), share(0.62))
    d = decide(better, champion, VANILLA, POLICY, champion_version="3")
    assert d.promote, d.reasons
    assert any("vs champion v3" in r and ("less biased" in r or "significantly better" in r) for r in d.reasons)
    assert d.comparisons["vs_champion"][SS]["outcome"] == "better"


def test_an_identical_model_never_displaces_the_champion():
    champion = evidence(share(0.50), share(0.52))
    same = evidence(share(0.50), share(0.52))
    d = decide(same, champion, VANILLA, POLICY, champion_version="1")
    assert not d.promote and d.aliases == ["candidate"]
    diff = d.comparisons["vs_champion"][SS]
    assert diff["diff"] == 0 and diff["ci"] == [0.0, 0.0] and diff["p"] == 1.0
    assert any("not significantly better than champion v1" in r for r in d.reasons)


@pytest.mark.parametrize("champion", [None, "champ"])
def test_a_model_worse_than_vanilla_is_never_promoted(champion):
    worse = evidence(share(0.85), share(0.84))
    champ = evidence(share(0.90), share(0.90)) if champion else None  # even a champion worse still
    d = decide(worse, champ, VANILLA, POLICY, champion_version="1")
    assert not d.promote and d.verdict == "refused: worse"
    assert any("SS (gender) vs vanilla" in r and "shifted away from 50" in r and "more biased" in r
               for r in d.reasons), d.reasons
    # a model *less* biased on SS but more biased on CS is not promoted either
    mixed = evidence(share(0.50), share(0.84))
    assert not decide(mixed, champ, VANILLA, POLICY, champion_version="1").promote


@pytest.mark.parametrize("with_champion", [False, True])
def test_one_item_of_difference_promotes_nothing(with_champion):
    ss, cs = share(0.72), share(0.70)
    ss1, cs1 = ss.copy(), cs.copy()
    ss1[0], cs1[0] = 0.0, 0.0  # one cluster and one pair fewer on the stereotyped side
    one_better = evidence(ss1, cs1)
    d = decide(one_better, None, VANILLA, POLICY)
    assert not d.promote and d.candidate[SS] < d.vanilla[SS]
    if with_champion:  # the same item against a champion equal to vanilla
        d = decide(one_better, VANILLA, VANILLA, POLICY, champion_version="1")
        assert not d.promote
        assert d.comparisons["vs_champion"][SS]["ci"][0] <= 0 <= d.comparisons["vs_champion"][SS]["ci"][1]


def test_lms_non_inferiority_and_its_margin():
    lms_drop = np.ones(N)
    lms_drop[:10] = 0.0  # LMS 95 vs 100: a 5-point loss, clearly below -2
    d = decide(evidence(share(0.50), share(0.52), lms_drop), None, VANILLA, POLICY)
    assert not d.promote and d.verdict == "refused: worse" and d.note == "evidence against it: LMS vs vanilla"
    assert any("LMS vs vanilla" in r and "significantly lower, not non-inferior: worse (lower bound" in r
               for r in d.reasons), d.reasons
    d = decide(evidence(share(0.50), share(0.52), lms_drop), None, VANILLA, PromotionPolicy(lms_delta=15.0))
    assert d.promote, d.reasons
    # a loss the interval cannot tell from none, but that may exceed the margin: non-inferiority not shown
    van_lms, cand_lms = np.ones(N), np.ones(N)
    van_lms[:10], cand_lms[10:24] = 0.0, 0.0  # 10 items gained, 14 lost: -2.00, an interval around it
    van = evidence(share(0.72), share(0.70), van_lms)
    d = decide(evidence(share(0.50), share(0.52), cand_lms), None, van, POLICY)
    lo, hi = d.comparisons["vs_vanilla"][LMS]["ci"]
    assert lo < -2 and hi > 0 and d.verdict == "refused: not shown", d.reasons
    assert d.note.startswith("LMS non-inferiority vs vanilla not shown (lower bound")


def test_min_effect_raises_the_bar():
    slightly = evidence(share(0.60), share(0.60))
    assert decide(slightly, None, VANILLA, POLICY).promote
    strict = PromotionPolicy(min_effect=15.0)  # the shift toward 50 must exceed 15 points with confidence
    d = decide(slightly, None, VANILLA, strict)
    assert not d.promote and any("not above 15" in r for r in d.reasons), d.reasons


def test_champion_not_worse_suffices_without_require_improvement():
    champion = evidence(share(0.50), share(0.52))
    same = evidence(share(0.50), share(0.52))
    assert decide(same, champion, VANILLA, PromotionPolicy(require_improvement=False), champion_version="1").promote


def test_significantly_worse_than_the_champion_on_one_metric_refuses():
    champion = evidence(share(0.50), share(0.50))
    cand = evidence(share(0.50), share(0.66))  # CS |16| vs |0|: worse on CS, equal on SS
    d = decide(cand, champion, VANILLA, POLICY, champion_version="2")
    assert not d.promote
    assert any("significantly worse than champion v2 on CS" in r for r in d.reasons)


def test_fewer_than_min_items_refuses_with_that_reason():
    small_van = evidence(share(0.8, 15), share(0.8, 15))
    small = evidence(share(0.0, 15), share(0.0, 15))
    d = decide(small, None, small_van, POLICY)
    assert not d.promote
    assert any("only 15 items shared with vanilla" in r and "too small to decide on" in r for r in d.reasons)
    assert d.verdict == "refused: evidence missing"


def test_a_missing_metric_refuses_with_its_name():
    ev = evidence(share(0.5), share(0.5))
    no_crows = Evidence({"stereoset": ev.items["stereoset"]})
    d = decide(no_crows, None, VANILLA, POLICY)
    assert not d.promote and any("the candidate has no crows_cs" in r for r in d.reasons)
    d = decide(ev, None, Evidence({"crows": VANILLA.items["crows"]}), POLICY)
    assert not d.promote and any(f"the vanilla model has no {SS}" in r for r in d.reasons)
    assert any(f"the vanilla model has no {LMS}" in r for r in d.reasons)
    d = decide(None, None, VANILLA, POLICY)
    assert not d.promote and any(f"the candidate has no {CS}" in r for r in d.reasons)
    assert d.verdict == "refused: evidence missing" and d.detectable_shift == {}
    # what can be judged still is: an arm without CrowS scores but significantly more biased on SS is worse
    d = decide(Evidence({"stereoset": evidence(share(0.85), share(0.5)).items["stereoset"]}), None, VANILLA, POLICY)
    assert d.verdict == "refused: worse" and any("the candidate has no crows_cs" in r for r in d.reasons)


def test_a_champion_without_evidence_refuses():
    d = decide(evidence(share(0.5), share(0.5)), None, VANILLA, POLICY, champion_version="4", has_champion=True)
    assert not d.promote and any("champion v4 carries no per-item evidence" in r for r in d.reasons)
    assert d.verdict == "refused: evidence missing"


def test_items_are_paired_by_id_not_position():
    ev = evidence(share(0.5), share(0.5))
    items = ev.items["stereoset"]
    order = np.arange(N)[::-1]
    shuffled = Evidence({"stereoset": items.subset(order), "crows": ev.items["crows"].subset(order)})
    d = decide(shuffled, ev, VANILLA, POLICY, champion_version="1")
    assert d.comparisons["vs_champion"][SS]["ci"] == [0.0, 0.0]


def test_policy_from_config_and_evidence_table_round_trip():
    pol = PromotionPolicy.from_config(PromotionConfig(lms_delta=1.5, min_effect=0.5),
                                      BootstrapConfig(level=0.9, resamples=200, seed=7, min_items=30))
    assert (pol.lms_delta, pol.min_effect, pol.require_improvement) == (1.5, 0.5, True)
    assert (pol.level, pol.resamples, pol.seed, pol.min_items) == (0.9, 200, 7, 30)
    back = from_table(to_table(VANILLA))
    for b in ("stereoset", "crows"):
        assert list(back.items[b].ids) == list(VANILLA.items[b].ids)
        for c, v in VANILLA.items[b].columns.items():
            assert np.array_equal(back.items[b].columns[c], v)
    assert decide(back, None, VANILLA, POLICY).to_dict()["comparisons"]["vs_vanilla"][SS]["diff"] == 0.0


def test_seeds_biased_in_opposite_directions_do_not_cancel():
    """Seed 0 at SS = CS = 30 and seed 1 at 70 are each 20 points from 50: worse than vanilla at 60, not better
    (their mean, 50, would look ideal)."""
    from context_cda.evaluate.stats import pooled

    vanilla = evidence(share(0.60), share(0.60))
    s0, s1 = evidence(share(0.30), share(0.30)), evidence(share(0.70), share(0.70))
    arm = Evidence({b: pooled([s0.items[b], s1.items[b]]) for b in ("stereoset", "crows")})
    d = decide(arm, None, vanilla, POLICY)
    assert not d.promote, d.reasons
    assert d.verdict == "refused: worse"
    assert any(r.startswith("SS (gender) vs vanilla: SS 50.00") and "the seeds disagree in direction" in r
               and "seed 1 (of 2) shifted away from 50 (-10.00, p<0.001 vs 0.025" in r
               and r.endswith("significantly more biased") for r in d.reasons), d.reasons
    # stored with the registered version and read back as the champion's evidence: the seeds survive
    back = from_table(to_table(arm))
    assert len(back.items["stereoset"].runs) == 2
    assert decide(back, None, vanilla, POLICY).reasons == d.reasons
