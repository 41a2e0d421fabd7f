"""The bias-bench section of bench_intrinsic.py: our scorer vs McGill-NLP/bias-bench's own code, side by side.

Both sides score the same model (SmolLM2-135M-Instruct by default), the same StereoSet and CrowS-Pairs gender items
and the same number of torch threads, in bias-bench mode (causal: two-pass sentence scores from bias-bench's
literal start token; Self-Debias: bias-bench's prefix, its fixed read position 13). bias-bench runs in its own
venv (scripts/setup-biasbench.sh) through tests/helpers/biasbench_run.py (task ``timed``: its runner end to end,
the model already loaded); ours in this process. Runs are interleaved (ours, then theirs, per benchmark and
repeat) and the medians compared, so a change in the machine's load hits both. Every item's score is compared:
decisions that flip, and the largest relative difference. Where bias-bench has no implementation (WinoGender,
WinoBias) the reference is our own one-at-a-time path (``batch_size=1``, the harness's loop).

The achieved rate: the floating-point operations of our run (counted once, untimed, by torch's FlopCounterMode:
matrix products, which are nearly all of it) over its median time, as a fraction of the fp32 matrix-product rate
measured here on the model's own layer shape (rows x hidden x intermediate) with the same threads: the median of
measurements before and after each benchmark (the same load as the runs), and its best (the machine's rate when
the product had the cores to itself).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BB_PY = Path(os.environ.get("CCDA_BIASBENCH_PYTHON", ROOT / ".venv-biasbench" / "bin" / "python"))
PREFIX = "The following text discriminates against people because of their gender: "


def matmul_rate(model: Any, rows: int = 2048, repeats: int = 5) -> float:
    """fp32 GFLOP/s of ``rows x hidden @ hidden x intermediate`` (the model's widest layer product), best of a few."""
    from context_cda.tools.matmul import measured_matmul_rate

    cfg = model.config
    hidden = getattr(cfg, "hidden_size", None) or cfg.n_embd
    inner = getattr(cfg, "intermediate_size", None) or 4 * hidden
    return measured_matmul_rate(rows, (hidden, inner), repeats) / 1e9


def count_work(fn, scorer: Any) -> tuple[float, dict | None]:
    """The matrix-product FLOPs of ``fn()`` counted by torch's FlopCounterMode (with one torch thread: the counter
    is a dispatch mode of the calling thread only, so passes run side by side in threads of their own,
    ``scoring.base.side_by_side``, would not be counted; with one thread the same passes run in this thread), and
    the scorer's ledger of that run (:mod:`context_cda.scoring.flops`: the FLOPs the shared-prefix plan needs and
    those the passes did, per part); None without a scorer (Self-Debias keeps no plan)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from context_cda.scoring.flops import Costs

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    if scorer is not None:
        del scorer.ledger
    try:
        with FlopCounterMode(display=False) as fc:
            fn()
    finally:
        torch.set_num_threads(before)
    return float(fc.get_total_flops()), None if scorer is None else scorer.ledger.summary(Costs.of(scorer.model))


def bias_bench(job: dict, tmp: Path) -> dict:
    """One timed run of bias-bench's runner (its own process, its own venv)."""
    out = Path(tempfile.mkdtemp(dir=tmp))
    (out / "job.json").write_text(json.dumps(job))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "CUDA_VISIBLE_DEVICES": ""}
    r = subprocess.run([str(BB_PY), str(ROOT / "tests" / "helpers" / "biasbench_run.py"), str(out / "job.json"),
                        str(out)], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"bias-bench failed:\n{r.stderr[-3000:]}")
    return json.loads((out / "timed.json").read_text())


def _stereoset_items(rows: list[dict], theirs: dict, examples: list) -> tuple[int, int, float]:
    """(decision flips, knife-edge flips, largest relative difference) of our StereoSet rows vs bias-bench's
    sentence scores; a knife-edge flip is one whose two scores are within 1e-4 (relative) of each other."""
    from context_cda.evaluate.stereoset import SCORE_COLUMNS

    labels = list(SCORE_COLUMNS)
    sids = {ex.id: ex.sentence_ids for ex in examples}
    flips = edge = 0
    rel = 0.0
    for r in rows:
        ours = [float(r[SCORE_COLUMNS[lab]]) for lab in labels]
        ref = [theirs[sids[r["id"]][lab]] for lab in labels]
        rel = max(rel, *(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(ours, ref, strict=True)))
        for i, j in ((0, 1), (0, 2), (1, 2)):
            if (ours[i] > ours[j]) != (ref[i] > ref[j]):
                knife = abs(ref[i] - ref[j]) <= 1e-4 * max(abs(ref[i]), abs(ref[j]), 1e-30)
                edge += knife
                flips += not knife
    return flips, edge, rel


