"""`ccda plan`: the work each step of a profile will do and its GPU-hours, from a throughput table."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._common import ParamsOpt, ProfileOpt, SetOpt, console, resolve_config


def plan(
    profile: ProfileOpt = None,
    sets: SetOpt = None,
    params: ParamsOpt = None,
    gpus: Annotated[str, typer.Option("--gpus", help="GPUs the run may use side by side (at least 1); several "
                                      "counts, comma-separated (--gpus 1,8,16), price one wall-time column each.")] = "1",
    throughput: Annotated[
        Path | None, typer.Option("--throughput", help="Throughput table (JSON; default: the packaged one); "
                                                         "'cpu': the packaged CPU calibration (CPU-hours on the "
                                                         "machine it measured).")
    ] = None,
    sentences: Annotated[
        int | None, typer.Option("--sentences", help="Corpus size in sentences, when the plan cannot know it.")
    ] = None,
) -> None:
    """Price a profile: work per step (generations, judge calls, training tokens, benchmark items), GPU-hours,
    wall time on each --gpus count (a fine-tuning spread over several GPUs with DDP or FSDP, generation over vLLM
    engines, each labelled an estimate until its rates are measured), every rate used (measured or assumed) and
    the assumptions behind each figure."""
    from rich.table import Table

    from ..tools.costs import (
        Assumptions,
        check_plan_args,
        device_kind,
        load_throughput,
        plan_costs,
        step_wall,
    )

    counts = gpu_counts(gpus)
    for n in counts:
        check_plan_args(n, sentences)
    cfg = resolve_config(profile, sets, params=params)
    table = load_throughput(throughput)
    assume = Assumptions()
    if sentences is not None:
        assume.corpus_sentences[cfg.ingest.corpus] = sentences
    costs = plan_costs(cfg, table, assume)
    kind = device_kind(table)
    measured = not any(r.op for r in _unmeasured(cfg, table, assume))
    label = "" if measured else " (estimate)"
    out = Table(title=f"ccda plan: {cfg.profile or 'defaults'} on {', '.join(map(str, counts))} x "
                f"{table['gpu']['name']}", header_style="bold")
    for col in ("step", "parallel tasks", "work", f"{kind}-hours", *(f"wall h on {n} {kind}(s){label}" for n in counts)):
        out.add_column(col, justify="left" if col in ("step", "work") else "right")
    for c in costs:
        out.add_row(c.step, str(c.tasks), c.work, _hours(c.gpu_hours),
                    *(_hours(step_wall(c, n, assume)[0]) for n in counts))
    total = sum(c.gpu_hours for c in costs)
    out.add_row("total", "", "", _hours(total),
                *(_hours(sum(step_wall(c, n, assume)[0] for c in costs)) for n in counts), style="bold")
    con = console()
    con.print(out)
    dominant = max(costs, key=lambda c: c.gpu_hours) if costs else None
    if dominant and total > 0:
        con.print(f"dominant step: {dominant.step} ({dominant.gpu_hours / total:.0%} of the GPU-hours)")
    for n in counts:
        for line in engines(cfg, costs, n, table, assume):
            con.print(f"  on {n} {kind}(s): {line}", highlight=False)
    con.print(f"throughput: {table.get('about') or throughput or 'the packaged table'}", highlight=False)
    _print_rates(con, cfg, table, assume)
    for key, src in assume.sources().items():
        con.print(f"  assumption {key} = {getattr(assume, key)} ({src})", highlight=False)


def gpu_counts(text: str) -> list[int]:
    """``--gpus 1,8,16`` -> [1, 8, 16] (a ConfigError naming the flag for anything else)."""
    from ..errors import ConfigError

    try:
        counts = [int(p) for p in str(text).split(",") if p.strip()]
    except ValueError:
        raise ConfigError(f"plan --gpus {text}: expected a number of GPUs, or several separated by commas "
                          "(--gpus 1,8,16).") from None
    if not counts:
        raise ConfigError("plan --gpus: name at least one number of GPUs (--gpus 1,8,16).")
    return counts


def engines(cfg, costs, gpus: int, table, assume) -> list[str]:
    """How the fine-tuning and the generation use ``gpus`` GPUs (the engines the wall times assume)."""
    from ..tools.costs import gpu_memory, step_wall

    lines = []
    for c in costs:
        wall, side, per = step_wall(c, gpus, assume)
        if c.step == "finetune":
            need = "" if c.gpus_per_task == 1 else (
                f"; its training state ({assume.train_state_bytes:g} bytes per parameter) needs {c.gpus_per_task} GPUs "
                f"of {gpu_memory(table, assume) / 1e9:,.0f} GB, sharded" + (
                    "" if cfg.train.strategy == "fsdp" else " (set train.strategy=fsdp, or train.lora)"))
            if wall == float("inf"):
                lines.append(f"finetune does not fit: one run needs at least {c.gpus_per_task} GPUs{need}")
                continue
            nodes = -(-per // assume.gpus_per_node)
            how = "one process each" if per == 1 else (f"torchrun over {per} GPUs each ({'a TrainJob of ' if nodes > 1 else ''}"
                                                       f"{nodes} node(s), {'FSDP' if c.gpus_per_task > 1 else 'DDP'})")
            lines.append(f"finetune: {c.tasks} run(s), {side} side by side, {how}{need}")
        elif c.step in ("augment", "sample", "neutral"):
            tp = cfg.augment.tensor_parallel_size or c.gpus_per_task // cfg.augment.pipeline_parallel_size
            hint = (f" (pipeline.generation_shards={c.tasks}: {gpus // c.gpus_per_task} would use every GPU)"
                    if gpus // c.gpus_per_task > c.tasks else "")
            lines.append(f"{c.step}: {side} vLLM engine(s) side by side, {c.gpus_per_task} GPU(s) each (tensor "
                         f"parallel {tp} x pipeline {cfg.augment.pipeline_parallel_size}){hint}")
    return lines


def _unmeasured(cfg, table, assume):
    from ..tools.costs import priced_rates

    return [r for r in priced_rates(cfg, table, assume) if not r.measured]


def _print_rates(con, cfg, table, assume) -> None:
    """Every rate the plan used, measured or assumed, and the CPU calibration the packaged table names."""
    from ..tools.costs import load_throughput, priced_rates

    used = priced_rates(cfg, table, assume)
    n = sum(r.measured for r in used)
    con.print(f"rates: {n} measured, {len(used) - n} assumed (tokens per second; MFU: "
              f"{table['gpu'].get('mfu_source', 'assumed')})", highlight=False)
    for r in used:
        status = "measured" if r.measured else "ASSUMED "
        con.print(f"  {status} {r.op:8s} {r.model}: {r.per_s:,.1f}/s  ({r.source})", highlight=False)
    cal = load_throughput().get("calibrations", {})
    if "cpu" in cal and table.get("gpu", {}).get("kind") != "cpu":
        cpu = load_throughput("cpu")["gpu"]
        con.print(f"CPU calibration: {cpu['name']}, {str(cpu.get('date', ''))[:10]}: `ccda plan --throughput cpu` "
                  "prices this profile in CPU-hours on that machine.", highlight=False)


def _hours(h: float) -> str:
    if h == float("inf"):
        return "does not fit"  # a task needs more GPUs than there are (the lines under the table say which)
    return f"{h:,.2f}" if h >= 0.01 else f"{h * 3600:.1f} s"  # under 36 s: seconds (0.2 s is not "0.0 min")


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)
