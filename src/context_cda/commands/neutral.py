"""`ccda neutral`: the generator rewrites each original sentence gender-neutrally (the context-neutral arm)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._common import (
    AllowErrorsOpt,
    NoProgressOpt,
    ParamsOpt,
    ProfileOpt,
    RunDirOpt,
    SetOpt,
    print_summary,
    resolve_config,
    step_io,
)


def register(app: typer.Typer) -> None:
    @app.command("neutral")
    def neutral(
        profile: ProfileOpt = None,
        sets: SetOpt = None,
        run_dir: RunDirOpt = None,
        params: ParamsOpt = None,
        input_path: Annotated[
            Path | None,
            typer.Option("--input", help="CDA table whose originals are rewritten (default: the one validation "
                         "kept, in the run folder)."),
        ] = None,
        out: Annotated[Path | None, typer.Option("--out", help="Output folder (default: <run_dir>/neutral).")] = None,
        limit: Annotated[int | None, typer.Option("--limit", help="Only the first N sentences.")] = None,
        no_progress: NoProgressOpt = False,
        allow_errors: AllowErrorsOpt = None,
    ) -> None:
        """Gender-neutral rewrites by the generator (singular they, neutral nouns), each reviewed: no gendered word
        left and nothing else changed; retried like augment's, resumable (kill and rerun)."""
        from ..augment import run_neutral

        cfg = resolve_config(profile, sets, run_dir, params, neutral={"limit": limit},
                             run={"allow_errors": allow_errors})
        inputs, out_dir = step_io(cfg, "neutral", {"counterfactuals": input_path}, out)
        print_summary("neutral", run_neutral(cfg, inputs, out_dir, progress=not no_progress))
        from ._common import console

        console().print(f"wrote {out_dir} (augmented = the neutral rewrites, rejected and error tables)")