def _crows_items(rows: list[dict], recorded: list[float], csv_rows: list[dict]) -> tuple[int, int, float]:
    """The same for CrowS: bias-bench's scores come per sentence in its order (sent1, sent2 of each pair; sent1
    is sent_more for a stereo pair, sent_less for an antistereo one)."""
    theirs = {}
    for k, row in enumerate(csv_rows):
        s1, s2 = recorded[2 * k], recorded[2 * k + 1]
        theirs[(row["sent_more"], row["sent_less"])] = (s1, s2) if row["stereo_antistereo"] == "stereo" else (s2, s1)
    flips = edge = 0
    rel = 0.0
    for r in rows:
        ref = theirs[(r["sent_more"], r["sent_less"])]
        ours = (float(r["score_more"]), float(r["score_less"]))
        rel = max(rel, *(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(ours, ref, strict=True)))
        if (ours[0] > ours[1], ours[0] == ours[1]) != (ref[0] > ref[1], ref[0] == ref[1]):
            knife = abs(ref[0] - ref[1]) <= 1e-4 * max(abs(ref[0]), abs(ref[1]), 1e-30)
            edge += knife
            flips += not knife
    return flips, edge, rel


def _wino_items(fast: list[dict], ref: list[dict], keys: tuple[str, str], decision: str) -> tuple[int, int, float]:
    flips = sum(a[decision] != b[decision] for a, b in zip(fast, ref, strict=True))
    rel = max((abs(a[k] - b[k]) / max(abs(b[k]), 1e-30) for a, b in zip(fast, ref, strict=True) for k in keys),
              default=0.0)
    return flips, 0, rel


def _flops_text(ledger: dict | None, counted: float) -> str:
    """The plan's FLOPs and the passes' (per part), and torch's own count of the matrix products."""
    if ledger is None:
        return f"      FLOPs done {counted / 1e12:.3f} T (matrix products counted by torch; no plan kept)"
    need, done = ledger["needed"]["flops"], ledger["done"]["flops"]

    def parts(f: dict) -> str:
        return f"{f['total'] / 1e12:.3f} T = base {f['base'] / 1e12:.3f} + attention {f['attention'] / 1e12:.3f} " \
               f"+ head {f['head'] / 1e12:.3f}"

    return (f"      FLOPs needed (shared-prefix plan: {ledger['needed']['base_tokens']} positions, "
            f"{ledger['needed']['head_rows']} read) {parts(need)}\n"
            f"      FLOPs done   ({ledger['done']['base_tokens']} positions, {ledger['done']['head_rows']} projected) "
            f"{parts(done)}; done/needed {ledger['done_over_needed']:.3f}; base + head counted by torch "
            f"{counted / 1e12:.3f} T")


def _line(name: str, ours: list[float], theirs: list[float], items: tuple[int, int, float], ref: str,
          work: tuple[float, dict | None], rate: float, best: float) -> dict:
    """One benchmark's row: times, ratio, items compared, FLOPs needed and done, the achieved rate, and the
    ratio the plan's FLOPs would allow at the measured matmul rate (its bound on this machine)."""
    counted, ledger = work
    o, t = statistics.median(ours), statistics.median(theirs)
    done = ledger["done"]["flops"]["total"] if ledger else counted
    needed = ledger["needed"]["flops"]["total"] if ledger else None
    achieved = done / o / 1e9 if done else None
    bound = t / (needed / (rate * 1e9)) if needed else None
    print(f"  {name:22s} ours {o:7.2f} s  {ref} {t:7.2f} s  ratio {t / o:6.2f}x   flips {items[0]} "
          f"(knife-edge {items[1]})  max rel diff {items[2]:.1e}")
    print(_flops_text(ledger, counted))
    if achieved:
        print(f"      {achieved:6.1f} GFLOP/s done = {achieved / rate:4.0%} of the matmul rate ({achieved / best:4.0%} "
              f"of its best)" + (f"; the plan at the full matmul rate: {needed / (rate * 1e9):.2f} s, a ratio of at "
                                 f"most {bound:.1f}x" if bound else ""))
    return {"benchmark": name, "ours_s": ours, "reference_s": theirs, "reference": ref, "ratio": t / o,
            "flips": items[0], "knife_edge": items[1], "max_rel_diff": items[2], "gflops": done / 1e9,
            "gflops_counted": counted / 1e9, "ledger": ledger, "ratio_bound": bound,
            "achieved_gflop_s": achieved, "matmul_fraction": achieved / rate if achieved else None,
            "matmul_fraction_of_best": achieved / best if achieved else None}


