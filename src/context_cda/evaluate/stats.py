"""Seeded bootstrap intervals and paired bootstrap differences (pure numpy, vectorised).

A benchmark's metrics are functions of per-item scores (:class:`Items`): StereoSet's SS is the mean over target
terms of each term's share of clusters preferring the stereotype, CrowS-Pairs' CS the share of pairs preferring
``sent_more``, an accuracy the share of correct items. The bootstrap resamples items *within their group* (the
stratum: a StereoSet target term, a GLUE task; one group = plain resampling over items), so each resample keeps
the group sizes and a macro-average over groups stays a macro-average. Groups of one item are one stratum
together (each of their positions draws from all of them): alone they would never vary. A metric is written as a function of
per-group ratios (:class:`Means`): ``m("ss")`` is the macro-average of column ``ss``, ``m("win", "stereo")`` the
macro-average of per-group ratios sum(win)/sum(stereo), ``m.group("correct", name="rte")`` one group's value.

* :func:`bootstrap` -> ``{metric: Interval}``: the point estimate and the percentile interval at ``level``.
* :func:`paired` -> ``{metric: Difference}``: two models scored on the same items (aligned by id) are resampled
  with the *same* draws, so the interval of ``metric(a) - metric(b)`` reflects only how the items were sampled,
  not which items each model saw. ``ideals`` adds distance metrics ``<metric>_dist = |metric - ideal|`` (SS, CS:
  the distance to 50), compared the same way. The two-sided p-value is the bootstrap's achieved significance
  level: ``min(1, 2 * min(#(d* <= 0) + 1, #(d* >= 0) + 1) / (B + 1))`` over the B resampled differences d*; a
  difference is *significant* at ``level`` when its interval excludes 0 (identical models: interval [0, 0],
  p = 1, not significant).

The draws depend only on the seed, the number of resamples and the group of each item (in order), so two calls
with the same settings on the same items draw the same resamples. Percentile intervals of a non-smooth metric
(ICAT's min(SS, 100 - SS) near 50, a distance |x - 50| near 0) need not contain the point estimate; the
point estimate is always the metric on the original items. Fewer than ``min_items`` items: the interval is
computed and flagged ``too_small`` (the promotion gate refuses to decide on it).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: largest number of drawn indices held at once (resamples are drawn in blocks of this many items)
BLOCK = 4_000_000


@dataclass(frozen=True)
class Settings:
    level: float = 0.95
    resamples: int = 1000
    seed: int = 0
    min_items: int = 20

    @classmethod
    def of(cls, cfg: Any = None) -> Settings:
        """From an ``evaluate.bootstrap`` config section (or anything with those attributes); None: defaults."""
        if cfg is None:
            return cls()
        if isinstance(cfg, Settings):
            return cfg
        return cls(level=float(cfg.level), resamples=int(cfg.resamples), seed=int(cfg.seed),
                   min_items=int(cfg.min_items))

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level, "resamples": self.resamples, "seed": self.seed, "min_items": self.min_items}


@dataclass(frozen=True)
class Items:
    """Per-item scores of one benchmark: ``ids`` (aligning two models), ``groups`` (the stratum of each item) and
    named numeric ``columns``, each one value per item. ``runs``: for several runs of one recipe (training seeds,
    :func:`pooled`), each run's columns on the same items; a metric is then the mean over runs of each run's
    metric, on the same resample of items."""

    ids: np.ndarray
    groups: np.ndarray
    columns: Mapping[str, np.ndarray]
    runs: tuple[Mapping[str, np.ndarray], ...] = ()

    @classmethod
    def build(cls, ids: Iterable[Any], groups: Iterable[Any] | None, **columns: Iterable[float]) -> Items:
        id_arr = np.asarray([str(i) for i in ids], dtype=object)
        grp = np.asarray([str(g) for g in groups], dtype=object) if groups is not None else np.full(
            len(id_arr), "all", dtype=object)
        cols = {k: np.asarray(list(v), dtype=float) for k, v in columns.items()}
        for k, v in cols.items():
            if v.shape != id_arr.shape:
                raise ValueError(f"column {k}: {v.shape[0]} values for {id_arr.shape[0]} items")
        if grp.shape != id_arr.shape:
            raise ValueError(f"groups: {grp.shape[0]} values for {id_arr.shape[0]} items")
        return cls(id_arr, grp, cols)

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def subset(self, index: np.ndarray) -> Items:
        return Items(self.ids[index], self.groups[index], {k: v[index] for k, v in self.columns.items()},
                     tuple({k: v[index] for k, v in r.items()} for r in self.runs))

    def each_run(self) -> list[Items]:
        """One :class:`Items` per run (training seed) of pooled items, on the same items; itself for one run."""
        return [Items(self.ids, self.groups, r) for r in self.runs] if self.runs else [self]


@dataclass(frozen=True)
class Interval:
    point: float
    low: float
    high: float
    n: int
    level: float
    too_small: bool = False

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    def text(self, digits: int = 2) -> str:
        """``61.20 [55.10, 67.30]``."""
        return f"{_f(self.point, digits)} [{_f(self.low, digits)}, {_f(self.high, digits)}]"


@dataclass(frozen=True)
class Difference:
    """``metric(a) - metric(b)`` on the items both were scored on."""

    point: float
    low: float
    high: float
    p: float
    n: int
    level: float
    too_small: bool = False

    @property
    def significant(self) -> bool:
        return bool(self.low > 0 or self.high < 0)

    def text(self, digits: int = 2) -> str:
        """``-3.40 [-6.10, -0.80], p=0.012``."""
        p = _p(self.p)
        return (f"{_f(self.point, digits, sign=True)} [{_f(self.low, digits, sign=True)}, "
                f"{_f(self.high, digits, sign=True)}], p{'' if p[0] == '<' else '='}{p}")

    def to_dict(self) -> dict[str, Any]:
        return {"diff": _j(self.point), "ci": [_j(self.low), _j(self.high)], "p": _j(self.p), "n": self.n,
                "level": self.level, "significant": self.significant, "too_small": self.too_small}


def _f(v: float, digits: int, sign: bool = False) -> str:
    if v != v:
        return "nan"
    return f"{v:+.{digits}f}" if sign else f"{v:.{digits}f}"


def _p(p: float) -> str:
    return "nan" if p != p else f"{p:.3f}" if p >= 0.001 else "<0.001"


def _j(v: float) -> float | None:
    """JSON-friendly: NaN -> None."""
    return None if v != v else float(v)


# --------------------------------------------------------------------------------------------------- draws


@dataclass(frozen=True)
class _Layout:
    """Items ordered by group (stable), so that each group's positions are contiguous."""

    order: np.ndarray  # position -> original item index
    starts: np.ndarray  # first position of each group
    sizes: np.ndarray
    names: list[str]  # group names, in position order
    pos_start: np.ndarray  # per position: its group's first position
    pos_size: np.ndarray


