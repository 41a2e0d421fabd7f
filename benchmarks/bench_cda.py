"""Throughput of the CDA swap against the naive research-code reference, measured side by side.

    python benchmarks/bench_cda.py [--n 100000] [--corpus PATH]

Sentences: the gendered sentences of WikiText-2 test (the dataset wikitext-2-test by name, via the ingest stage), cycled to
--n; without the file, template sentences. The reference is what research scripts do: split on spaces and look
each token up in a dict (no case, punctuation, possessive or her/his handling, so it is *less* correct). Both
run single-threaded in this process. Prints sentences/s for each and the ratio.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from context_cda.cda.lexicon import PRONOUNS, load_lexicon
from context_cda.cda.stage import counterfactual_rows, make_swapper, run_cda
from context_cda.config import load_config
from context_cda.io import write_table

ROOT = Path(__file__).resolve().parents[1]

def default_corpus() -> Path:
    """WikiText-2 test by dataset name (the mirror in $CCDA_DATA_DIR or the data cache; no download), else none."""
    from context_cda.data import datasets as D

    ds = D.get("wikitext-2-test")
    root = D.find(ds)
    return ds.location(root) if root is not None else Path("-")


def load_sentences(corpus: Path, n: int) -> list[str]:
    if corpus.is_file():
        from context_cda.ingest.corpus import run_ingest

        with tempfile.TemporaryDirectory() as d:
            cfg = load_config(None, {"run": {"run_dir": d}, "ingest": {"corpus": "path", "path": str(corpus)}},
                              params_file=ROOT / "params.yaml")
            run_ingest(cfg)
            base = pd.read_parquet(Path(d) / "ingest" / "sentences.parquet").text.tolist()
    else:
        base = [f"The {w} said that {p} would visit {q} sister in the city on day {i}."
                for i, (w, p, q) in enumerate([("man", "he", "his"), ("woman", "she", "her")] * 500)]
    return [base[i % len(base)] for i in range(n)]


def naive_reference(sentences: list[str], table: dict[str, str]) -> list[str]:
    out = []
    for s in sentences:
        out.append(" ".join(table.get(tok, tok) for tok in s.split(" ")))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--corpus", type=Path, default=None, help="default: the wikitext-2-test dataset, when found")
    ap.add_argument("--repeat", type=int, default=3, help="best of N timings")
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    sentences = load_sentences(args.corpus or default_corpus(), args.n)
    ids = [str(i) for i in range(len(sentences))]
    cfg = load_config(None, {}, params_file=ROOT / "params.yaml")
    swapper = make_swapper(cfg)
    lex = load_lexicon(cfg.lexicon)
    table = {**lex.m2f, **lex.f2m, **{w: next(iter(r.values())) for w, r in PRONOUNS.items()}}

    def best(fn) -> float:
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return min(times)

    t_ref = best(lambda: naive_reference(sentences, table))
    t_ours = best(lambda: counterfactual_rows(sentences, ids, cfg, swapper))
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "sentences.parquet"
        write_table(pd.DataFrame({"id": ids, "text": sentences}), src)
        run_cfg = load_config(None, {"run": {"run_dir": d}}, params_file=ROOT / "params.yaml")
        t_stage = best(lambda: run_cda(run_cfg, {"sentences": src}))

    n = len(sentences)
    print(f"sentences: {n} ({'WikiText-2 gendered' if args.corpus.is_file() else 'templates'}), 1 thread")
    print(f"naive reference (split + dict):       {n / t_ref:12,.0f} sentences/s")
    print(f"context_cda swap (library function):  {n / t_ours:12,.0f} sentences/s")
    print(f"ccda cda stage (read+swap+write):     {n / t_stage:12,.0f} sentences/s")
    print(f"ratio ours/reference: {t_ref / t_ours:.2f}x   stage/reference: {t_ref / t_stage:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