def _setup(ref: str, max_items: int | None, batch_size: int, tmp: Path, stereoset_bias: str = "all") -> dict:
    """Items (StereoSet's clusters of ``stereoset_bias``, every bias type by default; CrowS gender), bias-bench's
    files, our scorers (plain and Self-Debias in bias-bench mode), bias-bench's job."""
    import csv

    sys.path.insert(0, str(ROOT))
    from tests.helpers.biasbench_files import subset_crows, unique, write_stereoset

    from context_cda.data.datasets import resolve
    from context_cda.evaluate import winobias, winogender
    from context_cda.evaluate.data import load_crows, load_stereoset
    from context_cda.models import peek_family, resolve_pretrained
    from context_cda.scoring import load_scorer
    from context_cda.scoring.self_debias import BIAS_BENCH_POSITIONS, SelfDebiasSettings, self_debias_scorer

    examples = unique(load_stereoset(resolve("stereoset"), stereoset_bias))[:max_items]
    ss_file = write_stereoset(examples, tmp / "stereoset.json")
    cr_file = subset_crows(Path(resolve("crows-pairs")), tmp / "crows.csv", max_items)
    with open(cr_file, encoding="utf-8", newline="") as f:
        csv_rows = list(csv.DictReader(f))
    scorer = load_scorer(ref, batch_size=batch_size)
    settings = SelfDebiasSettings((PREFIX,), 50.0, 0.01, "bias-bench", BIAS_BENCH_POSITIONS["gender"])
    return {"examples": examples, "pairs": load_crows(cr_file, "gender"), "csv_rows": csv_rows, "scorer": scorer,
            "self_debias": self_debias_scorer(scorer, settings),
            "winogender": winogender.load(resolve("winogender"))[: max_items and 3 * max_items],
            "winobias": winobias.load(resolve("winobias"), "test")[:max_items],
            "job": {"task": "timed", "model_dir": resolve_pretrained(ref), "family": str(peek_family(ref)),
                    "stereoset": str(ss_file), "crows": str(cr_file), "threads": None}}


def _tasks(s: dict, repeats: int, sd_repeats: int) -> list[tuple]:
    """(name, ours, bias-bench's job or our one-at-a-time run, repeats, item comparison, the scorer)."""
    from context_cda.evaluate import crows, stereoset, winobias, winogender

    sc, sd, ex, pairs = s["scorer"], s["self_debias"], s["examples"], s["pairs"]
    ref = sc.reference()
    return [
        ("StereoSet", lambda: stereoset.score(sc, ex)[0], {"bench": "stereoset", "arm": "vanilla"}, repeats,
         lambda rows, bb: _stereoset_items(rows, bb["scores"], ex), sc),
        ("CrowS", lambda: crows.score(sc, pairs, "bias-bench")[0], {"bench": "crows", "arm": "vanilla"}, repeats,
         lambda rows, bb: _crows_items(rows, bb["scores"], s["csv_rows"]), sc),
        ("Self-Debias StereoSet", lambda: stereoset.score(sd, ex)[0], {"bench": "stereoset", "arm": "self-debias"},
         sd_repeats, lambda rows, bb: _stereoset_items(rows, bb["scores"], ex), None),
        ("Self-Debias CrowS", lambda: crows.score(sd, pairs, "bias-bench")[0],
         {"bench": "crows", "arm": "self-debias"}, sd_repeats,
         lambda rows, bb: _crows_items(rows, bb["scores"], s["csv_rows"]), None),
        ("WinoGender", lambda: winogender.score(sc, s["winogender"])[0],
         lambda: winogender.score(ref, s["winogender"])[0], sd_repeats, lambda rows, want: _wino_items(rows, want, ("ll_occupation", "ll_participant"), "pred"), sc),
        ("WinoBias", lambda: winobias.score(sc, s["winobias"])[0], lambda: winobias.score(ref, s["winobias"])[0],
         sd_repeats, lambda rows, want: _wino_items(rows, want, ("ll_gold", "ll_other"), "correct"), sc),
    ]


