import math

import numpy as np
import pytest

from context_cda.entropy.estimators import (
    cluster_log_probs,
    logsumexp,
    se_discrete,
    se_eq1,
    se_plogp,
    semantic_entropies,
)


def test_logsumexp_matches_naive_and_is_stable():
    assert logsumexp([0.0, 0.0]) == pytest.approx(math.log(2))
    assert logsumexp([-1000.0, -1000.0]) == pytest.approx(-1000.0 + math.log(2))
    assert logsumexp([]) == float("-inf")


def test_two_clusters_of_known_probability():
    # four samples with probabilities 0.4, 0.2, 0.3, 0.1 (already normalised); clusters {0,1}, {2,3}
    ll = np.log([0.4, 0.2, 0.3, 0.1])
    ids = [0, 0, 1, 1]
    lp = cluster_log_probs(ll, ids)
    assert np.exp(lp) == pytest.approx([0.6, 0.4])
    # Eq. 1: -(1/2)(log 0.6 + log 0.4)
    assert se_eq1(lp) == pytest.approx(-(math.log(0.6) + math.log(0.4)) / 2)
    assert se_eq1(lp) == pytest.approx(0.7135581778)
    # -sum p log p
    assert se_plogp(lp) == pytest.approx(-(0.6 * math.log(0.6) + 0.4 * math.log(0.4)))
    assert se_plogp(lp) == pytest.approx(0.6730116670)
    # sizes 2/4, 2/4
    assert se_discrete(ids) == pytest.approx(math.log(2))


def test_normalisation_over_samples_is_scale_free():
    # unnormalised log-likelihoods: shifting all by a constant must not change anything
    ll = np.array([-3.0, -4.0, -2.5, -7.0])
    ids = [0, 1, 0, 2]
    a = semantic_entropies(ll, ids)
    b = semantic_entropies(ll - 50.0, ids)
    assert a == pytest.approx(b)
    p = np.exp(ll) / np.exp(ll).sum()
    pc = np.array([p[0] + p[2], p[1], p[3]])
    assert a["eq1"] == pytest.approx(-np.mean(np.log(pc)))
    assert a["plogp"] == pytest.approx(-np.sum(pc * np.log(pc)))
    assert a["n_clusters"] == 3


def test_one_cluster_is_zero():
    est = semantic_entropies([-1.0, -5.0, -2.0], [0, 0, 0])
    assert est == {"eq1": 0.0, "plogp": 0.0, "discrete": 0.0, "n_clusters": 1}


def test_all_singletons_discrete_is_log_m():
    m = 10
    rng = np.random.default_rng(0)
    est = semantic_entropies(rng.normal(size=m) - 5, list(range(m)))
    assert est["discrete"] == pytest.approx(math.log(m))
    assert est["n_clusters"] == m
    # with equal likelihoods every estimator is log M
    eq = semantic_entropies([-2.0] * m, list(range(m)))
    assert eq["eq1"] == pytest.approx(math.log(m))
    assert eq["plogp"] == pytest.approx(math.log(m))


def test_bad_inputs():
    with pytest.raises(ValueError):
        cluster_log_probs([], [])
    with pytest.raises(ValueError):
        cluster_log_probs([0.0, float("nan")], [0, 1])
    with pytest.raises(ValueError):
        cluster_log_probs([0.0], [0, 1])
