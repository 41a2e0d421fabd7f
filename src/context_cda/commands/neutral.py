"""`ccda neutral`: the generator rewrites each original sentence gender-neutrally (the context-neutral arm)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._common import (
    AllowErrorsOpt,
    ForceOpt,
    NoProgressOpt,
    ParamsOpt,
    ProfileOpt,
    RunDirOpt,
    SetOpt,
    print_summary,
    resolve_config,
    run_step,
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
        force: ForceOpt = False,
    ) -> None:
        """Gender-neutral rewrites by the generator (singular they, neutral nouns), each reviewed: no gendered word
        left and nothing else changed; retried like augment's, resumable (kill and rerun)."""
        cfg = resolve_config(profile, sets, run_dir, params, neutral={"limit": limit},
                             run={"allow_errors": allow_errors})
        summary, out_dir = run_step(cfg, "neutral", {"counterfactuals": input_path}, out, force,
                                    extra={"progress": not no_progress})
        print_summary("neutral", summary)
        from ._common import console

        console().print(f"wrote {out_dir} (augmented = the neutral rewrites, rejected and error tables)")
