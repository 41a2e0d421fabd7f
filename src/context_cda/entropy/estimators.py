"""Semantic-entropy estimators: small pure functions over log-likelihoods and cluster ids (numpy only).

Notation (Kuhn et al. 2023; Farquhar et al. 2024): for one input x we have M samples s_1..s_M with log-likelihoods
l_i = log p(s_i | x) under the target model and cluster ids c_i from bidirectional entailment.

* sample probabilities are normalised over the samples: log p~_i = l_i - logsumexp_k l_k;
* a cluster's probability is the sum of its members' normalised probabilities:
  log p(C_j | x) = logsumexp_{i in C_j} log p~_i  (so the cluster probabilities sum to one);
* ``eq1``: the paper's Eq. 1, SE = -(1/|C|) sum_j log p(C_j | x);
* ``plogp``: SE = -sum_j p(C_j | x) log p(C_j | x);
* ``discrete``: entropy of the cluster sizes, -sum_j (n_j/M) log(n_j/M) (ignores the likelihoods).

All entropies are in nats. One cluster gives 0 under every estimator; M singletons give log M under ``discrete``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

ESTIMATORS = ("eq1", "plogp", "discrete")


def logsumexp(values: Sequence[float] | np.ndarray) -> float:
    """Numerically stable log(sum(exp(values))); -inf for an empty input."""
    a = np.asarray(values, dtype=np.float64)
    if a.size == 0:
        return float("-inf")
    m = float(np.max(a))
    if not np.isfinite(m):
        return m
    return m + float(np.log(np.sum(np.exp(a - m))))


def _check(logliks: Sequence[float], cluster_ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    ll = np.asarray(logliks, dtype=np.float64)
    ids = np.asarray(cluster_ids, dtype=np.int64)
    if ll.ndim != 1 or ids.ndim != 1 or ll.shape != ids.shape:
        raise ValueError(
            f"logliks and cluster_ids must be 1-d of the same length, got {ll.shape} and {ids.shape}"
        )
    if ll.size == 0:
        raise ValueError("semantic entropy needs at least one sample")
    if not np.all(np.isfinite(ll)):
        raise ValueError(f"log-likelihoods must be finite, got {ll.tolist()}")
    return ll, ids


def cluster_log_probs(logliks: Sequence[float], cluster_ids: Sequence[int]) -> np.ndarray:
    """log p(C_j | x) for each cluster j in order of first appearance, normalised over all samples."""
    ll, ids = _check(logliks, cluster_ids)
    norm = ll - logsumexp(ll)
    order = list(dict.fromkeys(ids.tolist()))
    return np.array([logsumexp(norm[ids == c]) for c in order], dtype=np.float64)


def se_eq1(cluster_logp: Sequence[float]) -> float:
    """The paper's Eq. 1: -(1/|C|) sum_j log p(C_j | x)."""
    lp = np.asarray(cluster_logp, dtype=np.float64)
    return float(max(0.0, -np.mean(lp))) if lp.size else float("nan")


def se_plogp(cluster_logp: Sequence[float]) -> float:
    """-sum_j p(C_j | x) log p(C_j | x)."""
    lp = np.asarray(cluster_logp, dtype=np.float64)
    return float(max(0.0, -np.sum(np.exp(lp) * lp))) if lp.size else float("nan")


def se_discrete(cluster_ids: Sequence[int]) -> float:
    """Entropy of the empirical cluster-size distribution, -sum_j (n_j/M) log(n_j/M)."""
    ids = np.asarray(cluster_ids, dtype=np.int64)
    if ids.size == 0:
        return float("nan")
    _, counts = np.unique(ids, return_counts=True)
    p = counts / counts.sum()
    return float(max(0.0, -np.sum(p * np.log(p))))


def semantic_entropies(logliks: Sequence[float], cluster_ids: Sequence[int]) -> dict[str, float]:
    """Every estimator at once: ``{"eq1": ..., "plogp": ..., "discrete": ..., "n_clusters": ...}``."""
    lp = cluster_log_probs(logliks, cluster_ids)
    return {
        "eq1": se_eq1(lp),
        "plogp": se_plogp(lp),
        "discrete": se_discrete(cluster_ids),
        "n_clusters": int(lp.size),
    }
