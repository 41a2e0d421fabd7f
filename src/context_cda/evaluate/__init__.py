"""The benchmarks behind a registry, their scores and aggregates, the evidence statistics, decontamination.
May import: the run contract, data, models, scoring.

Evaluation behind a small registry (:mod:`.registry`): intrinsic bias (StereoSet intra- and intersentence,
CrowS-Pairs), next-token gender balance, WinoGender and WinoBias, and the extrinsic benchmarks that fine-tune a head
first (GLUE, Bias in Bios, STS-B, NLI-Bias).

* :func:`run_evaluate` — the ``evaluate`` stage: load a model reference, score each configured benchmark,
  write per-item predictions (Parquet), ``aggregate.json`` and ``manifest.json``.
* :func:`evaluate_model` — the per-epoch benchmarks for an already loaded model (evaluation during training),
  returned flat: ``{"stereoset_ss": ..., "stereoset_lms": ..., "stereoset_icat": ..., "crows_cs": ...}``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ..layout import AGGREGATE_FILE, NOT_APPLICABLE_FILE, PREDICTIONS_FILE
from .registry import (
    REGISTRY,
    Benchmark,
    Metric,
    check_config_names,
    check_names,
    get_benchmark,
    metric_specs,
)

if TYPE_CHECKING:  # pragma: no cover
    from ..config import Config, EvaluateConfig
    from ..runtime.distributed import World
    from ..scoring import Scorer

__all__ = [
    "REGISTRY",
    "Benchmark",
    "Metric",
    "check_names",
    "evaluate_model",
    "evaluate_scorer",
    "get_benchmark",
    "load_benchmarks",
    "load_items",
    "metric_specs",
    "run_evaluate",
]


#: the benchmarks besides ``stereoset`` that read the StereoSet file (an ``inputs["stereoset"]`` file is theirs too)
STEREOSET_READERS = ("stereoset-inter", "next-token")


@functools.lru_cache(maxsize=16)
def _cached_items(name: str, cfg_json: str, path: str | None, data_cache: str | None, mtime: float) -> tuple:
    from ..config import EvaluateConfig

    return tuple(get_benchmark(name).load(EvaluateConfig.model_validate_json(cfg_json), path, data_cache))


def _config_path(cfg: EvaluateConfig, key: str | None) -> str | None:
    """The value of a dotted ``evaluate`` key such as ``glue.path``."""
    if not key:
        return None
    obj: Any = cfg
    for part in key.split("."):
        obj = getattr(obj, part)
    return obj


def load_items(
    name: str, cfg: EvaluateConfig, path: str | Path | None = None, data_cache: str | None = None
) -> list[Any]:
    """The benchmark's items: ``path`` > the benchmark's ``evaluate.*path`` key > cache > download; bias type
    applied, and ``max_items`` for the per-epoch benchmarks (the others have their own size settings). The
    per-epoch benchmarks' parsed files are memoised (evaluation after every epoch reads them once)."""
    bench = get_benchmark(name)
    p = path or _config_path(cfg, bench.path_key)
    if not bench.per_epoch:  # run once per model; large training sets are not worth keeping in memory
        return list(bench.load(cfg, str(p) if p else None, data_cache))
    mtime = Path(p).stat().st_mtime if p and Path(p).exists() else 0.0
    items = list(_cached_items(name, cfg.model_dump_json(), str(p) if p else None, data_cache, mtime))
    return items[: cfg.max_items] if cfg.max_items else items


def load_benchmarks(
    cfg: EvaluateConfig,
    paths: Mapping[str, str | Path] | None = None,
    data_cache: str | None = None,
    per_epoch_only: bool = False,
) -> dict[str, list[Any]]:
    """Every configured benchmark's items (``per_epoch_only``: the cheap ones), parsed and checked: a malformed
    or duplicated item stops here, before a model is loaded (the evaluate and finetune doors and ``ccda run``'s
    pre-flight call this first)."""
    return {name: load_items(name, cfg, (paths or {}).get(name), data_cache) for name in cfg.benchmarks
            if not per_epoch_only or get_benchmark(name).per_epoch}


