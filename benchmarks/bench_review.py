"""Review speed and the labelled catalogue's figures, measured in the same run.

    .venv/bin/python benchmarks/bench_review.py                   # 10,000 outputs, rules only, one core
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_review.py --judge   # + the embedding judge, batched

* speed: ``review`` (every check but the meaning judge) on 10,000 distinct outputs built from the catalogue
  (each row made unique by a number in input and output, so no per-input cache helps), against the acceptance
  rule it replaced: ``clean`` + ``check`` of commit 62883cb, loaded from git history (needs a clone with
  history). Target: under 5 s on one core.
* ``--judge``: the same outputs' first 1,000 with the embedding judge (all-MiniLM-L6-v2), batched
  (``review_many``) against one ``review`` call per output;
* the catalogue (tests/fixtures/review/catalogue.jsonl): good outputs kept and bad outputs rejected, rules only
  and (``--judge``) with the embedding judge at ``augment.review.meaning_threshold``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CATALOGUE = ROOT / "tests" / "fixtures" / "review" / "catalogue.jsonl"
REFERENCE_COMMIT = "62883cb"


def reference_check() -> types.ModuleType:
    """The pre-review ``postprocess`` module (clean + check) from git history."""
    src = subprocess.run(["git", "-C", str(ROOT), "show", f"{REFERENCE_COMMIT}:src/context_cda/augment/postprocess.py"],
                         capture_output=True, text=True, check=True).stdout
    src = src.replace("from .base import SPECIAL_STOP_TOKENS", "from context_cda.generation.base import "
                      "SPECIAL_STOP_TOKENS")
    mod = types.ModuleType("postprocess_62883cb")
    sys.modules[mod.__name__] = mod  # dataclasses look their module up
    exec(compile(src, "postprocess_62883cb.py", "exec"), mod.__dict__)  # noqa: S102 - our own file, from git
    return mod


def catalogue() -> list[dict]:
    return [json.loads(line) for line in CATALOGUE.read_text(encoding="utf-8").splitlines() if line.strip()]


def workload(n: int) -> list[dict]:
    """``n`` distinct rows: catalogue rows cycled, each input and output carrying the row's number."""
    rows = catalogue()
    out = []
    for i in range(n):
        r = dict(rows[i % len(rows)])
        tag = f" (case {i})"
        r["counterfactual"] = r["counterfactual"].rstrip(".") + tag + "."
        r["output"] = r["output"].replace(".", tag + ".", 1) if "." in r["output"] else r["output"] + tag
        out.append(r)
    return out


def figures(rows: list[dict], verdicts: list) -> dict:
    good = [v for r, v in zip(rows, verdicts, strict=True) if r["label"] == "good"]
    bad = [v for r, v in zip(rows, verdicts, strict=True) if r["label"] == "bad"]
    return {"good_kept": sum(v.accepted for v in good), "good": len(good),
            "bad_rejected": sum(not v.accepted for v in bad), "bad": len(bad)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--judge", action="store_true", help="also the embedding judge (loads all-MiniLM-L6-v2)")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
    from context_cda.augment import ReviewSettings, review, review_many
    from context_cda.augment.checks.words import parse_swaps
    from context_cda.augment.stage import load_gender_lexicon
    from context_cda.config import Config

    cfg = Config()
    lex = load_gender_lexicon(cfg)
    settings = ReviewSettings.from_config(cfg.augment)
    old = reference_check()
    rows = workload(args.n)
    review(None, "warm up.", "warm up the model.", lexicon=lex, settings=settings)  # loads the language model

    t = time.perf_counter()
    new = [review(r["original"], r["counterfactual"], r["output"], lexicon=lex, settings=settings,
                  swaps=r["swapped_terms"]) for r in rows]
    t_new = time.perf_counter() - t
    t = time.perf_counter()
    ref = [old.check(old.clean(r["output"]), r["counterfactual"], parse_swaps(r["swapped_terms"]), lex)
           for r in rows]
    t_old = time.perf_counter() - t
    result = {"outputs": args.n, "review_s": round(t_new, 3), "check_62883cb_s": round(t_old, 3),
              "review_us_per_output": round(1e6 * t_new / args.n, 1),
              "slowdown_vs_check": round(t_new / t_old, 2), "under_5s": t_new < 5.0,
              "rejected_review": sum(not v.accepted for v in new), "rejected_check": sum(bool(x) for x in ref)}
    cat = catalogue()
    result["catalogue_rules"] = figures(cat, [review(r["original"], r["counterfactual"], r["output"], lexicon=lex,
                                                     settings=settings, swaps=r["swapped_terms"]) for r in cat])
    result["catalogue_check_62883cb"] = {
        "good_kept": sum(not old.check(old.clean(r["output"]), r["counterfactual"], parse_swaps(r["swapped_terms"]),
                                       lex) for r in cat if r["label"] == "good"),
        "bad_rejected": sum(bool(old.check(old.clean(r["output"]), r["counterfactual"],
                                           parse_swaps(r["swapped_terms"]), lex)) for r in cat if r["label"] == "bad")}
    if args.judge:
        from dataclasses import replace

        from context_cda.generation.judges import EmbeddingJudge

        judge = EmbeddingJudge(device="cpu")
        js = replace(settings, meaning="embedding")
        sub = rows[:1000]
        t = time.perf_counter()
        review_many([r["original"] for r in sub], [r["counterfactual"] for r in sub], [r["output"] for r in sub],
                    lexicon=lex, judge=judge, settings=js, swaps=[r["swapped_terms"] for r in sub])
        t_batched = time.perf_counter() - t
        judge._emb.clear()
        t = time.perf_counter()
        for r in sub:
            review(r["original"], r["counterfactual"], r["output"], lexicon=lex, judge=judge, settings=js,
                   swaps=r["swapped_terms"])
        t_single = time.perf_counter() - t
        result["judge"] = {"outputs": len(sub), "batched_s": round(t_batched, 2), "one_by_one_s": round(t_single, 2),
                           "speedup": round(t_single / t_batched, 2), "threshold": js.meaning_threshold}
        judge._emb.clear()
        result["catalogue_with_embedding_judge"] = figures(cat, review_many(
            [r["original"] for r in cat], [r["counterfactual"] for r in cat], [r["output"] for r in cat],
            lexicon=lex, judge=judge, settings=js, swaps=[r["swapped_terms"] for r in cat]))
    print(json.dumps(result, indent=2))
    return 0 if result["under_5s"] else 1


if __name__ == "__main__":
    sys.exit(main())
