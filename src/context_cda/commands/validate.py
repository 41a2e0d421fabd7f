"""`ccda validate --stage cda|augment|entropy`: great-expectations suite at a stage boundary."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._common import ParamsOpt, ProfileOpt, RunDirOpt, SetOpt, print_summary, resolve_config


def register(app: typer.Typer) -> None:
    @app.command("validate")
    def validate(
        stage: Annotated[str, typer.Option("--stage", help="Boundary to validate: cda | augment | entropy.")],
        profile: ProfileOpt = None,
        sets: SetOpt = None,
        run_dir: RunDirOpt = None,
        params: ParamsOpt = None,
        target: Annotated[str | None, typer.Option(help="Target model name (entropy boundary).")] = None,
        input: Annotated[Path | None, typer.Option("--input", help="Table to validate (default: the stage's output).")] = None,
        out: Annotated[Path | None, typer.Option(help="Output folder (default: <run_dir>/validate/<stage>).")] = None,
        fail_on_error: Annotated[bool | None, typer.Option("--fail-on-error/--quarantine", help="Exit non-zero on failures.")] = None,
    ) -> None:
        """Run the boundary's expectation suite; quarantine failing rows with reasons; save results.json."""
        from ..validation import run_validate

        cfg = resolve_config(profile, sets, run_dir, params, validate={"fail_on_error": fail_on_error})
        summary = run_validate(cfg, {stage: input} if input else {}, out, boundary=stage, target=target)
        print_summary(f"validate {stage}", summary)
