"""`ccda finetune`: debias target models on each arm's corpus (resumable; per-epoch evaluation)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._common import (
    ArmsOpt,
    ParamsOpt,
    ProfileOpt,
    RunDirOpt,
    SetOpt,
    TargetsOpt,
    console,
    print_summary,
    resolve_config,
)


def register(app: typer.Typer) -> None:
    @app.command("finetune")
    def finetune(
        profile: ProfileOpt = None,
        sets: SetOpt = None,
        run_dir: RunDirOpt = None,
        params: ParamsOpt = None,
        target: TargetsOpt = None,
        arm: ArmsOpt = None,
        input_path: Annotated[
            Path | None,
            typer.Option("--input", help="Corpus table instead of the run dir's (one target and arm only)."),
        ] = None,
        out: Annotated[
            Path | None, typer.Option("--out", help="Output folder (default: <run_dir>/finetune/<target>/<arm>).")
        ] = None,
        epochs: Annotated[int | None, typer.Option("--epochs", help="Fine-tuning epochs.")] = None,
        token_budget: Annotated[
            int | None, typer.Option("--token-budget", help="Tokens per arm (default: the smallest arm's).")
        ] = None,
        max_steps: Annotated[int | None, typer.Option("--max-steps", help="Stop after N optimizer steps.")] = None,
        no_eval: Annotated[bool, typer.Option("--no-eval", help="Skip the per-epoch benchmarks.")] = False,
    ) -> None:
        """Fine-tune each target on each arm's corpus; kill and rerun to resume from the last epoch."""
        import logging

        from ..train import arm_inputs, run_finetune

        logging.basicConfig(level=logging.INFO, format="%(message)s")
        cfg = resolve_config(
            profile, sets, run_dir, params, train={"epochs": epochs, "token_budget": token_budget,
                                                   "max_steps": max_steps}
        )
        targets = target or list(cfg.run.targets)
        arms = arm or list(cfg.train.arms)
        if (input_path or out) and len(targets) * len(arms) != 1:
            raise typer.BadParameter("--input/--out need exactly one --target and one --arm.")
        for t in targets:
            for a in arms:
                inputs = arm_inputs(cfg, t, a)
                if input_path is not None:
                    key = "cda" if a == "cda" else "corpus"
                    inputs = {key: input_path}
                out_dir = out or cfg.run_dir() / "finetune" / t / a
                summary = run_finetune(cfg, inputs, out_dir, t, a, evaluate=not no_eval)
                print_summary(f"finetune {t}/{a}", summary)
                console().print(f"wrote {out_dir / 'final'} and {out_dir / 'metrics.csv'}")