def _warm_up(s: dict) -> None:
    """The probes (packing, the fused head, the cached prefix), the allocator and lazy imports, on a few items."""
    from context_cda.evaluate import crows, stereoset, winobias, winogender

    for sc in (s["scorer"], s["self_debias"]):
        stereoset.score(sc, s["examples"][:3])
        crows.score(sc, s["pairs"][:3], "bias-bench")
    for sc in (s["scorer"], s["scorer"].reference()):
        winogender.score(sc, s["winogender"][:3])
        winobias.score(sc, s["winobias"][:3])


def _one(name, ours, theirs, repeats, compare, scorer, s, tmp, threads) -> tuple[list, list, tuple, tuple]:
    """Interleaved runs of one benchmark: ours, then the reference (bias-bench's job, or our one-at-a-time path)."""
    mine, ref_times = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        rows = ours()
        mine.append(time.perf_counter() - t0)
        if callable(theirs):
            t0 = time.perf_counter()
            got = theirs()
            ref_times.append(time.perf_counter() - t0)
        else:
            got = bias_bench({**s["job"], **theirs, "threads": threads}, tmp)
            ref_times.append(got["seconds"])
        print(f"    {name}: ours {mine[-1]:.2f} s, reference {ref_times[-1]:.2f} s (load average "
              f"{os.getloadavg()[0]:.2f})", file=sys.stderr)
    return mine, ref_times, compare(rows, got), count_work(ours, scorer)


def run(ref: str, threads: int, repeats: int, sd_repeats: int, max_items: int | None, batch_size: int,
        only: list[str] | None = None, stereoset_bias: str = "all") -> list[dict]:
    """Every benchmark's ratio, items compared, achieved rate; prints a table and returns its rows."""
    import torch

    torch.set_num_threads(threads)
    if not BB_PY.is_file():
        raise SystemExit(f"error: no bias-bench python at {BB_PY}: run BIASBENCH_SRC=... scripts/setup-biasbench.sh")
    tmp = Path(tempfile.mkdtemp(prefix="ccda-bench-"))
    s = _setup(ref, max_items, batch_size, tmp, stereoset_bias)
    tasks = [t for t in _tasks(s, repeats, sd_repeats) if not only or t[0] in only]
    _warm_up(s)
    rates = [matmul_rate(s["scorer"].model)]
    load = os.getloadavg()
    results = []
    print(f"\nvs bias-bench ({ref}, {threads} torch threads, load average {load[0]:.2f} at the start; StereoSet "
          f"{len(s['examples'])} clusters ({stereoset_bias}), CrowS {len(s['pairs'])} gender pairs)")
    for name, ours, theirs, reps, compare, scorer in tasks:
        mine, ref_times, items, flops = _one(name, ours, theirs, reps, compare, scorer, s, tmp, threads)
        rates.append(matmul_rate(s["scorer"].model))
        results.append((name, mine, ref_times, items, flops, "one-at-a-time" if callable(theirs) else "bias-bench"))
    rate = statistics.median(rates)
    print(f"  fp32 matmul rate measured here: {rate:.1f} GFLOP/s (median of {len(rates)}; best {max(rates):.1f})")
    rows = [_line(n, m, r, it, ref_name, fl, rate, max(rates)) for n, m, r, it, fl, ref_name in results]
    print(f"  load average at the end: {os.getloadavg()[0]:.2f}")
    return [{**row, "matmul_gflop_s": rate, "matmul_gflop_s_best": max(rates), "threads": threads,
             "load_start": load[0], "load_end": os.getloadavg()[0]} for row in rows]