def evaluate_scorer(
    scorer: Scorer,
    cfg: EvaluateConfig,
    paths: Mapping[str, str | Path] | None = None,
    data_cache: str | None = None,
    per_epoch_only: bool = False,
    loaded: Mapping[str, list[Any]] | None = None,
    world: World | None = None,
) -> dict[str, dict[str, Any]]:
    """Run every configured benchmark (``per_epoch_only``: the cheap ones; ``loaded``: items already parsed by
    :func:`load_benchmarks`): ``{name: {"rows", "rejected", "aggregate", "info", "seconds", "n_items"}}``.

    ``world`` (:class:`context_cda.runtime.distributed.World`, a collective over the job's processes): each process scores
    its contiguous share of every benchmark's items (the scores of an item do not depend on the others scored
    beside it), rank 0 gathers the rows in item order, aggregates and returns the results; the others return {}."""
    from ..runtime.progress import Progress

    results: dict[str, dict[str, Any]] = {}
    check_names(cfg.benchmarks)
    loaded = loaded if loaded is not None else load_benchmarks(cfg, paths, data_cache, per_epoch_only)
    names = [n for n in cfg.benchmarks if n in loaded]
    with Progress(len(names), "benchmarks", "benchmark", bar=False) as bar:
        for name in names:
            bar.set_postfix_str(name)
            res = _score_one(scorer, cfg, name, loaded[name], world)
            if res is not None:
                results[name] = res
            bar.update(1)
    return results


def _score_one(scorer: Scorer, cfg: EvaluateConfig, name: str, items: list[Any],
               world: World | None = None) -> dict[str, Any] | None:
    """One benchmark: its (parsed) items scored and aggregated (under several processes, this process's share
    scored and, on rank 0, every share gathered and aggregated; None on the other ranks)."""
    bench = get_benchmark(name)
    t0 = time.perf_counter()
    if world is None or not world.distributed:
        rows, rejected, info = bench.score(scorer, items, cfg)
    else:
        share = list(world.part(items))
        parts = world.gather((*bench.score(scorer, share, cfg), len(share)))
        if parts is None:
            return None
        rows = [r for part in parts for r in part[0]]
        rejected = [r for part in parts for r in part[1]]
        info = next((part[2] for part in parts if part[3]), parts[0][2])  # how it was scored: the same everywhere
    secs = time.perf_counter() - t0
    agg = bench.aggregate(rows, cfg)
    agg.update({k: v for k, v in info.items() if k not in agg})
    return {"rows": rows, "rejected": rejected, "aggregate": agg, "info": info, "seconds": secs,
            "n_items": len(items)}


def evaluate_model(
    model: Any,
    tokenizer: Any,
    cfg: EvaluateConfig,
    data_cache: str | None = None,
    batch_size: int | None = None,
    progress: bool = False,
    with_predictions: bool = False,
    world: World | None = None,
) -> dict[str, float] | tuple[dict[str, float], dict[str, dict[str, Any]]]:
    """The per-epoch benchmarks of a loaded model, flat: stereoset_ss/lms/icat, crows_cs/stereo/antistereo,
    next_token_* with their bootstrap intervals (``<name>_ci_low`` / ``_ci_high``; the benchmarks that fine-tune
    a head are skipped: the evaluate stage runs them). ``with_predictions``: (flat, {benchmark: result}), each
    result as :func:`evaluate_scorer` gives it (per-item ``rows`` among them) with its reuse ``fingerprint``.

    ``world``: score under several processes, as :func:`evaluate_scorer` does (rank 0 gets the metrics, the
    others ``{}``). The model is left in eval mode; callers in a training loop switch it back to train()."""
    from ..scoring import scorer_for
    from .reuse import fingerprint

    scorer = scorer_for(model, tokenizer, batch_size=batch_size or cfg.batch_size, progress=progress)
    loaded = load_benchmarks(cfg, data_cache=data_cache, per_epoch_only=True)
    results = evaluate_scorer(scorer, cfg, data_cache=data_cache, loaded=loaded, world=world)
    flat: dict[str, float] = {}
    for name, res in results.items():
        flat.update(get_benchmark(name).flat(res["aggregate"]))
        res["fingerprint"] = fingerprint(cfg, name, loaded[name])
    return (flat, results) if with_predictions else flat


