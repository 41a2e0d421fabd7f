"""What the bootstrap intervals add to an evaluation, measured against a simple loop in the same run.

    .venv/bin/python benchmarks/bench_bootstrap.py                  # 2,000 StereoSet clusters, 1,000 resamples
    .venv/bin/python benchmarks/bench_bootstrap.py --items 5000 --resamples 2000

On synthetic per-item scores (StereoSet-like: 2,000 clusters in 40 target terms; CrowS-like: 2,000 pairs):

* ``aggregate``: ``stereoset.aggregate`` and ``crows.aggregate`` (point metrics + intervals) against the same
  aggregation without intervals, so the difference is what the intervals add to an evaluation;
* ``paired``: one paired comparison of two models (every StereoSet metric and |SS-50|);
* ``loop``: the StereoSet intervals computed the simple way, one resample at a time in Python (the same
  stratified draws), for the ratio.

Target: the intervals add under 1 s for 1,000 resamples over 2,000 items. The vectorised and loop intervals
must be equal (the script exits 1 otherwise).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def synthetic(n: int, seed: int) -> tuple[list[dict], list[dict]]:
    rng = np.random.default_rng(seed)
    ss = [{"id": f"c{i}", "target": f"t{i % 40}", "bias_type": "gender", "score_stereotype": float(a),
           "score_anti_stereotype": float(b), "score_unrelated": float(c)}
          for i, (a, b, c) in enumerate(rng.random((n, 3)))]
    cp = [{"id": f"p{i}", "bias_type": "gender", "direction": "stereo" if i % 4 else "antistereo",
           "score_more": float(a), "score_less": float(b)} for i, (a, b) in enumerate(rng.random((n, 2)))]
    return ss, cp


def loop_intervals(items, resamples: int, seed: int, level: float) -> dict[str, tuple[float, float]]:
    """SS / LMS / ICAT intervals, one resample at a time: per term, the mean of the drawn clusters' decisions."""
    from context_cda.evaluate.stats import draws

    idx = draws(items.groups, resamples, seed)
    groups = items.groups
    ss_v, lms_v = items.columns["ss"], items.columns["lms"]
    terms = sorted(set(groups.tolist()))
    per_pos = [groups[i] for i in idx[0]]  # the group of each position (the same in every resample)
    out: dict[str, list[float]] = {"ss": [], "lms": [], "icat": []}
    for row in idx:
        sums: dict[str, list[float]] = {t: [0.0, 0.0, 0.0] for t in terms}
        for pos, i in enumerate(row):
            acc = sums[per_pos[pos]]
            acc[0] += ss_v[i]
            acc[1] += lms_v[i]
            acc[2] += 1
        ss = 100 * sum(a / c for a, _, c in sums.values()) / len(terms)
        lms = 100 * sum(b / c for _, b, c in sums.values()) / len(terms)
        out["ss"].append(ss)
        out["lms"].append(lms)
        out["icat"].append(lms * min(ss, 100 - ss) / 50)
    q = [(1 - level) / 2, (1 + level) / 2]
    return {k: tuple(float(x) for x in np.quantile(v, q)) for k, v in out.items()}


def timed(fn, repeat: int = 3) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--resamples", type=int, default=1000)
    args = ap.parse_args()

    from context_cda.evaluate import crows, stereoset
    from context_cda.evaluate.stats import Settings, bootstrap, paired

    st = Settings(resamples=args.resamples)
    ss_rows, cp_rows = synthetic(args.items, 0)
    ss_rows_b, _ = synthetic(args.items, 1)
    t_plain, _ = timed(lambda: (stereoset._term_scores(ss_rows), crows._scores(cp_rows)))
    t_agg, (agg_ss, _) = timed(lambda: (stereoset.aggregate(ss_rows, st), crows.aggregate(cp_rows, st)))
    a, b = stereoset.item_scores(ss_rows), stereoset.item_scores(ss_rows_b)
    t_pair, _ = timed(lambda: paired(a, b, stereoset.metrics, st, stereoset.IDEALS))
    t_vec, vec = timed(lambda: bootstrap(a, stereoset.metrics, st))
    t_loop, ref = timed(lambda: loop_intervals(a, st.resamples, st.seed, st.level), repeat=1)
    same = all(abs(vec[k].low - ref[k][0]) < 1e-9 and abs(vec[k].high - ref[k][1]) < 1e-9 for k in ref)
    added = t_agg - t_plain
    print(f"{args.items} items, {args.resamples} resamples (best of 3)")
    print(f"  aggregate without intervals  {t_plain:8.3f} s  (StereoSet + CrowS)")
    print(f"  aggregate with intervals     {t_agg:8.3f} s  -> the intervals add {added:.3f} s "
          f"({'under' if added < 1 else 'OVER'} the 1 s target)")
    print(f"  one paired comparison        {t_pair:8.3f} s  (SS, LMS, ICAT, |SS-50|)")
    print(f"  StereoSet intervals: vectorised {t_vec:.3f} s vs loop {t_loop:.3f} s -> {t_loop / t_vec:.1f}x; "
          f"equal: {same}")
    print(f"  SS {agg_ss['overall']['ss']:.2f} {agg_ss['overall']['ci']['ss']}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
