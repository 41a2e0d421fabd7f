"""Seeded bootstrap intervals and paired differences (context_cda.evaluate.stats): hand-computed cases and properties."""

from __future__ import annotations

import math

import numpy as np
import pytest

from context_cda.evaluate import crows, stereoset
from context_cda.evaluate import stats as S


def mean_of(col):
    return lambda m: {"x": m(col)}


def test_two_items_hand_computed():
    """Items {0, 1}: a resample's mean is 0, 1/2 or 1 with probabilities 1/4, 1/2, 1/4, so the 95 % interval is
    [0, 1] and the 40 % interval (quantiles 0.3 and 0.7) is [1/2, 1/2]."""
    items = S.Items.build(["a", "b"], None, x=[0.0, 1.0])
    wide = S.bootstrap(items, mean_of("x"), S.Settings(level=0.95, resamples=4000, seed=1))["x"]
    assert (wide.point, wide.low, wide.high) == (0.5, 0.0, 1.0)
    narrow = S.bootstrap(items, mean_of("x"), S.Settings(level=0.40, resamples=4000, seed=1))["x"]
    assert (narrow.low, narrow.high) == (0.5, 0.5)
    assert narrow.too_small and narrow.n == 2


def test_percentiles_are_the_linear_quantiles_of_the_seeded_resamples():
    """Recompute the interval by hand from the documented draws: one mean per resample, sorted, and the
    quantile at (1 - level) / 2 interpolated linearly between order statistics."""
    x = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0])
    items = S.Items.build(range(7), None, x=x)
    st = S.Settings(level=0.9, resamples=50, seed=3)
    idx = S.draws(items.groups, st.resamples, st.seed)
    assert idx.shape == (50, 7)
    means = sorted(float(np.mean(x[row])) for row in idx)

    def quantile(q):
        h = (len(means) - 1) * q
        lo = math.floor(h)
        return means[lo] + (h - lo) * (means[min(lo + 1, len(means) - 1)] - means[lo])

    got = S.bootstrap(items, mean_of("x"), st)["x"]
    assert got.point == pytest.approx(x.mean())
    assert got.low == pytest.approx(quantile(0.05)) and got.high == pytest.approx(quantile(0.95))


def test_draws_stay_within_their_group_and_keep_its_size():
    groups = np.array(["b", "a", "b", "c", "a", "b"])
    idx = S.draws(groups, 200, 0)
    names, starts = S.group_layout(groups)
    assert names == ["a", "b", "c"] and list(starts) == [0, 2, 5]
    # positions 0-1 hold group a's items, 2-4 group b's, 5 group c's, in every resample
    assert set(idx[:, 0:2].ravel()) == {1, 4}
    assert set(idx[:, 2:5].ravel()) == {0, 2, 5}
    assert set(idx[:, 5]) == {3}
    assert np.array_equal(S.draws(groups, 200, 0), idx) and not np.array_equal(S.draws(groups, 200, 1), idx)


def test_the_macro_average_is_kept_and_matches_the_aggregate():
    """StereoSet: 3 clusters of term a prefer the stereotype, 1 of term b does not -> SS 50 (macro), not 75
    (micro). Resampling within terms keeps every resample's macro-average: term b always contributes 0, term a
    always 100, so the interval is [50, 50]."""
    rows = [{"id": f"a{i}", "target": "a", "bias_type": "gender", "score_stereotype": 0.9,
             "score_anti_stereotype": 0.1, "score_unrelated": 0.5} for i in range(3)]
    rows.append({"id": "b0", "target": "b", "bias_type": "gender", "score_stereotype": 0.1,
                 "score_anti_stereotype": 0.9, "score_unrelated": 0.5})
    o = stereoset.aggregate(rows)["overall"]
    assert o["ss"] == 50.0 and o["ci"]["ss"] == [50.0, 50.0]
    assert o["too_small"] and "min_items=20" in o["too_small_note"]
    assert (o["ci_level"], o["ci_resamples"], o["ci_seed"]) == (0.95, 1000, 0)


def _random_stereoset(n=300, seed=0, p=0.6):
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        pro, anti, unrel = rng.random(3)
        if rng.random() < p:
            pro, anti = max(pro, anti), min(pro, anti)
        rows.append({"id": f"c{i}", "target": f"t{i % 12}", "bias_type": "gender", "score_stereotype": pro,
                     "score_anti_stereotype": anti, "score_unrelated": unrel})
    return rows