def run_evaluate(
    config: Config,
    inputs: Mapping[str, Path | str],
    out_dir: Path | str,
    model: str | None = None,
    name: str | None = None,
    progress: bool = False,
    target: str | None = None,
    arm: str | None = None,
    seed: int | None = None,
) -> dict[str, Any]:
    """The evaluate stage. The model is ``inputs["model"]`` (a fine-tuned ``final`` folder), else ``model``,
    else the target's reference (``config.run.targets[target]``: the vanilla model). An ``arm`` without a ``seed``
    is a post-hoc arm (:mod:`.posthoc`): the vanilla model with the arm applied (its projection from
    ``inputs["debias"]`` or ``inputs["artifact"]``), or a published checkpoint. ``inputs`` may also name benchmark
    files ({"stereoset": path, "crows": path}); otherwise evaluate.<name>_path, the data cache or a download
    supplies them. Writes, below ``out_dir``: ``<benchmark>/predictions.parquet``, ``<benchmark>/aggregate.json``,
    ``aggregate.json`` (all benchmarks and the flat metrics), ``rejected.parquet`` and ``manifest.json``."""
    from . import posthoc

    spec = posthoc.arm_of(config, target, arm, seed)
    model = str(inputs["model"]) if inputs.get("model") else model
    if spec is not None:
        model = posthoc.model_of(config, target, spec, model)
    if model is None and target is not None:
        model = config.run.targets[target]
    if model is None:
        raise ConfigError("evaluate: name a model (--model), a target (--target) or a fine-tuned model input.")
    if name is None and target is not None:
        name = "/".join([target, *([arm] if arm else []), *([f"seed-{seed}"] if seed is not None else [])])
    return _evaluate(config, inputs, Path(out_dir), model, name, progress, spec, target, arm)


def _evaluate(config: Config, inputs: Mapping[str, Path | str], out: Path, model: str, name: str | None,
              progress: bool, spec: Any, target: str | None, arm: str | None = None) -> dict[str, Any]:
    from ..errors import ModelError
    from ..models import parse_ref
    from ..runtime.progress import activity
    from ..scoring import load_scorer
    from ..steps import recorder
    from . import posthoc, reuse
    from .data import benchmark_file

    check_config_names(config.evaluate)  # a misspelt name fails now, not after the first benchmarks are scored
    projection = posthoc.precheck(config, spec, model, target or name or model, inputs)  # before any model loads
    benchmarks, skipped = posthoc.benchmarks_for(config.evaluate, spec, config.evaluate.after_training, arm)
    cfg = config.evaluate.model_copy(update={"benchmarks": benchmarks})
    name = name or parse_ref(model).name
    files = {
        b: benchmark_file(b, inputs.get(b) or getattr(cfg, f"{b}_path", None), config.run.data_cache)
        for b in ("stereoset", "crows")
        if b in cfg.benchmarks or (b == "stereoset" and set(STEREOSET_READERS) & set(cfg.benchmarks))
    }
    paths = {b: files["stereoset"] if b in STEREOSET_READERS else files.get(b) or inputs.get(b) for b in cfg.benchmarks}
    rec = recorder(out, versions=("torch", "transformers"))
    summary: dict[str, Any] = {"model": model, "name": name, "bias_type": cfg.bias_type,
                               "benchmark_files": {b: str(p) for b, p in files.items()},
                               **({"arm": spec.name} if spec else {}),
                               **({"not_applicable": skipped} if spec or skipped else {})}
    with rec.timed("load_benchmarks"):  # a bad benchmark file fails before the model is loaded
        loaded = load_benchmarks(cfg, {b: p for b, p in paths.items() if p}, config.run.data_cache)
    with rec.timed("load_model"), activity(f"load {model}"):
        try:
            scorer = load_scorer(model, device=config.run.device, batch_size=cfg.batch_size,
                                 cache=config.run.model_cache, progress=progress)
        except ModelError as e:
            if spec is None or spec.kind != "published":
                raise
            return _write_unavailable(summary, str(e), out, rec)
        scorer, applied = posthoc.apply(scorer, config, spec, inputs, target or name, projection)
    vanilla = target if spec is None and not inputs.get("model") and model == config.run.targets.get(target) else None
    reused = reuse.reusable(reuse.sources(inputs.get("model"), config, vanilla), cfg,
                            {b: v for b, v in loaded.items() if get_benchmark(b).per_epoch})
    with rec.timed("score"):
        scored = evaluate_scorer(scorer, cfg, data_cache=config.run.data_cache,
                                 loaded={b: v for b, v in loaded.items() if b not in reused})
    results = {b: reused.get(b) or scored[b] for b in cfg.benchmarks if b in reused or b in scored}
    summary.update({"family": scorer.family, **({"applied": applied} if applied else {}),
                    **({"reused": sorted(reused)} if reused else {})})
    return _write_results(results, summary, out, rec)


