"""Extrinsic metrics against hand-computed values (the arithmetic is in the comments)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from context_cda.evaluate.extrinsic.metrics import (
    accuracy,
    nli_bias,
    pearson,
    rankdata,
    spearman,
    sts_bias,
    tpr_gap,
)

# ------------------------------------------------------------------------------------------------ accuracy


def test_accuracy_is_a_fraction():
    assert accuracy([0, 1, 1, 2], [0, 1, 2, 2]) == 0.75  # 3 of 4
    assert accuracy(np.array([1]), np.array([0])) == 0.0


@pytest.mark.parametrize(
    "args, msg",
    [(([], []), "empty"), (([0, 1], [0]), "length mismatch"), ((0, 0), "scalar")],
)
def test_accuracy_validates(args, msg):
    with pytest.raises(ValueError, match=msg):
        accuracy(*args)


# ------------------------------------------------------------------------------------------------ TPR gap


def test_tpr_gap_hand_computed():
    names = ("nurse", "surgeon", "dj")
    rows = [
        # (label, pred, gender)
        # nurse/female: 4 bios, 3 recognised -> TPR_f = 3/4 = 0.75
        (0, 0, "female"), (0, 0, "female"), (0, 0, "female"), (0, 1, "female"),
        # nurse/male: 2 bios, 1 recognised -> TPR_m = 1/2 = 0.5;  gap_nurse = 0.75 - 0.5 = 0.25
        (0, 0, "male"), (0, 2, "male"),
        # surgeon/female: 2 bios, 1 recognised -> 0.5
        (1, 1, "female"), (1, 0, "female"),
        # surgeon/male: 4 bios, 4 recognised -> 1.0;  gap_surgeon = 0.5 - 1.0 = -0.5
        (1, 1, "male"), (1, 1, "male"), (1, 1, "male"), (1, 1, "male"),
        # dj: men only -> TPR_f undefined, dj is skipped
        (2, 2, "male"), (2, 2, "male"),
    ]  # fmt: skip
    labels, preds, genders = zip(*rows, strict=True)
    out = tpr_gap(list(preds), list(labels), list(genders), names)
    # rms = sqrt((0.25^2 + (-0.5)^2) / 2) = sqrt((0.0625 + 0.25) / 2) = sqrt(0.15625) = 0.3952847...
    assert out["rms"] == pytest.approx(math.sqrt(0.15625))
    assert out["rms"] == pytest.approx(0.39528470752)
    assert out["n_professions_used"] == 2
    assert out["skipped"] == ["dj"]
    # accuracy: correct = 3 + 1 + 1 + 4 + 2 = 11 of 14
    assert out["accuracy"] == pytest.approx(11 / 14)
    assert out["n"] == 14
    nurse = out["per_profession"]["nurse"]
    assert nurse == {"n_female": 4, "tpr_female": 0.75, "n_male": 2, "tpr_male": 0.5, "gap": 0.25}
    assert out["per_profession"]["surgeon"]["gap"] == -0.5
    dj = out["per_profession"]["dj"]
    assert dj["tpr_female"] is None and dj["tpr_male"] == 1.0 and dj["gap"] is None and dj["n_female"] == 0


def test_tpr_gap_no_usable_profession_and_validation():
    out = tpr_gap([0, 0], [0, 0], ["male", "male"], ["nurse"])
    assert out["rms"] is None and out["skipped"] == ["nurse"] and out["n_professions_used"] == 0
    with pytest.raises(ValueError, match="male' or 'female"):
        tpr_gap([0], [0], ["x"], ["nurse"])
    with pytest.raises(ValueError, match="class indices in 0..0"):
        tpr_gap([1], [0], ["male"], ["nurse"])
    with pytest.raises(ValueError, match="length mismatch"):
        tpr_gap([0, 0], [0], ["male"], ["nurse"])
    # genders are case-insensitive ("Female" from the CSV form)
    assert tpr_gap([0, 0], [0, 0], ["Female", "MALE"], ["nurse"])["rms"] == 0.0


# ------------------------------------------------------------------------------------------------ STS bias


def test_sts_bias_hand_computed():
    # d = male - female = [0.25, -0.125, 0, 0.5] (exact in binary)
    male = [1.0, 0.5, 0.25, 0.75]
    female = [0.75, 0.625, 0.25, 0.25]
    out = sts_bias(male, female, thresholds=(0.1, 0.25))
    assert out["n"] == 4
    assert out["mean_abs_diff"] == pytest.approx((0.25 + 0.125 + 0 + 0.5) / 4)  # 0.21875
    assert out["mean_diff"] == pytest.approx((0.25 - 0.125 + 0 + 0.5) / 4)  # 0.15625
    assert out["frac_gt_0.1"] == 0.75  # 0.25, 0.125, 0.5
    assert out["frac_gt_0.25"] == 0.25  # only 0.5 (0.25 is not > 0.25)
    assert out["frac_male_higher"] == 0.5  # 0.25 and 0.5; the tie counts for neither
    assert out["male_mean"] == pytest.approx(0.625) and out["female_mean"] == pytest.approx(0.46875)


# the reference (Lauscher et al. 2021 code): sims on the raw STS-B 0-5 scale, |d| > 0.1, 0.3, 0.5, 0.7
STS_MALE = [3.875, 2.0, 4.5, 1.0, 2.625, 0.375]
STS_FEMALE = [3.25, 2.25, 4.5, 1.75, 2.5, 0.0]  # d = .625, -.25, 0, -.75, .125, .375 (exact in binary)


def test_sts_bias_on_the_reference_scale():
    out = sts_bias(STS_MALE, STS_FEMALE)  # default thresholds = the reference's
    assert [k for k in out if k.startswith("frac_gt_")] == ["frac_gt_0.1", "frac_gt_0.3", "frac_gt_0.5", "frac_gt_0.7"]
    assert out["mean_abs_diff"] == pytest.approx(2.125 / 6)  # (.625 + .25 + 0 + .75 + .125 + .375) / 6
    assert out["mean_diff"] == pytest.approx(0.125 / 6)  # (.625 - .25 + 0 - .75 + .125 + .375) / 6
    assert out["frac_gt_0.1"] == pytest.approx(5 / 6)  # all but the tie
    assert out["frac_gt_0.3"] == pytest.approx(3 / 6)  # .625, .75, .375
    assert out["frac_gt_0.5"] == pytest.approx(2 / 6)  # .625, .75
    assert out["frac_gt_0.7"] == pytest.approx(1 / 6)  # .75
    assert out["frac_male_higher"] == pytest.approx(3 / 6)  # .625, .125, .375
    # the same model on the old [0, 1] scale (gold / 5) reads 1/5 of the difference and other shares
    unit = sts_bias([m / 5 for m in STS_MALE], [f / 5 for f in STS_FEMALE])
    assert unit["mean_abs_diff"] == pytest.approx(out["mean_abs_diff"] / 5)
    assert unit["frac_gt_0.1"] == pytest.approx(2 / 6)  # |d| / 5 > 0.1 <=> |d| > 0.5


def test_sts_bias_validates():
    with pytest.raises(ValueError, match="length mismatch"):
        sts_bias([0.1, 0.2], [0.1])
    with pytest.raises(ValueError, match="empty"):
        sts_bias([], [])
    with pytest.raises(ValueError, match="finite"):
        sts_bias([float("nan")], [0.1])


# ------------------------------------------------------------------------------------------------ NLI bias


def test_nli_bias_hand_computed():
    probs = [
        [0.1, 0.6, 0.3],  # male:   P(n)=0.6, argmax neutral
        [0.5, 0.2, 0.3],  # male:   P(n)=0.2, argmax entailment
        [0.2, 0.7, 0.1],  # female: P(n)=0.7, argmax neutral
        [0.0, 0.3, 0.7],  # female: P(n)=0.3, argmax contradiction
    ]
    out = nli_bias(probs, ["male", "male", "female", "female"], neutral_index=1, strict=False)
    # overall: NN = (0.6+0.2+0.7+0.3)/4 = 0.45; FN = 2/4; T:0.5 = #{0.6, 0.7}/4 = 0.5; T:0.7 = #{0.7}/4 = 0.25
    ov = out["overall"]
    assert ov["n"] == 4
    assert ov["net_neutral"] == pytest.approx(0.45)
    assert ov["fraction_neutral"] == 0.5
    assert ov["threshold_0.5"] == 0.5
    assert ov["threshold_0.7"] == 0.25  # P >= tau (strict=False): 0.7 counts
    # male: NN = (0.6+0.2)/2 = 0.4, FN = 1/2, T:0.5 = 1/2, T:0.7 = 0
    assert out["male"]["net_neutral"] == pytest.approx(0.4)
    male = out["male"]
    assert (male["n"], male["fraction_neutral"], male["threshold_0.5"], male["threshold_0.7"]) == (2, 0.5, 0.5, 0)
    # female: NN = (0.7+0.3)/2 = 0.5, FN = 1/2, T:0.5 = 1/2, T:0.7 = 1/2
    assert out["female"]["net_neutral"] == pytest.approx(0.5)
    assert out["female"]["threshold_0.7"] == 0.5
    # male - female: NN -0.1, FN 0, T:0.5 0, T:0.7 -0.5
    d = out["difference"]
    assert d["net_neutral"] == pytest.approx(-0.1)
    assert d["fraction_neutral"] == 0 and d["threshold_0.5"] == 0 and d["threshold_0.7"] == -0.5
    assert "n" not in d


def test_nli_bias_threshold_is_strict_as_the_reference():
    # the reference evaluation counts res[:, 1] > tau: P(neutral) = 0.5 and 0.7 exactly do not reach 0.5 / 0.7
    probs = [[0.25, 0.5, 0.25], [0.125, 0.75, 0.125], [0.0, 0.875, 0.125], [0.3, 0.7, 0.0]]
    ref = nli_bias(probs, ["male", "male", "female", "female"], neutral_index=1)["overall"]  # strict by default
    assert ref["threshold_0.5"] == 0.75  # 0.75, 0.875, 0.7 (0.5 is not > 0.5)
    assert ref["threshold_0.7"] == 0.5  # 0.75, 0.875 (0.7 is not > 0.7)
    loose = nli_bias(probs, ["male", "male", "female", "female"], neutral_index=1, strict=False)["overall"]
    assert (loose["threshold_0.5"], loose["threshold_0.7"]) == (1.0, 0.75)


def test_nli_bias_one_gender_missing_gives_none():
    out = nli_bias(np.array([[0.2, 0.8]]), ["female"], neutral_index=1, thresholds=(0.5,))
    assert out["male"]["n"] == 0 and out["male"]["net_neutral"] is None
    assert out["difference"] == {"net_neutral": None, "fraction_neutral": None, "threshold_0.5": None}


def test_nli_bias_validates():
    with pytest.raises(ValueError, match="sum to 1"):
        nli_bias([[0.5, 0.4, 0.3]], ["male"], 1)
    with pytest.raises(ValueError, match="2-D"):
        nli_bias([0.5, 0.5], ["male", "female"], 1)
    with pytest.raises(ValueError, match="length mismatch"):
        nli_bias([[0.5, 0.5]], ["male", "female"], 1)
    with pytest.raises(ValueError, match="neutral_index"):
        nli_bias([[0.5, 0.5]], ["male"], 2)
    with pytest.raises(ValueError, match="male' or 'female"):
        nli_bias([[0.5, 0.5]], ["other"], 1)


# ------------------------------------------------------------------------------------------------ correlations


def test_pearson_hand_computed():
    # x-mean = [-1.5,-0.5,0.5,1.5], y-mean = [-3,-1,0,4]; sum prod = 4.5+0.5+0+6 = 11
    # sum sq: 5 and 26 -> r = 11 / sqrt(130) = 0.96476...
    assert pearson([1, 2, 3, 4], [2, 4, 5, 9]) == pytest.approx(11 / math.sqrt(130))
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(pearson([1, 1, 1], [1, 2, 3]))  # constant input: undefined
    with pytest.raises(ValueError, match="at least 2"):
        pearson([1], [1])


def test_spearman_with_ties_hand_computed():
    # ranks x = [1, 2.5, 2.5, 4] (the two 2s share ranks 2 and 3), ranks y = [1, 3, 2, 4]; both mean 2.5
    # dx = [-1.5,0,0,1.5], dy = [-1.5,0.5,-0.5,1.5]: sum prod = 4.5, sum sq = 4.5 and 5
    # rho = 4.5 / sqrt(4.5 * 5) = sqrt(0.9) = 0.948683...
    assert rankdata([1, 2, 2, 3]).tolist() == [1, 2.5, 2.5, 4]
    assert rankdata([30, 10, 20, 20]).tolist() == [4, 1, 2.5, 2.5]
    assert spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(math.sqrt(0.9))
    assert spearman([1, 2, 3, 4], [1, 4, 9, 16]) == pytest.approx(1.0)  # monotone, not linear


def test_correlations_match_scipy():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    x = rng.integers(0, 5, 50).astype(float)  # many ties
    y = x + rng.normal(0, 1, 50)
    assert pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0])
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0])
