"""`ccda debias`: learn the projection arms' matrices (INLP, SentenceDebias) for target models from the run's corpus."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._common import (
    ArmsOpt,
    ForceOpt,
    ParamsOpt,
    ProfileOpt,
    RunDirOpt,
    SetOpt,
    TargetsOpt,
    console,
    pick,
    pick_arms,
    print_summary,
    resolve_config,
    run_step,
)


def debias(
    profile: ProfileOpt = None,
    sets: SetOpt = None,
    run_dir: RunDirOpt = None,
    params: ParamsOpt = None,
    target: TargetsOpt = None,
    arm: ArmsOpt = None,
    mode: Annotated[str | None, typer.Option("--mode", help="default | bias-bench (baselines.mode).")] = None,
    sentences: Annotated[Path | None, typer.Option("--sentences", help="An ingest step's folder (sentences.parquet, "
                                                   "rejected.parquet) instead of the run's.")] = None,
    cda_table: Annotated[Path | None, typer.Option("--cda", help="A validated counterfactual table instead of the "
                                                   "run's (sentence-debias in the default mode).")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Output folder (one target and arm only; default: "
                                             "<run_dir>/debias/<target>/<arm>).")] = None,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show progress bars.")] = True,
    force: ForceOpt = False,
) -> None:
    """Learn each projection arm of train.arms (inlp, sentence-debias) for each target: the INLP nullspace
    projection from the run's gendered and neutral sentences, the SentenceDebias subspace from its CDA pairs."""
    from ..errors import ConfigError

    cfg = resolve_config(profile, sets, run_dir, params, baselines={"mode": mode})
    jobs = [(t, a) for t in pick(target, list(cfg.run.targets), "--target") for a in pick_arms(cfg, arm, "debias", t)]
    if not jobs:
        raise ConfigError("debias: no projection arm in train.arms (inlp, sentence-debias) for these targets; add one "
                          "(--set train.arms=[...]) or name it with --arm.")
    if out is not None and len(jobs) != 1:
        raise ConfigError(f"--out needs exactly one --target and --arm (of {len(jobs)}).")
    for t, a in jobs:
        summary, folder = run_step(cfg, "debias", {"sentences": sentences, "cda": cda_table}, out, force,
                                   extra={"progress": progress}, target=t, arm=a)
        print_summary(f"debias {t}/{a}", summary)
        console().print(f"wrote {folder}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("debias")(debias)
