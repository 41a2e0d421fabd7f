"""Greedy clustering by bidirectional entailment (the reference algorithm of Kuhn et al. / Farquhar et al.).

Samples are visited in order; each sample joins the first existing cluster whose *first member* it is equivalent
to, otherwise it founds a new cluster. The result depends only on the order of the samples and the equivalence
decisions, so it is deterministic for a deterministic judge. Equivalence need not be transitive: with A~B, B~C
and not A~C, A and B share cluster 0 and C founds cluster 1 (C is compared with A, the first member, only).

Two drivers compute the same ids:

* :func:`greedy_cluster`: one item, one decision at a time, stopping at the first match (fewest decisions);
* :func:`greedy_cluster_many`: many items in lock-step; at step i every item's sample i is compared with all of
  its current cluster founders in *one* batched call, then joins the first founder it matched.
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
