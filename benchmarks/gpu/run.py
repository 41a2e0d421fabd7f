"""The prepared GPU benchmark: fine-tuning, intrinsic scoring and generation throughput of the project's own code.

    PYTHONPATH=src python benchmarks/gpu/run.py --out gpu.json             # a CUDA machine, about 5-8 minutes
    PYTHONPATH=src python benchmarks/gpu/run.py --smoke --out smoke.json   # tiny shapes on CPU, seconds (make test)
    PYTHONPATH=src python benchmarks/gpu/run.py --cpu-calibration --out src/context_cda/resources/calibration-cpu.json

``--cpu-calibration`` measures the same shapes (and SmolLM2-135M, the demo's model) on this machine's CPU at
CPU-sized settings: training fp32 (what ``train.precision: auto`` gives on a CPU) at 8 x 128 only, and not for a
model whose fp32 AdamW state would not fit in half the memory; StereoSet + CrowS on ``--score-items`` of each
(default 64) with 4 items one at a time; generation fp32 at 1 and 48 prompts (the demo's augment.batch_size). It runs
one torch thread (``--threads``), so its rates are per core: on a shared machine a pass split across cores waits at
every operation's barrier for a core another process holds (docs/cost.md: on this 2-core machine under load, 2
threads were no faster than 1), while one thread per pass is what the scorer's side-by-side passes use. Its peak is the
fp32 matrix-product rate measured here with the same threads (that product, best of 5, at the start; once more at
the end with the load average), so each MFU is a measured fraction of a measured rate, and the JSON is a throughput
table ``ccda plan --throughput cpu`` prices a profile with in core-hours of this machine.

Needs only torch, transformers, accelerate and peft (what the GPU machine has): no network, no hub, no data files.
For random-initialised models of the real shapes (GPT-2 small, BERT-base, T5-base, Llama-3.2-1B; vocabularies of
the real sizes, tokenizers trained offline on synthetic text, see shapes.py) it measures, in this order:

* ``train``: tokens/s and MFU of :func:`context_cda.train.loop.train` with the family's objective, bf16 mixed
  precision, full fine-tuning at the project's settings (train.batch_size 8 x max_seq_len 128) and at a
  saturating batch, and LoRA (r 16, peft's default modules). Steps are timed from the loop's ``on_step`` hook
  after warm-up steps; the hook then stops the run, so no checkpoint is written.
* ``score``: StereoSet + CrowS gender (255 clusters + 262 pairs of synthetic items, realistic lengths) with the
  project's scorers and benchmark code (:mod:`context_cda.evaluate`), batched (evaluate.batch_size 32) and one
  item at a time (the reference path; on a prefix of the items, reported as items/s), and the batched scorer
  once more on that prefix: ``speedup_vs_one_at_a_time`` = per-item throughput batched / one at a time on the
  same items (also on stderr, and ``goals.gpt2_score_speedup_vs_one_at_a_time``). fp32 weights, as the
  per-epoch evaluation scores the training model.
* ``generate``: the ``hf`` backend (:mod:`context_cda.generation.hf`) on augment-like prompts (a shared
  system prompt of ~120 tokens, then the sentence), 64 new tokens, at 1, 32 and 128 prompts per call, bf16
  weights (and fp32 at 128 for reference). Causal shapes only.

MFU = tokens/s x FLOPs per token / peak. FLOPs per token = 2N (forward) + 2N (backward, activations) + 2N_train
(backward, weight gradients), so 6N for full fine-tuning and ~4N for LoRA; N = parameters that multiply every
token = all parameters except embedding tables (lookups), plus the output projection vocab x d_model, counted
whether or not it is tied to the input embedding; attention-score FLOPs are not counted (a few % at these
lengths). T5: encoder parameters per encoder token, decoder + head per decoder token (counted from the
objective's batches). Peak: 989 TFLOP/s dense bf16 for H100/H200 SXM (NVIDIA datasheet); ``--peak-flops`` for
other GPUs. The JSON (``--out``) holds the environment, every measurement, and a ``rates`` table in the format of
``ccda plan --throughput`` (tokens/s per model and operation).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import hashlib
import importlib
import importlib.util
import json
import os
import platform
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

import shapes as S  # noqa: E402

PEAKS = [("H200", 9.89e14), ("H100", 9.89e14), ("A100", 3.12e14), ("L40S", 3.62e14), ("L4", 1.21e14),
         ("A10", 1.25e14)]
PEAK_SOURCE = "NVIDIA datasheets, dense BF16 tensor-core peak (H100/H200 SXM: 989 TFLOP/s)"
MFU_FORMULA = ("tokens/s x (2N + 2N + 2N_trainable) / peak: 6N full, ~4N LoRA; N = parameters that multiply "
               "every token (all but embedding tables, plus the vocab x d_model output projection, tied or not); "
               "attention-score FLOPs excluded; T5: encoder N per encoder token, decoder+head N per decoder token")


class StopRun(Exception):
    """Raised from the training loop's on_step hook once the timed steps are done (no checkpoint is written)."""