def _random_crows(n=300, seed=0):
    rng = np.random.default_rng(seed)
    return [{"id": f"p{i}", "bias_type": "gender", "direction": "stereo" if i % 3 else "antistereo",
             "score_more": float(rng.integers(0, 5)), "score_less": float(rng.integers(0, 5))} for i in range(n)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_intervals_contain_the_point_estimate(seed):
    o = stereoset.aggregate(_random_stereoset(seed=seed))["overall"]
    for k in ("ss", "lms"):
        assert o["ci"][k][0] <= o[k] <= o["ci"][k][1]
        assert o["ci"][k][1] - o["ci"][k][0] > 1.0  # 300 clusters: a few points wide, not degenerate
    c = crows.aggregate(_random_crows(seed=seed))["overall"]
    for k in ("cs", "stereo", "antistereo"):
        assert c["ci"][k][0] <= c[k] <= c["ci"][k][1]
    assert not c["too_small"]


def test_crows_intervals_hand_computed_bounds():
    """All 40 pairs won: CS 100 in every resample; ties are losses that stay in N."""
    rows = [{"id": i, "bias_type": "gender", "direction": "stereo", "score_more": 1.0, "score_less": 0.0}
            for i in range(40)]
    o = crows.aggregate(rows)["overall"]
    assert o["cs"] == 100.0 and o["ci"]["cs"] == [100.0, 100.0]
    rows[0] = {**rows[0], "score_less": 1.0}  # one tie: CS 97.5; a resample holds it 0, 1, 2... times
    o = crows.aggregate(rows)["overall"]
    assert o["cs"] == 97.5 and o["ci"]["cs"][1] == 100.0 and o["ci"]["cs"][0] < 97.5
    assert o["ci"]["stereo"] == [100.0, 100.0]  # the tie is not a stereo decision


def test_paired_identical_models_give_zero_interval_and_p_one():
    items = stereoset.item_scores(_random_stereoset())
    d = S.paired(items, items, stereoset.metrics, ideals=stereoset.IDEALS)
    for k in ("ss", "lms", "icat", "ss_dist"):
        assert (d[k].point, d[k].low, d[k].high, d[k].p) == (0.0, 0.0, 0.0, 1.0)
        assert not d[k].significant


def test_paired_difference_of_a_clearly_different_model():
    a = stereoset.item_scores(_random_stereoset(p=0.9, seed=5))
    b = stereoset.item_scores(_random_stereoset(p=0.0, seed=6))
    d = S.paired(a, b, stereoset.metrics, ideals=stereoset.IDEALS)["ss"]
    assert d.point > 20 and d.low > 0 and d.significant and d.p < 0.01
    pa = S.bootstrap(a, stereoset.metrics)["ss"].point
    pb = S.bootstrap(b, stereoset.metrics)["ss"].point
    assert d.point == pytest.approx(pa - pb)
    assert "p=" in d.text() and d.text().startswith("+")


def test_paired_is_tighter_than_the_unpaired_intervals_for_correlated_models():
    rows = _random_stereoset(seed=3)
    a = stereoset.item_scores(rows)
    flipped = [dict(r) for r in rows]
    for r in flipped[:6]:  # six clusters change their decision
        r["score_stereotype"], r["score_anti_stereotype"] = r["score_anti_stereotype"], r["score_stereotype"]
    b = stereoset.item_scores(flipped)
    d = S.paired(a, b, stereoset.metrics)["ss"]
    single = S.bootstrap(a, stereoset.metrics)["ss"]
    assert (d.high - d.low) < (single.high - single.low) / 2


def test_p_value_hand_computed():
    assert S.p_value(np.zeros(9)) == 1.0
    assert S.p_value(np.ones(9)) == pytest.approx(2 * 1 / 10)  # no draw <= 0: 2 * (0 + 1) / (9 + 1)
    assert S.p_value(np.array([-1.0, 1, 1, 1])) == pytest.approx(2 * 2 / 5)
    assert math.isnan(S.p_value(np.array([np.nan])))


def test_alignment_by_id_and_pooling_over_seeds():
    a = S.Items.build(["x", "y", "z"], None, v=[1.0, 0.0, 1.0])
    b = S.Items.build(["z", "w", "x"], None, v=[0.0, 1.0, 1.0])
    a2, b2 = S.align(a, b)
    assert list(a2.ids) == ["x", "z"] and list(b2.ids) == ["x", "z"] and list(b2.columns["v"]) == [1.0, 0.0]
    pooled = S.pooled([a, b])
    assert list(pooled.ids) == ["x", "z"] and list(pooled.columns["v"]) == [1.0, 0.5]
    # the pooled point estimate is the mean over seeds of the seeds' estimates on the shared items
    assert S.bootstrap(pooled, mean_of("v"))["x"].point == pytest.approx((1.0 + 0.5) / 2)


def test_empty_and_nan_groups():
    empty = S.bootstrap(S.Items.build([], None, v=[]), mean_of("v"))["x"]
    assert math.isnan(empty.point) and math.isnan(empty.low) and empty.too_small
    # a ratio whose denominator is 0 in the data: NaN, not an error
    items = S.Items.build(range(3), None, num=[0, 0, 0], den=[0, 0, 0])
    iv = S.bootstrap(items, lambda m: {"r": m("num", "den")})["r"]
    assert math.isnan(iv.point) and math.isnan(iv.high)


def test_mean_std():
    assert S.mean_std([1.0, 3.0]) == (2.0, pytest.approx(math.sqrt(2)), 2)
    assert S.mean_std([5.0, float("nan")]) == (5.0, 0.0, 1)
    m, s, n = S.mean_std([])
    assert math.isnan(m) and n == 0


def test_flat_metrics_carry_the_interval_bounds():
    from context_cda.config import EvaluateConfig
    from context_cda.evaluate import get_benchmark

    cfg = EvaluateConfig(bootstrap={"resamples": 200, "level": 0.9, "seed": 4})
    bench = get_benchmark("stereoset")
    agg = bench.aggregate(_random_stereoset(), cfg)
    flat = bench.flat(agg)
    assert flat["stereoset_ss_ci_low"] <= flat["stereoset_ss"] <= flat["stereoset_ss_ci_high"]
    assert {"stereoset_lms_ci_low", "stereoset_icat_ci_high"} <= set(flat)
    assert agg["overall"]["ci_level"] == 0.9 and agg["overall"]["ci_resamples"] == 200


def test_accuracy_intervals_of_the_extrinsic_benchmarks():
    from context_cda.config import EvaluateConfig
    from context_cda.evaluate import get_benchmark

    cfg = EvaluateConfig()
    rows = [{"task": t, "id": f"{t}{i}", "label": i % 2, "pred": int(i % 3 == 0), "correct": (i % 2) == int(i % 3 == 0)}
            for t in ("rte", "sst2") for i in range(30)]
    agg = get_benchmark("glue").aggregate(rows, cfg)
    o = agg["overall"]
    for k in ("rte_acc", "sst2_acc", "avg_acc"):
        assert o["ci"][k][0] <= o[k] <= o["ci"][k][1]
    flat = get_benchmark("glue").flat(agg)
    assert "glue_avg_acc_ci_low" in flat and "glue_rte_acc_ci_high" in flat


def test_pooled_seeds_keep_each_seeds_distance_to_the_ideal():
    """Two seeds biased in opposite directions do not cancel: |SS-50| is the mean of the seeds' distances."""
    n = 100
    lo, hi = np.zeros(n), np.zeros(n)
    lo[:30], hi[:70] = 1.0, 1.0  # seed 0: 30 % stereotyped, seed 1: 70 %
    seed0 = S.Items.build(range(n), None, v=lo)
    seed1 = S.Items.build(range(n), None, v=hi)
    both = S.pooled([seed0, seed1])
    fn = S.with_distances(lambda m: {"x": 100 * m("v")}, {"x": 50.0})
    iv = S.bootstrap(both, fn)
    assert iv["x"].point == pytest.approx(50.0) and iv["x_dist"].point == pytest.approx(20.0)
    # against a model at 60 % (10 from 50) the pooled arm is 10 points *further* from 50, significantly
    ref = np.zeros(n)
    ref[:60] = 1.0
    d = S.paired(both, S.Items.build(range(n), None, v=ref), lambda m: {"x": 100 * m("v")}, ideals={"x": 50.0})
    assert d["x_dist"].point == pytest.approx(10.0) and d["x_dist"].low > 0
    # the item-averaged columns are still there for readers of plain columns; subset and align keep the runs
    assert both.columns["v"][0] == pytest.approx(1.0) and len(both.subset(np.arange(10)).runs) == 2
    a2, b2 = S.align(S.Items.build(range(n), None, v=ref), both)
    assert len(b2.runs) == 2


def test_one_item_groups_are_resampled_together():
    """A StereoSet term with one item would never vary alone: one item of difference would look certain."""
    n = 40
    groups = [f"term{i}" for i in range(n)]  # every term has one cluster
    a = np.zeros(n)
    a[:20] = 1.0
    b = a.copy()
    b[0] = 0.0  # one cluster differs
    fn = lambda m: {"x": 100 * m("v")}  # noqa: E731
    d = S.paired(S.Items.build(range(n), groups, v=b), S.Items.build(range(n), groups, v=a), fn)
    assert d["x"].point == pytest.approx(-2.5)
    assert d["x"].low < d["x"].high and not d["x"].significant
    iv = S.bootstrap(S.Items.build(range(n), groups, v=a), fn)["x"]
    assert iv.low < 50.0 < iv.high
    # groups of several items are still resampled within themselves: group sizes kept in every resample
    mixed = ["big"] * 10 + [f"s{i}" for i in range(5)]
    idx = S.draws(mixed, 50, 0)
    names, starts = S.group_layout(mixed)
    assert names[0] == "big" and starts[0] == 0
    assert (idx[:, :10] < 10).all() and (idx[:, 10:] >= 10).all()


def test_sign_flip_hand_computed():
    """Equal weights: the exact two-sided sign test on the discordant items (5 of 5 one way: p = 2/32); unequal
    weights (macro-average over groups): every sign pattern counted; identical models: p = 1."""
    a = np.zeros(40)
    b = a.copy()
    b[:5] = 1.0
    t = S.sign_flip(S.Items.build(range(40), None, v=a), S.Items.build(range(40), None, v=b), "v")
    assert (t.p, t.discordant, t.n, t.exact) == (0.0625, 5, 40, True)
    b[:6] = 1.0  # 6 of 6: p = 2/64
    assert S.sign_flip(S.Items.build(range(40), None, v=a), S.Items.build(range(40), None, v=b), "v").p == 0.03125
    same = S.Items.build(range(40), None, v=b)
    assert S.sign_flip(same, same, "v").p == 1.0
    # two groups: group g0 has 2 items (weight 1/4 each), g1 has 4 (weight 1/8 each); items 0 (g0) and 2, 3 (g1)
    # differ: d = (+1/4, -1/8, -1/8), sum 0: every one of the 8 sign patterns has |sum| >= 0, so p = 1
    groups = ["g0", "g0", "g1", "g1", "g1", "g1"]
    x, y = np.array([1, 0, 0, 0, 0, 0.0]), np.array([0, 0, 1, 1, 0, 0.0])
    t = S.sign_flip(S.Items.build(range(6), groups, v=x), S.Items.build(range(6), groups, v=y), "v")
    assert t.p == 1.0 and t.discordant == 3 and t.exact
    # d = (+1/4, +1/8, +1/8): |sum| = 1/2 is reached by 2 of the 8 patterns (all +, all -)
    y = np.array([0, 0, 0, 0, 0, 0.0])
    x = np.array([1, 0, 1, 1, 0, 0.0])
    t = S.sign_flip(S.Items.build(range(6), groups, v=x), S.Items.build(range(6), groups, v=y), "v")
    assert t.p == pytest.approx(0.25)
    # many differing items of unequal weight: a seeded Monte Carlo, reproducible
    g = [f"t{i % 7}" for i in range(300)]
    x, y = (np.arange(300) % 3 == 0).astype(float), (np.arange(300) % 5 == 0).astype(float)
    t1 = S.sign_flip(S.Items.build(range(300), g, v=x), S.Items.build(range(300), g, v=y), "v")
    t2 = S.sign_flip(S.Items.build(range(300), g, v=x), S.Items.build(range(300), g, v=y), "v")
    assert not t1.exact and t1.discordant > S.EXACT_FLIPS and t1.p == t2.p and 0 < t1.p <= 1


def test_runs_min_takes_the_worst_seed_on_every_resample():
    n = 50
    lo, hi = np.zeros(n), np.zeros(n)
    lo[:10], hi[:40] = 1.0, 1.0
    both = S.pooled([S.Items.build(range(n), None, v=lo), S.Items.build(range(n), None, v=hi)])
    fn = lambda m: {"x": 100 * m("v")}  # noqa: E731
    assert S.point(both, fn)["x"] == pytest.approx(50.0)
    assert S.point(both, fn, runs="min")["x"] == pytest.approx(20.0)
    iv = S.bootstrap(both, fn, runs="min")["x"]
    assert iv.point == pytest.approx(20.0) and iv.high < 50.0


@pytest.mark.parametrize("seed", range(5))
def test_percentile_p_is_below_alpha_exactly_when_the_interval_lies_above_the_margin(seed):
    """The gate decides on percentile_p; the report prints the interval: the two must never disagree."""
    rng = np.random.default_rng(seed)
    values = np.round(rng.normal(2.0, 2.0, 999) * 4) / 4  # discrete, with ties, as item shares are
    for margin in (-1.0, 0.0, 0.5, 1.0, 2.0, 3.0):
        p = S.percentile_p(values, margin)
        for alpha in (0.01, 0.05, 0.1, 0.2, 0.5):
            low = S._percentiles(values, 1 - alpha)[0]
            assert (p < alpha) == (low > margin), (margin, alpha, p, low)
    assert S.percentile_p(np.array([1.0, 2.0]), 0.0) == 0.0 and S.percentile_p(np.array([-1.0, -2.0]), 0.0) == 1.0


def test_holm_adjusted_p_values_hand_computed():
    # sorted 0.01, 0.03, 0.04 -> 3 * 0.01, max(0.03, 2 * 0.03), max(0.06, 0.04): in the given order
    assert S.holm([0.04, 0.01, 0.03]) == pytest.approx([0.06, 0.03, 0.06])
    assert S.holm([0.2]) == [0.2] and S.holm([]) == [] and S.holm([0.6, 0.9]) == [1.0, 1.0]


def test_detectable_shift_from_the_discordant_share():
    """McNemar's power calculation: n equal-weight items of which k differ, (z_0.975 + z_0.8) * 100 * sqrt(k) / n;
    never below the fewest items that can be significant at all (6 of n at alpha 0.05)."""
    n = 200
    a, b = np.zeros(n), np.zeros(n)
    a[:40] = 1  # 40 discordant items
    flip = S.sign_flip(S.Items.build(range(n), None, v=a), S.Items.build(range(n), None, v=b), "v")
    assert flip.discordant == 40 and flip.null_sd == pytest.approx(math.sqrt(40) / n)
    assert S.detectable_shift(flip, 0.05) == pytest.approx(2.8016 * 100 * math.sqrt(40) / n, abs=1e-3)
    assert S.detectable_shift(flip, 0.05, margin=2.0) == pytest.approx(2.0 + 2.8016 * 100 * math.sqrt(40) / n,
                                                                       abs=1e-3)
    none = S.sign_flip(S.Items.build(range(n), None, v=b), S.Items.build(range(n), None, v=b), "v")
    assert S.detectable_shift(none, 0.05) == pytest.approx(100 * 6 / n) and S.fewest_items(0.05) == 6
    assert S.fewest_items(0.025) == 7  # Holm's first step for two metrics: 2 * 0.5**7 < 0.025


def test_paired_draws_give_any_paired_statistic_on_the_same_resamples():
    n = 100
    a, b = np.zeros(n), np.zeros(n)
    a[:30], b[:60] = 1, 1
    fn = lambda m: {"x": 100 * m("v")}  # noqa: E731
    ia, ib = S.Items.build(range(n), None, v=a), S.Items.build(range(n), None, v=b)
    dr = S.paired_draws(ia, ib, fn)
    assert dr.difference(dr.a["x"] - dr.b["x"], dr.boot_a["x"] - dr.boot_b["x"]) == S.paired(ia, ib, fn)["x"]
    total = dr.difference(dr.a["x"] + dr.b["x"], dr.boot_a["x"] + dr.boot_b["x"])  # a sum: wider than either
    assert total.point == pytest.approx(90.0) and total.high - total.low > dr.interval("x", "b").high - dr.interval(
        "x", "b").low
    assert dr.interval("x", "a").point == pytest.approx(30.0)
    pooled = S.pooled([ia, ib])
    assert [len(r) for r in pooled.each_run()] == [n, n] and ia.each_run() == [ia]
