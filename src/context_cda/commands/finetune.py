"""`ccda finetune`: debias target models on each arm's corpus, once per seed (resumable; per-epoch evaluation)."""

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
    given_file,
    pick,
    pick_arms,
    print_summary,
    resolve_config,
    run_step,
)

SeedsOpt = Annotated[list[int] | None, typer.Option("--seed", help="Training seed (repeatable; default: train.seeds).")]


def finetune(
    profile: ProfileOpt = None,
    sets: SetOpt = None,
    run_dir: RunDirOpt = None,
    params: ParamsOpt = None,
    target: TargetsOpt = None,
    arm: ArmsOpt = None,
    seed: SeedsOpt = None,
    input_path: Annotated[
        Path | None,
        typer.Option("--input", callback=given_file, help="Corpus table instead of the arm's (one target, arm and seed only)."),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Output folder (default: <run_dir>/finetune/<target>/<arm>/seed-<seed>)."),
    ] = None,
    epochs: Annotated[int | None, typer.Option("--epochs", help="Fine-tuning epochs.")] = None,
    token_budget: Annotated[
        int | None, typer.Option("--token-budget", help="Tokens per arm (default: the smallest arm's).")
    ] = None,
    max_steps: Annotated[int | None, typer.Option("--max-steps", help="Stop after N optimizer steps.")] = None,
    no_eval: Annotated[bool, typer.Option("--no-eval", help="Skip the per-epoch benchmarks.")] = False,
    budget_only: Annotated[bool, typer.Option("--budget", help="Only resolve each arm's token budget (the budget "
                                              "step; it runs first anyway).")] = False,
    force: ForceOpt = False,
    task: Annotated[
        Path | None,
        typer.Option("--task", callback=given_file, help="Run the fine-tuning a Kubeflow TrainJob was given: the "
                     "task.json its launcher wrote on the run volume (config, inputs, folder, keys, token budget; "
                     "train.launcher=trainjob). Alone: no other option applies."),
    ] = None,
) -> None:
    """Fine-tune each target on each arm's (validated) corpus; kill and rerun to resume from the last epoch.

    Each arm's token budget (the smallest corpus of its budget group, or train.token_budget) is resolved first,
    once per target and arm (the budget step; --budget runs only that). One process, or N under torchrun
    (`torchrun --nproc-per-node N [--nnodes M ...] --no-python ccda finetune ...`): each rank trains its share of
    every optimizer step and scores its share of each epoch's benchmarks; rank 0 writes."""
    import logging

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if task is not None:
        from ..train.trainjob import run_task

        summary = run_task(task)
        print_summary(f"finetune {summary.get('target')}/{summary.get('arm')}/seed-{summary.get('seed')}", summary)
        return
    cfg = resolve_config(profile, sets, run_dir, params,
                         train={"epochs": epochs, "token_budget": token_budget, "max_steps": max_steps})
    from ..errors import ConfigError

    bad = [s for s in seed or [] if not 0 <= s < 2**32]
    if bad:
        raise ConfigError(f"--seed {bad[0]}: training seeds must lie in [0, 2**32) (numpy and torch seeds).")
    jobs = [(t, a, s) for t in pick(target, list(cfg.run.targets), "--target")
            for a in pick_arms(cfg, arm, "finetune", t) for s in (seed or cfg.train.seeds)]
    if (input_path or out) and len(jobs) != 1:
        raise ConfigError("--input/--out need exactly one --target, --arm and --seed (of "
                          f"{len(jobs)} configured: add --arm and --seed).")
    if input_path is None:  # the arms' budgets first (a corpus given by hand is its own budget)
        for t, a in dict.fromkeys((t, a) for t, a, _ in jobs):
            summary, _ = run_step(cfg, "budget", None, None, force, target=t, arm=a)
            console().print(f"budget {t}/{a}: {summary.get('token_budget')} tokens", highlight=False)
    if budget_only:
        return
    for t, a, s in jobs:
        summary, out_dir = run_step(cfg, "finetune", None, out, force,
                                    {"corpus": input_path} if input_path is not None else None,
                                    {"evaluate": not no_eval}, target=t, arm=a, seed=s)
        print_summary(f"finetune {t}/{a}/seed-{s}", summary)
        console().print(f"wrote {out_dir} (final model, per-epoch metrics)")


def register(app: typer.Typer) -> None:
    app.command("finetune")(finetune)