# ------------------------------------------------------------------------------------------------------ imports


def bootstrap() -> list[str]:
    """Make ``context_cda`` importable from this checkout with only torch/transformers/accelerate/peft.

    Two of the package's dependencies may be missing on a bare GPU image: ``xxhash`` (context_cda.io hashes row
    ids with it; this benchmark computes no ids, so a hashlib digest stands in, ids would differ) and
    ``pydantic`` (context_cda.train's package __init__ imports the stage code and its config; the benchmark needs
    only train.loop and train.objectives, so the package is registered without running that __init__).
    """
    src = ROOT / "src"
    if str(src) not in sys.path:
        sys.path.insert(0, str(src))
    notes = []
    if importlib.util.find_spec("xxhash") is None:
        stand_in = types.ModuleType("xxhash")
        stand_in.xxh3_128_hexdigest = lambda b: hashlib.blake2b(b, digest_size=16).hexdigest()
        sys.modules["xxhash"] = stand_in
        notes.append("xxhash missing: context_cda.io ids hashed with blake2b instead (no id is stored here)")
    if importlib.util.find_spec("pydantic") is None:
        import context_cda

        pkg_dir = Path(context_cda.__file__).parent / "train"
        pkg = types.ModuleType("context_cda.train")
        pkg.__path__ = [str(pkg_dir)]
        sys.modules["context_cda.train"] = pkg
        notes.append("pydantic missing: context_cda.train loaded without its __init__ (loop + objectives only)")
    return notes


def train_config(**fields: Any) -> Any:
    """A train config: the project's TrainConfig when pydantic is there, else the same fields as attributes."""
    try:
        from context_cda.config import TrainConfig
    except ImportError:
        base = {"epochs": 1, "learning_rate": 5e-5, "weight_decay": 0.01, "warmup_ratio": 0.0, "grad_accum": 1,
                "mlm_probability": 0.15, "whole_word_mask": False, "noise_density": 0.15, "mean_span_length": 3.0,
                "precision": "bf16", "eval_every": 1, "max_steps": None, "keep_checkpoints": 1,
                "keep_epoch_weights": False}
        return types.SimpleNamespace(**{**base, **fields})
    return TrainConfig(**{"epochs": 1, "precision": "bf16", **fields})  # fields may set another precision


def lora_wrap(model: Any, family: str) -> tuple[Any, str]:
    """The project's LoRA wrapping (train.finetune.wrap_lora, r 16 / alpha 32 / dropout 0.05, peft's default
    modules) when importable; on a bare image the same peft call."""
    defaults = types.SimpleNamespace(r=16, alpha=32, dropout=0.05, target_modules=None)
    try:
        from context_cda.train.finetune import wrap_lora
    except ImportError:
        from peft import LoraConfig, TaskType, get_peft_model

        task = {"causal": TaskType.CAUSAL_LM, "seq2seq": TaskType.SEQ_2_SEQ_LM}.get(family)
        cfg = LoraConfig(r=defaults.r, lora_alpha=defaults.alpha, lora_dropout=defaults.dropout, task_type=task)
        return get_peft_model(model, cfg), "peft (train.finetune not importable here)"
    return wrap_lora(model, defaults, family), "context_cda.train.finetune.wrap_lora"


# ------------------------------------------------------------------------------------------------ environment