def _layout(groups: np.ndarray) -> _Layout:
    """Positions ordered by group, groups of one item last; those are drawn together from the pool of all
    one-item groups (a group of one resampled alone would never vary, so a difference on it would have a
    zero-width interval: one item of difference would look certain)."""
    names, codes = np.unique(groups.astype(str), return_inverse=True)
    codes = codes.reshape(-1)
    counts = np.bincount(codes, minlength=len(names))
    group_order = np.lexsort((np.arange(len(names)), counts == 1))  # several-item groups first, then by name
    rank = np.empty_like(group_order)
    rank[group_order] = np.arange(len(group_order))
    codes = rank[codes]
    names, sizes = names[group_order], counts[group_order]
    order = np.argsort(codes, kind="stable")
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if len(names) else np.zeros(0, np.int64)
    sorted_codes = codes[order]
    pos_start, pos_size = starts[sorted_codes], sizes[sorted_codes].copy()
    single = pos_size == 1
    if single.sum() > 1:  # they are contiguous at the end
        pos_start[single], pos_size[single] = int(np.argmax(single)), int(single.sum())
    return _Layout(order, starts, sizes, [str(n) for n in names], pos_start, pos_size)


#: the last drawn resamples that fit in one block, by layout, count and seed: a decision resamples the same items
#: many times (each model's interval, each paired statistic, each seed), and the draws depend only on those
_DRAWN: dict[tuple[bytes, int, int], np.ndarray] = {}
DRAWN_KEPT = 8


