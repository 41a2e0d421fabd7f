"""`ccda validate --stage cda|augment|entropy`: great-expectations suite at a stage boundary."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._common import (
    ForceOpt,
    ParamsOpt,
    ProfileOpt,
    RunDirOpt,
    SetOpt,
    given_file,
    pick,
    print_summary,
    resolve_config,
    run_step,
)


def register(app: typer.Typer) -> None:
    @app.command("validate")
    def validate(
        stage: Annotated[str, typer.Option("--stage", help="Boundary to validate: cda | augment | neutral | entropy.")],
        profile: ProfileOpt = None,
        sets: SetOpt = None,
        run_dir: RunDirOpt = None,
        params: ParamsOpt = None,
        target: Annotated[
            list[str] | None, typer.Option(help="Target model name (entropy boundary; repeatable; default: all).")
        ] = None,
        input: Annotated[Path | None, typer.Option("--input", callback=given_file, help="Table to validate (default: the stage's output).")] = None,
        out: Annotated[Path | None, typer.Option(help="Output folder (default: <run_dir>/validate/<stage>).")] = None,
        fail_on_error: Annotated[bool | None, typer.Option("--fail-on-error/--quarantine", help="Exit non-zero on failures.")] = None,
        force: ForceOpt = False,
    ) -> None:
        """Run the boundary's expectation suite; quarantine failing rows with reasons; save results.json."""
        from ..errors import ConfigError
        from ..layout import BOUNDARY_STEPS

        cfg = resolve_config(profile, sets, run_dir, params, validate={"fail_on_error": fail_on_error})
        if stage not in BOUNDARY_STEPS:
            raise ConfigError(f"--stage {stage!r}: boundaries are {', '.join(BOUNDARY_STEPS)}.")
        keys = [{"target": t} for t in pick(target, list(cfg.run.targets), "--target")] if stage == "entropy" else [{}]
        if (input or out) and len(keys) != 1:
            raise ConfigError("--input/--out need exactly one --target at the entropy boundary.")
        for k in keys:
            summary, _ = run_step(cfg, BOUNDARY_STEPS[stage], {stage: input}, out, force, **k)
            print_summary(f"validate {stage}" + (f" [{k['target']}]" if k else ""), summary)
