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
    gpus: Annotated[int, typer.Option("--gpus", help="GPUs the run may use side by side (at least 1).")] = 1,
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
    wall time on --gpus GPUs, every rate used (measured or assumed) and the assumptions behind each figure."""
    from rich.table import Table

    from ..tools.costs import (
        Assumptions,
        check_plan_args,
        device_kind,
        load_throughput,
        plan_costs,
        wall_hours,
    )

    check_plan_args(gpus, sentences)
    cfg = resolve_config(profile, sets, params=params)
    table = load_throughput(throughput)
    assume = Assumptions()
    if sentences is not None:
        assume.corpus_sentences[cfg.ingest.corpus] = sentences
    costs = plan_costs(cfg, table, assume)
    kind = device_kind(table)
    out = Table(title=f"ccda plan: {cfg.profile or 'defaults'} on {gpus} x {table['gpu']['name']}",
                header_style="bold")
    for col in ("step", "parallel tasks", "work", f"{kind}-hours", f"wall h on {gpus} {kind}(s)"):
        out.add_column(col, justify="left" if col in ("step", "work") else "right")
    for c in costs:
        out.add_row(c.step, str(c.tasks), c.work, _hours(c.gpu_hours), _hours(c.gpu_hours / min(gpus, c.tasks)))
    total = sum(c.gpu_hours for c in costs)
    out.add_row("total", "", "", _hours(total), _hours(wall_hours(costs, gpus)), style="bold")
    con = console()
    con.print(out)
    dominant = max(costs, key=lambda c: c.gpu_hours) if costs else None
    if dominant and total > 0:
        con.print(f"dominant step: {dominant.step} ({dominant.gpu_hours / total:.0%} of the GPU-hours)")
    con.print(f"throughput: {table.get('about') or throughput or 'the packaged table'}", highlight=False)
    _print_rates(con, cfg, table, assume)
    for key, src in assume.sources().items():
        con.print(f"  assumption {key} = {getattr(assume, key)} ({src})", highlight=False)


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
    return f"{h:,.2f}" if h >= 0.01 else f"{h * 3600:.1f} s"  # under 36 s: seconds (0.2 s is not "0.0 min")


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)
