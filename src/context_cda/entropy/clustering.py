"""Clustering by bidirectional entailment: two algorithms, chosen by ``entropy.clustering``.

``greedy`` (the default): samples are visited in order; each sample joins the first existing cluster whose *first
member* it is equivalent to, otherwise it founds a new cluster. Every sample is compared only with founders
before it. Equivalence need not be transitive: with A~B, B~C and not A~C, A and B share cluster 0 and C founds
cluster 1 (C is compared with A, the first member, only). This is the algorithm of Kuhn et al. (2023) as
described in the paper, with the fewest judge decisions.

``semantic-uncertainty``: the loop of jlko/semantic_uncertainty's ``get_semantic_ids`` (Farquhar et al., 2024),
exactly: samples are visited in order; a sample without an id founds a new cluster and then claims *every later*
sample it is equivalent to, including samples an earlier founder already claimed (the later founder takes them
back). With A~C, B~C and not A~B, the default gives [0, 1, 0] (C joins A, the first founder it matches) and this
one [0, 1, 1] (A claims C, then B founds cluster 1 and takes C back). Both are deterministic for a deterministic
judge and agree whenever equivalence is transitive; this one asks the judge more often (each founder against
every later sample).

Each algorithm has two drivers that compute the same ids: one item and one decision at a time
(:func:`greedy_cluster`, :func:`su_cluster`), and many items in lock-step, one batched judge call per step
(:func:`greedy_cluster_many`, :func:`su_cluster_many`); :func:`cluster_ids` picks by name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

# (item index, founder sample index, sample index)
Query = tuple[int, int, int]


def greedy_cluster(n: int, equivalent: Callable[[int, int], bool]) -> list[int]:
    """Cluster ids (0, 1, ... in order of first appearance) for samples ``0..n-1``.

    ``equivalent(founder, j)`` decides whether sample ``j`` means the same as sample ``founder``.
    """
    ids: list[int] = []
    founders: list[int] = []
    for j in range(n):
        for cid, f in enumerate(founders):
            if equivalent(f, j):
                ids.append(cid)
                break
        else:
            ids.append(len(founders))
            founders.append(j)
    return ids


def greedy_cluster_many(
    sizes: Sequence[int], equivalent_batch: Callable[[list[Query]], list[bool]]
) -> list[list[int]]:
    """Cluster ids for several items at once; ``sizes[k]`` is item k's number of samples.

    ``equivalent_batch(queries)`` answers a list of ``(item, founder, sample)`` queries in one call (a judge can
    batch them on an accelerator). Returns the same ids as :func:`greedy_cluster` per item.
    """
    ids: list[list[int]] = [[0] if n > 0 else [] for n in sizes]
    founders: list[list[int]] = [[0] if n > 0 else [] for n in sizes]
    for j in range(1, max(sizes, default=0)):
        queries: list[Query] = []
        for k, n in enumerate(sizes):
            if j < n:
                queries.extend((k, f, j) for f in founders[k])
        answers = equivalent_batch(queries) if queries else []
        if len(answers) != len(queries):
            raise ValueError(f"equivalent_batch returned {len(answers)} answers for {len(queries)} queries")
        matched: dict[int, int] = {}
        for (k, f, _), ok in zip(queries, answers, strict=True):
            if ok and k not in matched:  # founders are listed in cluster order: the first match wins
                matched[k] = founders[k].index(f)
        for k, n in enumerate(sizes):
            if j >= n:
                continue
            if k in matched:
                ids[k].append(matched[k])
            else:
                ids[k].append(len(founders[k]))
                founders[k].append(j)
    return ids


def su_cluster(n: int, equivalent: Callable[[int, int], bool]) -> list[int]:
    """jlko/semantic_uncertainty's ``get_semantic_ids`` for samples ``0..n-1``: ``equivalent(founder, j)`` as in
    :func:`greedy_cluster`. A founder claims every later sample it is equivalent to, already claimed or not."""
    ids = [-1] * n
    next_id = 0
    for i in range(n):
        if ids[i] != -1:
            continue
        ids[i] = next_id
        for j in range(i + 1, n):
            if equivalent(i, j):
                ids[j] = next_id
        next_id += 1
    return ids


def su_cluster_many(
    sizes: Sequence[int], equivalent_batch: Callable[[list[Query]], list[bool]]
) -> list[list[int]]:
    """:func:`su_cluster` for several items in lock-step: at step i, every item whose sample i has no id yet founds
    a cluster and is compared with all its later samples in one batched call (same ids as :func:`su_cluster`)."""
    ids: list[list[int]] = [[-1] * n for n in sizes]
    next_id = [0] * len(sizes)
    for i in range(max(sizes, default=0)):
        founders = [k for k, n in enumerate(sizes) if i < n and ids[k][i] == -1]
        queries: list[Query] = [(k, i, j) for k in founders for j in range(i + 1, sizes[k])]
        answers = equivalent_batch(queries) if queries else []
        if len(answers) != len(queries):
            raise ValueError(f"equivalent_batch returned {len(answers)} answers for {len(queries)} queries")
        for k in founders:
            ids[k][i] = next_id[k]
        for (k, _, j), ok in zip(queries, answers, strict=True):
            if ok:
                ids[k][j] = next_id[k]
        for k in founders:
            next_id[k] += 1
    return ids


#: entropy.clustering -> (one item at a time, many items in lock-step)
ALGORITHMS = {"greedy": (greedy_cluster, greedy_cluster_many), "semantic-uncertainty": (su_cluster, su_cluster_many)}


def cluster_ids(method: str) -> tuple[Callable[..., list[int]], Callable[..., list[list[int]]]]:
    """The two drivers of a clustering algorithm by its ``entropy.clustering`` name."""
    try:
        return ALGORITHMS[method]
    except KeyError:
        from ..errors import ConfigError

        raise ConfigError(f"entropy.clustering: unknown algorithm {method!r}; use {' or '.join(ALGORITHMS)}.") from None