def _blocks(lay: _Layout, resamples: int, seed: int) -> Iterator[np.ndarray]:
    """The resamples in blocks of at most :data:`BLOCK` indices, all from one generator seeded with ``seed``
    (the same layout, count and seed give the same draws: those that fit in one block are kept, read-only, for the
    next call)."""
    n = lay.order.shape[0]
    per = max(1, BLOCK // max(n, 1))
    key = (hashlib.blake2b(b"".join(a.astype(np.int64).tobytes() for a in (lay.order, lay.pos_start, lay.pos_size)),
                           digest_size=16).digest(), resamples, seed)
    if n and resamples <= per and key in _DRAWN:
        yield _DRAWN[key]
        return
    rng = np.random.default_rng(seed)
    for start in range(0, resamples, per):
        size = min(per, resamples - start)
        if n == 0:
            yield np.zeros((size, 0), dtype=np.int64)
            continue
        block = lay.order[lay.pos_start + rng.integers(0, lay.pos_size, size=(size, n))]
        if resamples <= per:  # one block: keep it
            block.setflags(write=False)
            _DRAWN[key] = block
            while len(_DRAWN) > DRAWN_KEPT:
                _DRAWN.pop(next(iter(_DRAWN)))
        yield block


def draws(groups: Sequence[Any] | np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """``(resamples, n)`` item indices, the resamples :func:`bootstrap` and :func:`paired` use: row b is one
    resample, each group's positions filled with draws (with replacement) from that group's items; positions are
    ordered by group (:func:`group_layout`)."""
    lay = _layout(np.asarray(groups, dtype=object))
    return np.concatenate(list(_blocks(lay, resamples, seed)), axis=0)


def group_layout(groups: Sequence[Any] | np.ndarray) -> tuple[list[str], np.ndarray]:
    """(group names, start position of each) of the positions :func:`draws` fills."""
    lay = _layout(np.asarray(groups, dtype=object))
    return lay.names, lay.starts


# --------------------------------------------------------------------------------------------------- metrics


class Means:
    """Per-group ratios of columns over one set of resamples (or the original items), for a metric function.

    ``values[col]`` is ``(B, n)`` (resampled, positions ordered by group) and ``starts`` the groups' first
    positions; ratios of groups whose denominator is 0 are NaN and left out of the macro-average."""

    def __init__(self, values: Callable[[str], np.ndarray], starts: np.ndarray, sizes: np.ndarray,
                 names: list[str]) -> None:
        self._values, self._starts, self._sizes, self.names = values, starts, sizes, names
        self._cache: dict[tuple[str, str | None], np.ndarray] = {}

    def groups(self, num: str, den: str | None = None) -> np.ndarray:
        """``(B, G)``: sum(num) / sum(den) per group (den None: the group's size)."""
        key = (num, den)
        if key not in self._cache and self._starts.size == 0:  # no items
            self._cache[key] = np.full((self._values(num).shape[0], 0), np.nan)
        if key not in self._cache:
            top = np.add.reduceat(self._values(num), self._starts, axis=1)
            bottom = (np.add.reduceat(self._values(den), self._starts, axis=1) if den is not None
                      else np.broadcast_to(self._sizes.astype(float), top.shape))
            with np.errstate(invalid="ignore", divide="ignore"):
                self._cache[key] = np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1.0), np.nan)
        return self._cache[key]

    def __call__(self, num: str, den: str | None = None) -> np.ndarray:
        """``(B,)``: the macro-average over groups of :meth:`groups`."""
        g = self.groups(num, den)
        ok = ~np.isnan(g)
        counts = ok.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(counts > 0, np.where(ok, g, 0.0).sum(axis=1) / np.maximum(counts, 1), np.nan)

    def group(self, num: str, den: str | None = None, name: str = "all") -> np.ndarray:
        """``(B,)``: one group's ratio (NaN when the group has no items)."""
        if name not in self.names:
            return np.full(self.groups(num, den).shape[0], np.nan)
        return self.groups(num, den)[:, self.names.index(name)]


#: a benchmark's metrics from its per-group ratios: {metric: (B,) values}
Metrics = Callable[[Means], Mapping[str, np.ndarray]]