def environment(args: argparse.Namespace, device: str) -> dict[str, Any]:
    import torch

    env: dict[str, Any] = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "device": device,
                           "python": platform.python_version(), "torch": torch.__version__}
    for name in ("transformers", "accelerate", "peft"):
        env[name] = importlib.import_module(name).__version__
    if device.startswith("cuda"):
        p = torch.cuda.get_device_properties(0)
        env["device_name"] = p.name
        env["memory_gib"] = round(p.total_memory / 2**30, 1)
        env["tf32_matmul"] = bool(torch.backends.cuda.matmul.allow_tf32)
        peak = args.peak_flops or next((v for k, v in PEAKS if k in p.name), None)
    else:
        env["device_name"] = f"{cpu_name()} ({os.cpu_count()} cores, {torch.get_num_threads()} torch threads)"
        peak = args.peak_flops
    env["peak_flops"] = peak
    env["peak_flops_source"] = "--peak-flops" if args.peak_flops else (PEAK_SOURCE if peak else None)
    if args.cpu_calibration and not args.peak_flops:
        from context_cda.tools.matmul import measured_matmul_rate

        env["peak_flops"] = measured_matmul_rate()
        env["peak_flops_source"] = (f"measured: fp32 matmul 2048 x 768 x 3072 (best of 5), "
                                    f"{torch.get_num_threads()} threads, load average {os.getloadavg()[0]:.2f}")
        env["load_average"] = os.getloadavg()[0]
    return env


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def free(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        gc.collect()
        torch.cuda.empty_cache()


def family_of(model: Any) -> str:
    from context_cda.models import family_of as project_family

    return project_family(model)


# ----------------------------------------------------------------------------------------------------- FLOPs


def matmul_params(module: Any, head: Any = None) -> int:
    """Parameters of ``module`` that multiply every token: all but embedding tables, plus ``head``'s weight
    (the output projection) when it is an embedding table too (tied)."""
    import torch

    tables = {id(m.weight) for m in module.modules() if isinstance(m, torch.nn.Embedding)}
    n = sum(p.numel() for p in module.parameters() if id(p) not in tables)
    if head is not None and id(head.weight) in tables:
        n += head.weight.numel()
    return n


def flops_per_example(model: Any, family: str, batch: dict[str, Any]) -> tuple[float, float]:
    """(forward FLOPs, trainable-parameter share) for one collated batch: 2 x N x tokens (T5: per side)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    total = sum(p.numel() for p in base.parameters())
    trainable = sum(p.numel() for p in base.parameters() if p.requires_grad) / total
    if family == "seq2seq":
        enc_tokens = float(batch["attention_mask"].sum())
        dec_tokens = float((batch["labels"] != -100).sum())
        head = base.get_output_embeddings()
        n_enc = matmul_params(base.encoder)
        n_dec = matmul_params(base.decoder) + head.weight.numel()
        return 2.0 * (n_enc * enc_tokens + n_dec * dec_tokens), trainable
    tokens = float(batch["attention_mask"].sum())
    return 2.0 * matmul_params(base, base.get_output_embeddings()) * tokens, trainable


def forward_mfu(tokens_per_s: float, model: Any, peak: float | None) -> float | None:
    """Forward-only MFU: tokens/s x 2N / peak (N as for training: matmul parameters, the output projection
    counted); generation's prompt tokens are not counted, so its figure is a lower bound."""
    if not peak:
        return None
    return round(tokens_per_s * 2.0 * matmul_params(model, model.get_output_embeddings()) / peak, 4)


# ------------------------------------------------------------------------------------------------------ train


def train_rows(shape: S.Shape, tok: Any, device: str, args: argparse.Namespace, env: dict) -> list[dict]:
    """Full fine-tuning at the project's settings and at a saturating batch, then LoRA, each timed."""
    seq_big = 512 if shape.arch != "t5" else 256
    runs = [("full", 8, 128), ("full", 32, seq_big), ("lora", 32, seq_big)]
    if args.smoke:
        runs = [("full", 4, 32), ("lora", 4, 32)]
    if args.cpu_calibration:
        runs = [("full", 8, 128)]
        need = 16 * sum(p.numel() for p in S.build_model(shape, tok, "meta").parameters())  # fp32 + grad + AdamW
        if need > 0.5 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"):
            return [{"shape": shape.name, "operation": "train", "mode": "full",
                     "skipped": f"fp32 AdamW state ({need / 2**30:.0f} GiB) over half this machine's memory"}]
    rows = []
    for mode, batch_size, seq_len in runs:
        if deadline_passed(args):
            rows.append({"shape": shape.name, "operation": "train", "mode": mode, "skipped": "time budget"})
            continue
        model = S.build_model(shape, tok, device)
        try:
            rows.append(time_training(shape, model, tok, device, args, env, mode, batch_size, seq_len))
        except Exception as e:  # noqa: BLE001 - one failed configuration (e.g. out of memory) is reported, not fatal
            rows.append({"shape": shape.name, "operation": "train", "mode": mode, "batch_size": batch_size,
                         "seq_len": seq_len, "error": f"{type(e).__name__}: {e}"[:400]})
        del model
        free(device)
    return rows


def time_training(shape, model, tok, device, args, env, mode, batch_size, seq_len) -> dict:
    import numpy as np

    from context_cda.train.loop import train
    from context_cda.train.objectives import Objective

    family = family_of(model)
    wrapped = "full"
    if mode == "lora":
        model, wrapped = lora_wrap(model, family)
    warm, timed = (1, 1) if args.smoke else (1 if args.cpu_calibration else 3, args.train_steps)
    rng = np.random.default_rng(0)
    ordinary = np.array(sorted(set(range(len(tok))) - set(tok.all_special_ids)))  # no sentinel, mask or EOS
    examples = [{"input_ids": rng.choice(ordinary, seq_len).tolist()} for _ in range(batch_size * (warm + timed))]
    objective = Objective(family, tok)
    fwd_flops, trainable = flops_per_example(model, family, objective.collate(examples[:batch_size], rng))
    precision = "auto" if args.cpu_calibration else "bf16"  # a CPU trains fp32 (train.precision: auto)
    tcfg = train_config(batch_size=batch_size, max_seq_len=seq_len, max_steps=warm + timed, precision=precision)
    stamps: list[float] = []

    def on_step(_epoch: int, step: int) -> None:
        sync(device)
        stamps.append(time.perf_counter())
        if step >= warm + timed:
            raise StopRun

    with tempfile.TemporaryDirectory() as out, contextlib.suppress(StopRun):
        train(model, tok, examples, tcfg, out, family=family, seed=13, device=device, on_step=on_step)
    step_s = (stamps[-1] - stamps[warm - 1]) / timed
    tokens_per_s = batch_size * seq_len / step_s
    flops_per_step = fwd_flops * (2.0 + trainable)  # forward, activation gradients, weight gradients
    peak = env.get("peak_flops")
    return {"shape": shape.name, "model_key": shape.model_key, "operation": "train", "mode": mode,
            "wrapped_by": wrapped, "precision": "fp32 (train.precision: auto on a CPU)" if args.cpu_calibration
            else "bf16 (accelerate autocast, fp32 master weights)",
            "batch_size": batch_size, "seq_len": seq_len, "steps_timed": timed, "step_s": round(step_s, 4),
            "tokens_per_s": round(tokens_per_s, 1), "trainable_share": round(trainable, 5),
            "flops_per_step": flops_per_step, "achieved_flops": round(flops_per_step / step_s, 1),
            "mfu": round(flops_per_step / step_s / peak, 4) if peak else None}


def deadline_passed(args: argparse.Namespace) -> bool:
    return time.perf_counter() - args.t0 > args.budget_s


# ------------------------------------------------------------------------------------------------------ score


def synthetic_items() -> tuple[list, list]:
    from context_cda.evaluate.data import CrowsPair, StereoSetExample

    labels = ("stereotype", "anti-stereotype", "unrelated")
    ss = [StereoSetExample(id=f"ss-{i}", target=r["target"], bias_type="gender", context=r["context"],
                           sentences={lab: r[lab] for lab in labels},
                           sentence_ids={lab: f"ss-{i}-{lab}" for lab in labels}, source=f"synthetic:{i}")
          for i, r in enumerate(S.stereoset_rows())]
    cp = [CrowsPair(id=f"cp-{i}", sent_more=r["sent_more"], sent_less=r["sent_less"], direction=r["direction"],
                    bias_type="gender", source=f"synthetic:{i}") for i, r in enumerate(S.crows_rows())]
    return ss, cp


def _score_once(scorer: Any, ss: list, cp: list, device: str) -> float:
    from context_cda.evaluate import crows, stereoset

    sync(device)
    t = time.perf_counter()
    stereoset.score(scorer, ss)
    crows.score(scorer, cp, "auto")
    sync(device)
    return time.perf_counter() - t


def score_rows(shape: S.Shape, tok: Any, device: str, args: argparse.Namespace) -> list[dict]:
    """StereoSet + CrowS gender: every item batched, a prefix of them one at a time (the reference path)."""
    from context_cda.scoring import scorer_for

    ss, cp = synthetic_items()
    if args.smoke:
        ss, cp = ss[:8], cp[:8]
    elif args.score_items:
        ss, cp = ss[: args.score_items], cp[: args.score_items]
    model = S.build_model(shape, tok, device)  # fp32, as the per-epoch evaluation scores the training model
    fast = scorer_for(model, tok, batch_size=32)
    _score_once(fast, ss[:2], cp[:2], device)  # warm-up
    n_ref = 2 if args.smoke else args.reference_items
    sentences = [s for e in ss for s in e.sentences.values()] + [s for p in cp for s in (p.sent_more, p.sent_less)]
    mean_tokens = sum(len(tok(s, add_special_tokens=False)["input_ids"]) for s in sentences) / len(sentences)
    rows, raw = [], {}
    for mode, scorer, items in (("batched", fast, (ss, cp)), ("one-at-a-time", fast.reference(),
                                                               (ss[:n_ref], cp[:n_ref]))):
        if deadline_passed(args):
            rows.append({"shape": shape.name, "operation": "score", "mode": mode, "skipped": "time budget"})
            continue
        secs = raw[mode] = _score_once(scorer, *items, device)
        n_items = len(items[0]) + len(items[1])
        n_sent = 3 * len(items[0]) + 2 * len(items[1])
        rows.append({"shape": shape.name, "model_key": shape.model_key, "operation": "score", "mode": mode,
                     "benchmark": "stereoset+crows gender (synthetic)", "family": fast.family, "dtype": "float32",
                     "batch_size": scorer.batch_size, "stereoset_items": len(items[0]), "crows_pairs": len(items[1]),
                     "mean_sentence_tokens": round(mean_tokens, 2), "seconds": round(secs, 3),
                     "items_per_s": round(n_items / secs, 2), "sentences_per_s": round(n_sent / secs, 2),
                     "tokens_per_s": round(n_sent * mean_tokens / secs, 1),
                     "mfu": forward_mfu(n_sent * mean_tokens / secs, model, args.peak),
                     "full_gender_subsets_s": round((S.STEREOSET_ITEMS + S.CROWS_PAIRS) / (n_items / secs), 3)})
    for row in rows:
        if "seconds" in row:
            row.update(plan_units(row))
    if "one-at-a-time" in raw and not deadline_passed(args):
        _add_speedup(rows, raw["one-at-a-time"], _score_once(fast, ss[:n_ref], cp[:n_ref], device))
    del model, fast
    free(device)
    return rows


def plan_units(row: dict) -> dict[str, Any]:
    """A score row in the units ``ccda plan`` divides by the score rate: the tokens
    :func:`context_cda.tools.costs.benchmark_tokens` counts for the row's items and family (a masked LM's pass per masked
    position, a causal LM's sentence), per second, and that rate's utilisation (2N per token, as ``mfu``). The row's
    own ``tokens_per_s`` counts sentence tokens, which a masked LM runs many times and a causal LM's prefix tree
    fewer than once, so only this rate prices an evaluation (and its ``mfu``, of sentence tokens, can pass 1)."""
    from context_cda.tools.costs import Assumptions, benchmark_tokens

    counts = Assumptions(stereoset_items=row["stereoset_items"], crows_items=row["crows_pairs"])
    tokens = benchmark_tokens(counts, row["family"], "auto")
    per_s = tokens / row["seconds"]
    mfu = row["mfu"] * per_s / row["tokens_per_s"] if row.get("mfu") and row.get("tokens_per_s") else None
    return {"plan_tokens": round(tokens, 1), "plan_tokens_per_s": round(per_s, 1),
            "plan_mfu": round(mfu, 4) if mfu is not None else None}


def _add_speedup(rows: list[dict], reference_s: float, batched_same_s: float) -> None:
    """``speedup_vs_one_at_a_time`` on both score rows: per-item throughput of the batched scorer over the
    one-at-a-time reference on the *same* items (the reference's prefix, timed batched once more), i.e. the
    reference's seconds over the batched seconds for those items (both unrounded)."""
    ref = next(r for r in rows if r.get("mode") == "one-at-a-time")
    speedup = round(reference_s / max(batched_same_s, 1e-9), 2)
    for r in rows:
        if "seconds" in r:
            r.update(speedup_vs_one_at_a_time=speedup, speedup_items=ref["stereoset_items"] + ref["crows_pairs"],
                     batched_seconds_on_speedup_items=round(batched_same_s, 6))


# --------------------------------------------------------------------------------------------------- generate


def generation_prompts(n: int) -> list[list[dict[str, str]]]:
    """Augment-like conversations: one shared system prompt (~120 tokens), then a sentence to rewrite."""
    vocab = S.words()
    system = " ".join(vocab[i * 7 % len(vocab)] for i in range(110)) + "."
    rows = S.crows_rows()
    return [[{"role": "system", "content": system},
             {"role": "user", "content": f"Rewrite the sentence: {rows[i % len(rows)]['sent_more']}"}]
            for i in range(n)]


def generate_rows(shape: S.Shape, tok: Any, device: str, args: argparse.Namespace) -> list[dict]:
    import torch

    from context_cda.generation import SamplingParams
    from context_cda.generation.hf import HFGenerator

    new = 4 if args.smoke else 64
    params = SamplingParams(n=1, temperature=0.7, top_p=0.95, max_tokens=new, seed=0, stop=())
    plan = [(1, torch.float32), (4, torch.float32)] if args.smoke else \
        [(1, torch.bfloat16), (32, torch.bfloat16), (128, torch.bfloat16), (128, torch.float32)]
    if args.cpu_calibration:  # fp32 as a CPU generates; 48 prompts a call as the demo's augment.batch_size
        plan = [(1, torch.float32), (48, torch.float32)]
    rows = []
    for batch, dtype in plan:
        if deadline_passed(args):
            rows.append({"shape": shape.name, "operation": "generate", "batch_size": batch, "skipped": "time budget"})
            continue
        model = S.build_model(shape, tok, device, dtype=dtype)
        gen = HFGenerator(model, tok, batch_size=batch)
        prompts = generation_prompts(batch if batch > 1 else 2 if args.smoke else 4)
        gen.generate(prompts[:1], params)  # warm-up
        sync(device)
        t = time.perf_counter()
        res = gen.generate(prompts, params)
        sync(device)
        secs = time.perf_counter() - t
        tokens = sum(r.completion_tokens for r in res)
        rows.append({"shape": shape.name, "model_key": shape.model_key, "operation": "generate", "backend": "hf",
                     "dtype": str(dtype).removeprefix("torch."), "batch_size": batch, "prompts": len(prompts),
                     "prompt_tokens": round(sum(r.prompt_tokens for r in res) / len(res), 1), "new_tokens": new,
                     "generated_tokens": tokens, "errors": sum(not r.ok for r in res), "seconds": round(secs, 3),
                     "tokens_per_s": round(tokens / secs, 1), "items_per_s": round(len(prompts) / secs, 2),
                     "mfu": forward_mfu(tokens / secs, model, args.peak)})
        del gen, model
        free(device)
    return rows


# ------------------------------------------------------------------------------------------------------- main


def rates(results: list[dict], env: dict, smoke: bool) -> dict[str, dict]:
    """The ``ccda plan --throughput`` table, tokens/s per model key: train = full fine-tuning at the project's
    settings (batch 8); score = batched scoring; generate = the hf backend at its largest batch (bf16 when run)."""
    where = "SMOKE RUN (tiny shapes): not a throughput figure" if smoke else \
        f"measured: benchmarks/gpu/run.py{' --cpu-calibration' if env.get('cpu_calibration') else ''}, " \
        f"{env['device_name']}, {env['date'][:10]}"
    done = [r for r in results if "tokens_per_s" in r]
    out: dict[str, dict] = {"train": {}, "score": {}, "generate": {}}
    for r in done:
        key = r["model_key"]
        if r["operation"] == "train" and r["mode"] == "full" and r["batch_size"] == min(
                x["batch_size"] for x in done if x["operation"] == "train" and x["shape"] == r["shape"]):
            out["train"][key] = {"per_s": r["tokens_per_s"], "source": f"{where}; {r['precision'].split()[0]} "
                                                                         f"full, {r['batch_size']} x {r['seq_len']}"}
        elif r["operation"] == "score" and r["mode"] == "batched":
            per_s = r.get("plan_tokens_per_s") or plan_units(r)["plan_tokens_per_s"]
            out["score"][key] = {"per_s": per_s, "source": f"{where}; fp32, batch 32, the tokens ccda plan counts "
                                                            "(costs.benchmark_tokens) per second"}
    for key in {r["model_key"] for r in done if r["operation"] == "generate"}:
        gen = [r for r in done if r["operation"] == "generate" and r["model_key"] == key]
        best = max(gen, key=lambda r: (r["dtype"] == "bfloat16", r["batch_size"]))
        out["generate"][key] = {"per_s": best["tokens_per_s"],
                                "source": f"{where}; hf backend, {best['dtype']}, batch {best['batch_size']}"}
    return out


def plan_table(out: dict, env: dict, measured: dict[str, dict]) -> dict[str, Any]:
    """``gpu``, ``models`` and ``rates`` for ``ccda plan --throughput``: the packaged table
    (src/context_cda/resources/throughput.json: model sizes, assumed MFUs for what was not measured) with this
    run's GPU and measured rates laid over it, so the whole JSON prices a profile on its own."""
    packaged_path = ROOT / "src" / "context_cda" / "resources" / "throughput.json"
    packaged = json.loads(packaged_path.read_text()) if packaged_path.is_file() else {"gpu": {}, "models": {},
                                                                                        "rates": {}}
    gpu = {**packaged.get("gpu", {}), "name": env["device_name"], "measured_on": env["device_name"]}
    if env["peak_flops"]:
        gpu.update(peak_flops=env["peak_flops"], peak_flops_source=env["peak_flops_source"])
    if env.get("cpu_calibration"):
        gpu.update(kind="cpu", date=env["date"], **measured_mfu(out["results"], packaged.get("gpu", {})))
    models = dict(packaged.get("models", {}))
    for info in out["shapes"].values():
        models.setdefault(info["model_key"], {"params": info["parameters"]})
    table_rates = {op: dict(v) for op, v in packaged.get("rates", {}).items()}
    for op, entries in measured.items():
        table_rates.setdefault(op, {}).update(entries)
    what = "a SMOKE run (tiny shapes on CPU): no figure here is a GPU throughput" if out["smoke"] else \
        f"measured by benchmarks/gpu/run.py on {env['device_name']} ({env['date'][:10]})"
    about = (f"Rates {what} (each entry's source says which); entries without a measured source, and models "
             f"without a rate, come from the packaged table: {packaged.get('about', '(not found)')}")
    return {"about": about, "gpu": gpu, "models": models, "rates": table_rates}


def measured_mfu(results: list[dict], packaged: dict) -> dict[str, Any]:
    """The CPU table's utilisation per operation: the median MFU this run measured for train (full fine-tuning)
    and generate (the largest batch); score and judge keep the packaged assumption. A score row's utilisation is
    no FLOP fraction: the scorers skip work a token count does not see (a causal LM's shared prefixes run once, a
    T5 pass scores a span), so per sentence token or per token the plan counts it passes 1 (``plan_units``), and a
    table's MFU is at most 1; the measured score rates price the models measured, the rest stay assumed."""
    import statistics

    picks = {"train": [r for r in results if r.get("operation") == "train" and r.get("mfu")],
             "generate": [r for r in results if r.get("operation") == "generate" and r.get("mfu")
                          and r["batch_size"] == max(x["batch_size"] for x in results
                                                     if x.get("operation") == "generate" and x.get("mfu"))]}
    mfu = dict(packaged.get("mfu", {}))
    measured = []
    for op, rows in picks.items():
        if rows:
            mfu[op] = round(statistics.median(r["mfu"] for r in rows), 4)
            measured.append(f"{op} {mfu[op]:.0%} (median of {len(rows)} shapes)")
    return {"mfu": mfu, "mfu_measured": [op for op in picks if picks[op]],
            "mfu_source": "measured on this CPU as a fraction of the measured fp32 matmul rate: " + "; ".join(measured)
            + "; score and judge assumed as packaged (a score rate is measured per model instead)"}


def goals(results: list[dict]) -> dict[str, Any]:
    gpt_train = [r for r in results if r["shape"] == "gpt2" and r["operation"] == "train" and r.get("mode") == "full"
                 and r.get("mfu") is not None]
    gpt_score = [r for r in results if r["shape"] == "gpt2" and r["operation"] == "score" and r.get("mode") == "batched"
                 and "seconds" in r]
    best = max((r["mfu"] for r in gpt_train), default=None)
    secs = gpt_score[0]["full_gender_subsets_s"] if gpt_score else None
    return {"gpt2_full_finetune_best_mfu": best, "gpt2_mfu_ge_40pct": None if best is None else best >= 0.40,
            "gpt2_stereoset_crows_gender_s": secs, "gpt2_stereoset_crows_lt_3s": None if secs is None else secs < 3.0,
            "gpt2_score_speedup_vs_one_at_a_time": gpt_score[0].get("speedup_vs_one_at_a_time") if gpt_score else None}


def summary(name: str, rows: list[dict], info: dict) -> str:
    """The per-shape line on stderr: how many measurements, and the batched scorer's speedup when measured."""
    line = f"{name}: {len(rows)} measurements in {info['seconds']} s"
    score = next((r for r in rows if r.get("operation") == "score" and "speedup_vs_one_at_a_time" in r), None)
    if score is not None:
        line += (f"; scoring batched is {score['speedup_vs_one_at_a_time']}x one-at-a-time per item "
                 f"(same {score['speedup_items']} items)")
    return line


def run_shape(shape: S.Shape, device: str, args: argparse.Namespace, env: dict) -> tuple[list[dict], dict]:
    t = time.perf_counter()
    tok = S.tokenizer(shape.arch)
    meta = S.build_model(shape, tok, "meta")  # parameter counts without allocating
    info = {"arch": shape.arch, "model_key": shape.model_key, "model_vocab": shape.vocab, "tokenizer_vocab": len(tok),
            "parameters": sum(p.numel() for p in meta.parameters()),
            "matmul_parameters": matmul_params(meta, meta.get_output_embeddings()), **shape.dims}
    del meta
    rows: list[dict] = []
    if "train" in args.only:
        rows += train_rows(shape, tok, device, args, env)
    if "score" in args.only and not deadline_passed(args):
        rows += score_rows(shape, tok, device, args)
    if "generate" in args.only and shape.arch in ("gpt2", "llama") and not deadline_passed(args):
        rows += generate_rows(shape, tok, device, args)
    info["seconds"] = round(time.perf_counter() - t, 1)
    return rows, info


def rebuild(path: Path, dest: str | None) -> int:
    """The run saved at ``path`` with its score rows in the plan's units and its table made again from its own
    measurements (e.g. after a fix to how the table is derived)."""
    out = json.loads(path.read_text())
    for r in out["results"]:
        if r.get("operation") == "score" and "seconds" in r:
            r.update(plan_units(r))
    out.update(plan_table(out, out, rates(out["results"], out, out["smoke"])))
    text = json.dumps(out, indent=2)
    print(text)
    if dest:
        Path(dest).write_text(text + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="tiny shapes on CPU (seconds): checks that it all runs")
    ap.add_argument("--out", help="write the JSON here (it is printed either way)")
    ap.add_argument("--cpu-calibration", action="store_true",
                    help="this machine's CPU, CPU-sized settings, the peak measured (see the module's docstring)")
    ap.add_argument("--shapes", default=None, help="comma-separated, in order (default: the four GPU shapes; the "
                                                   "CPU calibration adds smollm2-135m)")
    ap.add_argument("--only", default="train,score,generate", help="sections to run")
    ap.add_argument("--budget-s", type=float, default=None, help="skip what would start after this many seconds "
                                                                 "(default 450; CPU calibration 3600)")
    ap.add_argument("--train-steps", type=int, default=None, help="timed optimizer steps per configuration "
                                                                   "(default 10; CPU calibration 2)")
    ap.add_argument("--reference-items", type=int, default=None, help="items per benchmark for the one-at-a-time "
                                                                       "path (default 24; CPU calibration 4)")
    ap.add_argument("--score-items", type=int, default=None, help="StereoSet clusters and CrowS pairs scored "
                                                                   "(default all; CPU calibration 64)")
    ap.add_argument("--peak-flops", type=float, default=None, help="the GPU's dense bf16 peak (default: by name)")
    ap.add_argument("--device", default=None, help="default: cuda when available (cpu with --smoke)")
    ap.add_argument("--rebuild", default=None, help="a saved run's JSON: its table rebuilt from its measurements by "
                                                    "this code (nothing measured), printed and written to --out")
    ap.add_argument("--threads", type=int, default=None, help="torch threads on a CPU (default: torch's; CPU "
                                                               "calibration 1: its rates are per core)")
    args = ap.parse_args(argv)
    if args.rebuild:
        return rebuild(Path(args.rebuild), args.out)
    cal = args.cpu_calibration
    defaults = {"shapes": ",".join(s.name for s in S.FULL + (S.CPU_EXTRA if cal else [])),
                "budget_s": 3600.0 if cal else 450.0, "train_steps": 2 if cal else 10,
                "reference_items": 4 if cal else 24, "score_items": 64 if cal else None}
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.t0 = time.perf_counter()
    args.only = set(args.only.split(","))
    fallbacks = bootstrap()

    import torch

    device = args.device or ("cpu" if cal or args.smoke or not torch.cuda.is_available() else "cuda")
    if args.smoke:
        torch.set_num_threads(min(2, os.cpu_count() or 1))
    if args.threads or cal:
        torch.set_num_threads(args.threads or 1)
    env = environment(args, device)
    env["cpu_calibration"] = cal
    args.peak = env["peak_flops"]
    by_name = {s.name: s for s in (S.SMOKE if args.smoke else S.FULL + S.CPU_EXTRA)}
    out: dict[str, Any] = {"benchmark": "gpu", "smoke": args.smoke, **env, "import_fallbacks": fallbacks,
                           "mfu_formula": MFU_FORMULA, "shapes": {}, "results": []}
    for name in args.shapes.split(","):
        rows, info = run_shape(by_name[name], device, args, env)
        out["shapes"][name] = info
        out["results"] += rows
        print(summary(name, rows, info), file=sys.stderr, flush=True)
    out["elapsed_s"] = round(time.perf_counter() - args.t0, 1)
    if cal and not args.peak_flops:  # the rate and the load once more at the end: how steady the machine was
        from context_cda.tools.matmul import measured_matmul_rate

        out.update(peak_flops_at_end=measured_matmul_rate(), load_average_end=os.getloadavg()[0])
    out["goals"] = goals(out["results"])
    out.update(plan_table(out, env, rates(out["results"], env, args.smoke)))
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