def _write_unavailable(summary: dict[str, Any], reason: str, out: Path, rec) -> dict[str, Any]:
    """A published checkpoint that could not be loaded: an aggregate saying why (the report's row shows it), no
    scores; the runner tries it again next time (:func:`.posthoc.available`)."""
    from ..io import write_json
    from ..steps import Counts

    summary = {**summary, "unavailable": reason, "metrics": {}, "counts": {}}
    path = write_json(out / AGGREGATE_FILE, {**summary, "benchmarks": {}})
    rec.finish(Counts(), outputs={"aggregate": path}, summary=summary)
    return summary


def _write_results(results: Mapping[str, Any], summary: dict[str, Any], out: Path, rec) -> dict[str, Any]:
    """Per benchmark: predictions.parquet and aggregate.json; then the flat metrics, the rejected items and the
    manifest."""
    import pandas as pd

    from ..io import write_json, write_rejected, write_table
    from ..steps import Counts

    flat: dict[str, float] = {}
    outputs: dict[str, Path] = {}
    rejected_all: list[dict[str, Any]] = []
    per_bench: dict[str, Any] = {}
    counts: dict[str, int] = {}
    for bname, res in results.items():
        bench = get_benchmark(bname)
        flat.update(bench.flat(res["aggregate"]))
        bdir = out / bname
        (bdir / NOT_APPLICABLE_FILE).unlink(missing_ok=True)
        outputs[f"{bname}_predictions"] = write_table(pd.DataFrame(res["rows"]), bdir / PREDICTIONS_FILE)
        outputs[f"{bname}_aggregate"] = write_json(bdir / AGGREGATE_FILE, res["aggregate"])
        rejected_all += [{"benchmark": bname, **r} for r in res["rejected"]]
        per_bench[bname] = res["aggregate"]
        counts[f"{bname}_in"] = res["n_items"]
        counts[f"{bname}_scored"] = len(res["rows"])
        counts[f"{bname}_rejected"] = len(res["rejected"])
        rec.timings[f"score_{bname}"] = round(res["seconds"], 4)
        counts_rate = res["n_items"] / res["seconds"] if res["seconds"] > 0 else float("nan")
        per_bench[bname]["items_per_s"] = round(counts_rate, 2)
        per_bench[bname]["seconds"] = round(res["seconds"], 2)
    for bname, why in summary.get("not_applicable", {}).items():  # one folder per benchmark (DVC's outs), saying why
        for stale in (PREDICTIONS_FILE, AGGREGATE_FILE):  # an earlier evaluation's scores are not this one's
            (out / bname / stale).unlink(missing_ok=True)
        outputs[f"{bname}_not_applicable"] = write_json(out / bname / NOT_APPLICABLE_FILE, {"benchmark": bname,
                                                                                         "not_applicable": why})
    summary = {**summary, "metrics": flat, "counts": counts}
    if "crows" in results:
        summary["crows_mode"] = results["crows"]["aggregate"].get("mode")
    outputs["aggregate"] = write_json(out / AGGREGATE_FILE, {**summary, "benchmarks": per_bench})
    outputs["rejected"] = write_rejected(
        pd.DataFrame(rejected_all, columns=["benchmark", "id", "source", "reason"]), out
    )
    n_in = sum(v for k, v in counts.items() if k.endswith("_in"))
    rec.finish(Counts(items_in=n_in, out=sum(v for k, v in counts.items() if k.endswith("_scored")),
                      rejected=sum(v for k, v in counts.items() if k.endswith("_rejected"))),
               outputs=outputs, summary=summary)
    return summary