#: how the metrics of several runs (pooled seeds) are combined: the mean (the recipe's average run), or the
#: smallest / largest run's value (its worst seed on a one-sided check)
RUNS = {"mean": np.mean, "min": np.min, "max": np.max}


def _evaluate(metric: Metrics, items: Items, lay: _Layout, index: np.ndarray | None,
              runs: str = "mean") -> dict[str, np.ndarray]:
    """The metrics on resamples ``index`` (``(B, n)`` item indices) or, with None, on the original items; for
    several runs, the mean over runs of each run's metrics (so |SS - 50| of two seeds at 30 and 70 is 20, not 0),
    or (``runs`` min / max) the smallest / largest run's value on each resample."""
    idx = lay.order[None, :] if index is None else index
    per_run = []
    for cols in items.runs or (items.columns,):
        m = Means(lambda c, cols=cols: cols[c][idx], lay.starts, lay.sizes, lay.names)
        per_run.append({k: np.asarray(v, dtype=float) for k, v in metric(m).items()})
    if len(per_run) == 1:
        return per_run[0]
    return {k: RUNS[runs](np.stack([r[k] for r in per_run]), axis=0) for k in per_run[0]}


def _resampled(metric: Metrics, parts: Sequence[Items], lay: _Layout, settings: Settings,
               runs: str = "mean") -> list[dict[str, np.ndarray]]:
    """The metrics of every part (items aligned position by position) over the same ``settings.resamples`` draws."""
    out: list[dict[str, list[np.ndarray]]] = [{} for _ in parts]
    for index in _blocks(lay, settings.resamples, settings.seed):
        for acc, items in zip(out, parts, strict=True):
            for name, v in _evaluate(metric, items, lay, index, runs).items():
                acc.setdefault(name, []).append(v)
    return [{name: np.concatenate(vs) for name, vs in acc.items()} for acc in out]


def _percentiles(values: np.ndarray, level: float) -> tuple[float, float]:
    finite = values[~np.isnan(values)]
    if finite.size == 0:
        return math.nan, math.nan
    lo, hi = np.quantile(finite, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return float(lo), float(hi)


def bootstrap(items: Items, metric: Metrics, settings: Settings | None = None,
              runs: str = "mean") -> dict[str, Interval]:
    """Point estimate and percentile interval of every metric ``metric`` returns (``runs``: how several runs
    are combined, see :data:`RUNS`)."""
    st = settings or Settings()
    lay = _layout(items.groups)
    point = _evaluate(metric, items, lay, None, runs)
    (boot,) = _resampled(metric, [items], lay, st, runs)
    small = len(items) < st.min_items
    out = {}
    for k, v in point.items():
        lo, hi = _percentiles(boot[k], st.level) if len(items) else (math.nan, math.nan)
        out[k] = Interval(float(v[0]), lo, hi, len(items), st.level, small)
    return out


def point(items: Items, metric: Metrics, runs: str = "mean") -> dict[str, float]:
    """The metrics on the original items (no resampling)."""
    return {k: float(v[0]) for k, v in _evaluate(metric, items, _layout(items.groups), None, runs).items()}


def with_distances(metric: Metrics, ideals: Mapping[str, float]) -> Metrics:
    """``metric`` plus ``<name>_dist = |name - ideal|`` for each name in ``ideals``."""

    def wrapped(m: Means) -> dict[str, np.ndarray]:
        vals = dict(metric(m))
        for k, ideal in ideals.items():
            if k in vals:
                vals[f"{k}_dist"] = np.abs(vals[k] - ideal)
        return vals

    return wrapped


def align(a: Items, b: Items) -> tuple[Items, Items]:
    """The items both hold, in ``a``'s order (groups from ``a``)."""
    pos_b = {i: k for k, i in enumerate(b.ids.tolist())}
    keep = [k for k, i in enumerate(a.ids.tolist()) if i in pos_b]
    ia = np.asarray(keep, dtype=np.int64)
    ib = np.asarray([pos_b[a.ids[k]] for k in keep], dtype=np.int64)
    sub_b = b.subset(ib)
    return a.subset(ia), Items(sub_b.ids, a.groups[ia], sub_b.columns, sub_b.runs)


def p_value(diffs: np.ndarray) -> float:
    """Two-sided bootstrap p-value of a difference from its resampled values (NaNs left out)."""
    d = diffs[~np.isnan(diffs)]
    if d.size == 0:
        return math.nan
    below = (np.count_nonzero(d <= 0) + 1) / (d.size + 1)
    above = (np.count_nonzero(d >= 0) + 1) / (d.size + 1)
    return float(min(1.0, 2.0 * min(below, above)))


def paired_draws(a: Items, b: Items, metric: Metrics, settings: Settings | None = None, runs: str = "mean"
                 ) -> Draws:
    """Both models' metrics on the items both were scored on (aligned by id, ``a``'s order and groups), on the
    original items and on the same ``settings.resamples`` resamples: the raw material of :func:`paired` and of any
    other paired statistic (a sum, a signed shift). ``runs``: how several runs of ``a`` or ``b`` are combined."""
    st = settings or Settings()
    a2, b2 = align(a, b)
    lay = _layout(a2.groups)
    pa, pb = _evaluate(metric, a2, lay, None, runs), _evaluate(metric, b2, lay, None, runs)
    boot_a, boot_b = _resampled(metric, [a2, b2], lay, st, runs)
    return Draws({k: float(v[0]) for k, v in pa.items()}, {k: float(v[0]) for k, v in pb.items()}, boot_a, boot_b,
                 len(a2), st)


@dataclass(frozen=True)
class Draws:
    """Two models' metrics on the shared items (``a``, ``b``: name -> value) and on the same resamples
    (``boot_a``, ``boot_b``: name -> ``(B,)`` values), ``n`` items shared."""

    a: dict[str, float]
    b: dict[str, float]
    boot_a: dict[str, np.ndarray]
    boot_b: dict[str, np.ndarray]
    n: int
    settings: Settings

    def difference(self, point: float, values: np.ndarray) -> Difference:
        """A :class:`Difference` of any paired statistic: its value on the original items (``point``) and on the
        resamples (``values``), with the percentile interval at ``settings.level`` and the bootstrap p-value."""
        st, n = self.settings, self.n
        lo, hi = _percentiles(values, st.level) if n else (math.nan, math.nan)
        return Difference(float(point), lo, hi, p_value(values) if n else math.nan, n, st.level, n < st.min_items)

    def interval(self, key: str, which: str = "a") -> Interval:
        """One model's own value and percentile interval of ``key`` on the shared items (``which``: a or b)."""
        point, values = (self.a, self.boot_a) if which == "a" else (self.b, self.boot_b)
        lo, hi = _percentiles(values[key], self.settings.level) if self.n else (math.nan, math.nan)
        return Interval(point[key], lo, hi, self.n, self.settings.level, self.n < self.settings.min_items)


def paired(a: Items, b: Items, metric: Metrics, settings: Settings | None = None,
           ideals: Mapping[str, float] | None = None) -> dict[str, Difference]:
    """``metric(a) - metric(b)`` for every metric, on the items both were scored on, with the same resamples for
    both; ``ideals`` adds the distance metrics (see :func:`with_distances`)."""
    fn = with_distances(metric, ideals) if ideals else metric
    dr = paired_draws(a, b, fn, settings)
    return {k: dr.difference(dr.a[k] - dr.b[k], dr.boot_a[k] - dr.boot_b[k]) for k in dr.a}


def percentile_p(values: np.ndarray, margin: float = 0.0) -> float:
    """The p-value of "the statistic is at most ``margin``" that the percentile interval inverts: the smallest
    1 - level at which the two-sided percentile interval of the resampled ``values`` (numpy's linear quantiles, as
    :func:`bootstrap` and :func:`paired` compute them) lies wholly above ``margin``. So ``percentile_p(v, m) <
    alpha`` exactly when the interval at level 1 - alpha has its lower end above m: a decision on this p-value and
    one on the printed interval never disagree. 0 when every resampled value lies above ``margin``."""
    d = np.sort(values[~np.isnan(values)])
    if d.size == 0:
        return math.nan
    j = int(np.searchsorted(d, margin, side="right"))  # resampled values at or below the margin
    if j == 0:
        return 0.0
    if j == d.size or d.size == 1:
        return 1.0
    h = (j - 1) + (margin - d[j - 1]) / (d[j] - d[j - 1])  # the quantile position where the margin is crossed
    return float(min(1.0, 2.0 * h / (d.size - 1)))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (same order as given): ``max_{j <= i} min(1, (k - j + 1) * p_(j))`` over
    the sorted p-values. Rejecting every hypothesis whose adjusted p is below alpha controls the family-wise error
    rate at alpha whatever the dependence between the tests (Holm 1979); one hypothesis: unchanged."""
    k = len(pvalues)
    order = sorted(range(k), key=lambda i: pvalues[i])
    out, running = [1.0] * k, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (k - rank) * float(pvalues[i])))
        out[i] = running
    return out


@dataclass(frozen=True)
class SignFlip:
    """The paired sign-flip (randomization) test of "a and b score the same": ``p`` (two-sided), how many items
    the two models score differently (``discordant``) of ``n``, and ``exact`` (False: a seeded Monte Carlo)."""

    p: float
    discordant: int
    n: int
    exact: bool
    null_sd: float = 0.0  # the spread of sum(e_i * d_i) under random signs: sqrt(sum d_i^2), in column units

    def text(self, unit: str = "items") -> str:
        how = "" if self.exact else ", Monte Carlo"
        p = _p(self.p)
        return f"sign-flip test on {self.discordant} of {self.n} {unit} that differ: p{'' if p[0] == '<' else '='}{p}{how}"


#: largest number of differing items whose 2**k sign patterns are enumerated (beyond: a seeded Monte Carlo)
EXACT_FLIPS = 16
FLIP_DRAWS = 20_000


def sign_flip(a: Items, b: Items, column: str, settings: Settings | None = None) -> SignFlip:
    """Exact paired test of the macro-average of ``column`` (the mean over groups of each group's mean, as
    ``Means(column)``): under "no difference" each item's two scores are exchangeable, so each item's weighted
    difference d_i = (a_i - b_i) / (G * n_group) is as likely positive as negative; p = P(|sum of e_i * d_i| >=
    |sum d_i|) over random signs e_i. With equal weights (one group: CrowS) this is the exact two-sided sign test
    (McNemar's exact test) on the discordant items; up to :data:`EXACT_FLIPS` differing items every sign pattern
    is counted; beyond, :data:`FLIP_DRAWS` seeded draws (``settings.seed``). Pooled runs compare their per-item
    averages. Unlike a bootstrap percentile interval it does not call 4 of 4 items changed one way significant
    (p = 0.125)."""
    st = settings or Settings()
    a2, b2 = align(a, b)
    _, codes, sizes = np.unique(a2.groups.astype(str), return_inverse=True, return_counts=True)
    weights = 1.0 / (len(sizes) * sizes[codes.reshape(-1)]) if len(a2) else np.zeros(0)
    d = (a2.columns[column] - b2.columns[column]) * weights
    d = np.abs(d[np.abs(d) > 1e-12])
    k, n, sd = int(d.size), len(a2), float(np.sqrt(np.sum(d**2)))
    observed = abs(float(((a2.columns[column] - b2.columns[column]) * weights).sum()))
    if k == 0:
        return SignFlip(1.0, 0, n, True, 0.0)
    tol = 1e-9 * float(d.sum())
    if np.allclose(d, d[0]):  # equal weights: the binomial sign test
        t = round(observed / d[0])
        tail = sum(math.comb(k, j) for j in range(k + 1) if abs(2 * j - k) >= t)
        return SignFlip(min(1.0, tail / 2.0**k), k, n, True, sd)
    if k <= EXACT_FLIPS:
        signs = 1 - 2 * ((np.arange(2**k)[:, None] >> np.arange(k)[None, :]) & 1)
        sums = np.abs(signs @ d)
        return SignFlip(float(np.mean(sums >= observed - tol)), k, n, True, sd)
    rng = np.random.default_rng(st.seed)
    sums = np.abs(rng.choice([-1.0, 1.0], size=(FLIP_DRAWS, k)) @ d)
    return SignFlip(float((np.count_nonzero(sums >= observed - tol) + 1) / (FLIP_DRAWS + 1)), k, n, False, sd)


#: the power at which :func:`detectable_shift` says what a benchmark could have shown
POWER = 0.8


def fewest_items(alpha: float) -> int:
    """The fewest changed items that can make the exact two-sided sign test significant at ``alpha``: all of them
    moved one way, p = 2 * 0.5**k < alpha."""
    return max(1, math.floor(math.log2(2.0 / alpha)) + 1)


def detectable_shift(flip: SignFlip, alpha: float, power: float = POWER, scale: float = 100.0,
                     margin: float = 0.0) -> float:
    """The smallest shift of a macro-average of per-item scores (times ``scale``: 100 for SS and CS in percent)
    that the paired sign-flip test at two-sided ``alpha`` detects with probability ``power``, given how many items
    the two models score differently and with what weights (``flip.null_sd``): ``margin + (z_{1-alpha/2} +
    z_power) * scale * null_sd``, the normal approximation of the test whose null spread the discordant share sets
    (for n items of equal weight, k of them discordant: ``scale * sqrt(k) / n``, McNemar's power calculation).
    Never below the shift of the fewest items that can be significant at all (:func:`fewest_items`, each of
    weight 1/n): with no item changed, that is what this n could have shown at best."""
    from statistics import NormalDist

    z = NormalDist().inv_cdf(1.0 - alpha / 2.0) + NormalDist().inv_cdf(power)
    floor = scale * fewest_items(alpha) / max(flip.n, 1)
    return float(margin + max(z * scale * flip.null_sd, floor))


def pooled(parts: Sequence[Items]) -> Items:
    """Several runs of one model recipe (training seeds) scored on the same items: the items all of them hold, in
    the first run's order, each run's columns kept (``runs``; ``columns`` holds their average per item). Every
    metric of the pooled items is the mean over runs of that run's metric, distances to an ideal included, and a
    paired comparison resamples the same items for every run: it compares the recipe's average run."""
    if not parts:
        raise ValueError("pooled: no runs")
    first = parts[0]
    common = set(first.ids.tolist())
    for p in parts[1:]:
        common &= set(p.ids.tolist())
    keep = np.asarray([k for k, i in enumerate(first.ids.tolist()) if i in common], dtype=np.int64)
    base = first.subset(keep)
    runs = []
    for p in parts:
        pos = {i: k for k, i in enumerate(p.ids.tolist())}
        at = np.asarray([pos[i] for i in base.ids.tolist()], dtype=np.int64)
        runs.append({name: p.columns[name][at] for name in first.columns})
    cols = {name: np.mean(np.vstack([r[name] for r in runs]), axis=0) for name in first.columns}
    return Items(base.ids, base.groups, cols, tuple(runs) if len(runs) > 1 else ())


# --------------------------------------------------------------------------------------------------- outputs


@dataclass
class Block:
    """The interval part of a benchmark aggregate's ``overall`` block."""

    intervals: Mapping[str, Interval]
    settings: Settings
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        n = next(iter(self.intervals.values())).n if self.intervals else 0
        out: dict[str, Any] = {
            "ci": {k: [_j(v.low), _j(v.high)] for k, v in self.intervals.items()},
            "ci_level": self.settings.level,
            "ci_resamples": self.settings.resamples,
            "ci_seed": self.settings.seed,
            "too_small": n < self.settings.min_items,
        }
        if out["too_small"]:
            out["too_small_note"] = (f"{n} items < evaluate.bootstrap.min_items={self.settings.min_items}: the "
                                     "intervals are too wide to decide on")
        out.update(self.extra)
        return out


def interval_block(items: Items, metric: Metrics, settings: Settings | None = None) -> dict[str, Any]:
    """``{"ci": {metric: [low, high]}, "ci_level", "ci_resamples", "ci_seed", "too_small"}`` for an aggregate."""
    st = settings or Settings()
    return Block(bootstrap(items, metric, st), st).to_dict()


def mean_std(values: Iterable[float]) -> tuple[float, float, int]:
    """(mean, sample standard deviation (ddof 1; 0 for one value), count) of the finite values."""
    v = np.asarray([x for x in values if x is not None and x == x], dtype=float)
    if v.size == 0:
        return math.nan, math.nan, 0
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else 0.0, int(v.size)
